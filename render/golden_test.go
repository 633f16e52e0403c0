package render

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// renderCase is one input of the golden, CLI and concurrency tests.
type renderCase struct {
	name string
	// file is the RedisCluster YAML.
	file string
	// conf is the user redis.conf text ("" for none).
	conf string
}

// renderCases are the samples of config/samples and the variants of testdata/cases
// (a NAME.redis.conf beside NAME.yaml is that case's user ConfigMap text).
func renderCases(t testing.TB) []renderCase {
	t.Helper()
	cases := []renderCase{
		{name: "seed", file: "../config/samples/seed_rediscluster.yaml"},
		{name: "demo", file: "../config/samples/redis_v1alpha1_rediscluster.yaml"},
	}
	files, err := filepath.Glob("testdata/cases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("failed to list testdata/cases: %v", err)
	}
	for _, f := range files {
		c := renderCase{name: strings.TrimSuffix(filepath.Base(f), ".yaml"), file: f}
		if conf, err := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".redis.conf"); err == nil {
			c.conf = string(conf)
		}
		cases = append(cases, c)
	}
	return cases
}

func newRenderer(t testing.TB) *Renderer {
	t.Helper()
	r, err := New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// TestGolden renders every case and compares with testdata/golden/NAME.yaml;
// `go test ./render -run Golden -update` rewrites them after a deliberate change.
func TestGolden(t *testing.T) {
	r := newRenderer(t)
	for _, c := range renderCases(t) {
		t.Run(c.name, func(t *testing.T) {
			objs, err := r.RenderFile(c.file, c.conf)
			if err != nil {
				t.Fatalf("RenderFile(%s): %v", c.file, err)
			}
			var got bytes.Buffer
			if err := WriteYAML(&got, objs); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", c.name+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("failed to read golden file (run with -update to create it): %v", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("render of %s differs from %s (run with -update if intended)\n--- got\n%s", c.file, golden, got.String())
			}
		})
	}
}
