package render

import (
	"fmt"
	"reflect"
	"testing"
)

// TestRendererRenewsItsCompilation: after renewAfter evaluations the next render uses a
// new compilation (a new CUE context, so what the old one kept is freed), and renders
// before and after it give the same objects.
func TestRendererRenewsItsCompilation(t *testing.T) {
	r := newRenderer(t)
	clusters, err := ReadFile("../config/samples/redis_v1alpha1_rediscluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc := clusters[0]
	namespace := rc.Namespace
	first := r.compiled.Load()
	want, err := r.render(rc, "", false)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < renewAfter; i++ {
		rc.Namespace = fmt.Sprintf("ns-%d", i)
		if _, err := r.render(rc, "", false); err != nil {
			t.Fatal(err)
		}
	}
	if r.compiled.Load() != first {
		t.Fatalf("renewed before %d evaluations", renewAfter)
	}
	rc.Namespace = namespace
	got, err := r.render(rc, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if r.compiled.Load() == first {
		t.Fatalf("not renewed after %d evaluations", renewAfter)
	}
	if len(got) != len(want) {
		t.Fatalf("the renewed compilation renders %d objects, the first %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i].Object, want[i].Object) {
			t.Fatalf("the renewed compilation renders %s differently:\n%v\nwant\n%v", want[i].GetKind(), got[i].Object, want[i].Object)
		}
	}
}
