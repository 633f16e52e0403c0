package render

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// TestCueCLIMatchesRenderer proves the preview of docs/templates.md (the pinned cue
// CLI on the same files) gives the same objects as the operator's renderer. The CLI
// preview has no user ConfigMap, so cases with one are left out.
func TestCueCLIMatchesRenderer(t *testing.T) {
	cue, err := filepath.Abs("../bin/cue")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cue); err != nil {
		t.Skipf("pinned cue CLI not installed (make test installs it): %v", err)
	}
	r := newRenderer(t)
	for _, c := range renderCases(t) {
		if c.conf != "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			file, err := filepath.Abs(c.file)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(cue, "export", ".", file, "-l", "input:", "-e", "objects", "--out", "json")
			cmd.Dir = "../templates"
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("cue export: %v\n%s", err, stderr.String())
			}
			var fromCLI []interface{}
			if err := utiljson.Unmarshal(out, &fromCLI); err != nil {
				t.Fatalf("failed to decode cue output: %v", err)
			}

			objs, err := r.RenderFile(c.file, "")
			if err != nil {
				t.Fatal(err)
			}
			// Both sides through JSON, so numbers and empty values compare alike.
			data, err := json.Marshal(objs)
			if err != nil {
				t.Fatal(err)
			}
			var fromRenderer []interface{}
			if err := utiljson.Unmarshal(data, &fromRenderer); err != nil {
				t.Fatal(err)
			}
			// Five always (ConfigMap, two Services, StatefulSet, PodDisruptionBudget), six
			// with the optional NetworkPolicy.
			if len(fromCLI) != len(fromRenderer) || len(fromCLI) < 5 {
				t.Fatalf("want the same 5 or more objects from each, got %d from cue and %d from the renderer", len(fromCLI), len(fromRenderer))
			}
			for i := range fromCLI {
				if !reflect.DeepEqual(fromCLI[i], fromRenderer[i]) {
					a, _ := yaml.Marshal(fromCLI[i])
					b, _ := yaml.Marshal(fromRenderer[i])
					t.Errorf("object %d differs\n--- cue CLI\n%s\n--- renderer\n%s", i, a, b)
				}
			}
		})
	}
}

// TestRunCLI checks the `render` subcommand prints the golden objects as `---`
// separated documents, and takes a user redis.conf.
func TestRunCLI(t *testing.T) {
	for _, c := range []struct{ name, file, conf string }{
		{"demo", "../config/samples/redis_v1alpha1_rediscluster.yaml", ""},
		{"userconf", "testdata/cases/userconf.yaml", "testdata/cases/userconf.redis.conf"},
	} {
		args := []string{"-f", c.file}
		if c.conf != "" {
			args = append(args, "--redis-conf", c.conf)
		}
		var out bytes.Buffer
		if err := RunCLI(args, &out); err != nil {
			t.Fatalf("RunCLI(%v): %v", args, err)
		}
		want, err := os.ReadFile(filepath.Join("testdata", "golden", c.name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("RunCLI(%v) differs from the golden file:\n%s", args, out.String())
		}
		if n := bytes.Count(out.Bytes(), []byte("\n---\n")); n != 4 {
			t.Errorf("RunCLI(%v) printed %d separators, want 4 (five objects)", args, n)
		}
	}
	if err := RunCLI([]string{"-f", "testdata/cases/missing.yaml"}, io.Discard); err == nil {
		t.Error("RunCLI on a missing file succeeded")
	}
	if err := RunCLI(nil, io.Discard); err == nil {
		t.Error("RunCLI without -f succeeded")
	}
}
