package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every sample renders with `bin/manager render -f`, the production one too, whose file also
// holds the ConfigMap its cluster names: other kinds are passed over, while a RedisCluster of
// another API version is still refused and a file with no RedisCluster still fails.
func TestReadFilePassesOverOtherKinds(t *testing.T) {
	samples, err := filepath.Glob("../config/samples/redis_v1alpha1_rediscluster*.yaml")
	if err != nil || len(samples) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	for _, f := range samples {
		if strings.Contains(f, "backup") {
			continue // a RedisClusterBackup, nothing to render
		}
		clusters, err := ReadFile(f)
		if err != nil || len(clusters) == 0 {
			t.Errorf("%s: %d clusters, %v", f, len(clusters), err)
		}
	}

	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mixed := write("mixed.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n"+
		"apiVersion: redis.middleware.hc.cn/v1alpha1\nkind: RedisCluster\nmetadata: {name: a}\nspec: {replicas: 6, version: \"7.0\"}\n")
	if clusters, err := ReadFile(mixed); err != nil || len(clusters) != 1 || clusters[0].Name != "a" {
		t.Errorf("a ConfigMap and a RedisCluster: %v %v", clusters, err)
	}
	other := write("other.yaml", "apiVersion: redis.middleware.hc.cn/v9\nkind: RedisCluster\nmetadata: {name: a}\n")
	if _, err := ReadFile(other); err == nil || !strings.Contains(err.Error(), "v9") {
		t.Errorf("a RedisCluster of another version: %v, want refused", err)
	}
	none := write("none.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
	if _, err := ReadFile(none); err == nil {
		t.Error("a file with no RedisCluster was accepted")
	}
}
