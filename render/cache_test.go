package render

import (
	"reflect"
	"testing"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// TestCacheReturnsCopies checks a cached render equals a fresh one, that changing a
// returned object (as the controller does with owner references) does not leak into
// the next render, and that a changed spec or redis.conf is not served from the cache.
func TestCacheReturnsCopies(t *testing.T) {
	r := newRenderer(t)
	rc := &redisv1alpha1.RedisCluster{}
	rc.Name, rc.Namespace = "cached", "ns"
	rc.Spec.Replicas, rc.Spec.Version = 6, "7.2"

	first, err := r.Render(rc, "")
	if err != nil {
		t.Fatal(err)
	}
	first[3].SetLabels(map[string]string{"changed": "by caller"})
	second, err := r.Render(rc, "")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := r.render(rc, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(second, fresh) {
		t.Errorf("cached render differs from a fresh render")
	}
	if second[3].GetLabels()["changed"] != "" {
		t.Errorf("a caller's change to a returned object reached the cache")
	}

	rc.Spec.Replicas = 9
	scaled, err := r.Render(rc, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructuredInt(scaled[3].Object, "spec", "replicas"); got != 9 {
		t.Errorf("after a spec change the StatefulSet has replicas %d, want 9", got)
	}
	withConf, err := r.Render(rc, "maxmemory-policy allkeys-lru\n")
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(withConf[0], scaled[0]) {
		t.Errorf("a different redis.conf was served from the cache")
	}
}
