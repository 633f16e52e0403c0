package topology

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pureImports are the only packages topology's code may import: no network, no files, no
// clock beyond durations, no client. Planning stays a function of an observation, so every
// planner can be table-tested and fuzzed, and the I/O lives in package redis.
var pureImports = map[string]bool{
	"errors": true, "fmt": true, "math": true, "sort": true, "strconv": true, "strings": true, "time": true,
	// Redis' own splitting of a line (sdssplitargs), pure itself: redis.conf is read as
	// Redis reads it (redisconf.go).
	"github.com/hc-middleware/redis-cluster-operator/redis/conf": true,
}

func TestTopologyDoesNoIO(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !pureImports[path] {
				t.Errorf("%s imports %q: package topology plans from observations only; I/O belongs in package redis", name, path)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no source file found")
	}
}
