package render

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// TestLiveDirectivesMatchGo checks CUE's copy of the live directives (_liveDirectives in
// templates/configmap.cue) against topology.LiveDirectives: for every directive a real
// redis-server 7.0 knows (CONFIG GET *), a change of its value in the user ConfigMap
// leaves the pod template's config hash as it was exactly when Go calls it live, while
// the ConfigMap always carries the new value (but for the directives the operator sets,
// whose lines and values are dropped).
func TestLiveDirectivesMatchGo(t *testing.T) {
	r := newRenderer(t)
	clusters, err := ReadFile("../config/samples/redis_v1alpha1_rediscluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc := clusters[0]
	rc.Spec.Pod[0].ConfigMap = "user"
	hashAndConf := func(userConf string) (string, string) { return renderHashAndConf(t, r, rc, userConf) }
	servers := redistest.Start(t, 1, redistest.Config{})
	c := goredis.NewClient(&goredis.Options{Addr: servers[0].Addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	all, err := c.ConfigGet(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for i := 0; i+1 < len(all); i += 2 {
		known[fmt.Sprint(all[i])] = true
	}
	for _, d := range topology.LiveDirectives {
		if !known[d.Name] {
			t.Errorf("live directive %s is unknown to redis-server", d.Name)
		}
	}
	for name := range known {
		before, _ := hashAndConf(name + " 67890\n")
		hash, conf := hashAndConf(name + " 12345\n")
		if strings.Contains(conf, "# ignored, set by the operator: "+name+"\n") {
			// A directive the operator sets: the user's line and value are dropped.
			continue
		}
		if live := topology.IsLiveDirective(name); live != (hash == before) {
			t.Errorf("%s: Go says live=%v, but a change of its value changed the config hash=%v", name, live, hash != before)
		}
		if got := topology.LiveSettings(conf)[name]; topology.IsLiveDirective(name) && got != "12345" {
			t.Errorf("%s: the rendered redis.conf sets it to %q, want 12345", name, got)
		}
	}
}

// renderHashAndConf renders rc with userConf as its ConfigMap's redis.conf and returns the
// pod template's config hash and the rendered redis.conf.
func renderHashAndConf(t *testing.T, r *Renderer, rc *v1alpha1.RedisCluster, userConf string) (hash, conf string) {
	t.Helper()
	objs, err := r.Render(rc, userConf)
	if err != nil {
		t.Fatalf("Render with %q: %v", userConf, err)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "StatefulSet":
			hash, _, _ = unstructured.NestedString(o.Object, "spec", "template", "metadata", "annotations", "redis.middleware.hc.cn/config-hash")
		case "ConfigMap":
			conf, _, _ = unstructured.NestedString(o.Object, "data", "redis.conf")
		}
	}
	return hash, conf
}

// TestLiveOnlyConfigMapDoesNotRoll: attaching a user ConfigMap that holds only live
// directives (and lines the operator ignores) leaves the config hash as it was without a
// ConfigMap, so no pod restarts; the first directive that needs a restart changes it.
func TestLiveOnlyConfigMapDoesNotRoll(t *testing.T) {
	r := newRenderer(t)
	clusters, err := ReadFile("../config/samples/redis_v1alpha1_rediscluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bare := clusters[0].DeepCopy()
	bare.Spec.Pod[0].ConfigMap = ""
	none, _ := renderHashAndConf(t, r, bare, "")
	with := clusters[0].DeepCopy()
	with.Spec.Pod[0].ConfigMap = "tuning"
	for _, userConf := range []string{
		"",
		"maxmemory-policy allkeys-lru\nhz 20\n",
		"# a comment\nmaxmemory-policy allkeys-lru\nport 7000\n", // port: ignored, set by the operator
	} {
		hash, conf := renderHashAndConf(t, r, with, userConf)
		if hash != none {
			t.Errorf("ConfigMap %q changes the config hash (a roll of every pod); redis.conf:\n%s", userConf, conf)
		}
		if userConf != "" && !strings.Contains(conf, "# From ConfigMap tuning") {
			t.Errorf("ConfigMap %q: the rendered redis.conf does not carry it:\n%s", userConf, conf)
		}
	}
	if hash, _ := renderHashAndConf(t, r, with, "maxmemory-policy allkeys-lru\nappendonly yes\n"); hash == none {
		t.Error("a ConfigMap setting appendonly (a restart directive) left the config hash as it was")
	}
}
