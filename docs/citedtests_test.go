package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	testName   = regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9_]*`)
	testDefine = regexp.MustCompile(`(?m)^func (Test[A-Z][A-Za-z0-9_]*)\(`)
)

// skipDirs hold no text of the project's own: build output, the devcluster's state,
// generated CUE schemas.
var skipDirs = map[string]bool{".git": true, "bin": true, ".devcluster": true, "dist": true, "node_modules": true, "cue.mod": true}

// TestCitedTestsExist: every test a doc, comment or script names by its Go name is a test
// that exists, so a sentence saying which test checks something stays true when that test
// is renamed or removed.
func TestCitedTestsExist(t *testing.T) {
	defined := map[string]bool{}
	cited := map[string][]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sh", ".yaml", ".yml", ".cue", ".txt", ".tpl":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(raw)
		if strings.HasSuffix(path, "_test.go") {
			for _, m := range testDefine.FindAllStringSubmatch(text, -1) {
				defined[m[1]] = true
			}
		}
		rel := strings.TrimPrefix(filepath.ToSlash(path), "../")
		for _, name := range testName.FindAllString(text, -1) {
			cited[name] = append(cited[name], rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(defined) < 100 {
		t.Fatalf("found only %d test functions; has the walk missed the repository?", len(defined))
	}
	var missing []string
	for name, where := range cited {
		if !defined[name] {
			sort.Strings(where)
			missing = append(missing, name+" (cited in "+strings.Join(compact(where), ", ")+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("these tests are cited but no test function has the name:\n  %s", strings.Join(missing, "\n  "))
	}
}

func compact(xs []string) []string {
	var out []string
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}
