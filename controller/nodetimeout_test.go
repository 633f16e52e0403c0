package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// The node timeout MIGRATE's timeout follows is the shorter of the applied and the rendered
// redis.conf: while pods roll from one to the other, some run each.
func TestNodeTimeoutInForce(t *testing.T) {
	scopeWith := func(applied, rendered string) *scope {
		rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"}}
		s := &scope{cluster: rc, live: map[string]client.Object{}}
		if rendered != "" {
			u := &unstructured.Unstructured{}
			u.SetKind("ConfigMap")
			u.SetName(configMapName("demo"))
			_ = unstructured.SetNestedField(u.Object, rendered, "data", "redis.conf")
			s.rendered = append(s.rendered, u)
		}
		if applied != "" {
			s.live["ConfigMap/"+configMapName("demo")] = &corev1.ConfigMap{Data: map[string]string{"redis.conf": applied}}
		}
		return s
	}
	const tpl = "cluster-node-timeout 5000\n"
	cases := map[string]struct {
		applied, rendered string
		want              time.Duration
	}{
		"nothing read yet":           {"", "", redis.NodeTimeout},
		"the template's":             {tpl, tpl, 5 * time.Second},
		"lowered, not yet rolled":    {tpl, tpl + "cluster-node-timeout 1000\n", time.Second},
		"raised, pods still on 1000": {tpl + "cluster-node-timeout 1000\n", tpl + "cluster-node-timeout 15000\n", time.Second},
	}
	for name, c := range cases {
		if got := nodeTimeout(scopeWith(c.applied, c.rendered)); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}
