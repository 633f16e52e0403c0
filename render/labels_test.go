package render

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// TestLabelsMatchTheAPI checks the copy of the labels CUE keeps (templates/helpers.cue)
// against their one Go definition (api/v1alpha1/labels.go), which the controller selects
// pods with and main.go caches them by.
func TestLabelsMatchTheAPI(t *testing.T) {
	r := newRenderer(t)
	clusters, err := ReadFile("../config/samples/redis_v1alpha1_rediscluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc := clusters[0]
	objs, err := r.Render(rc, "")
	if err != nil {
		t.Fatal(err)
	}
	want := redisv1alpha1.SelectorLabels(rc.Name)
	for _, o := range objs {
		labels := o.GetLabels()
		for k, v := range want {
			if labels[k] != v {
				t.Errorf("%s %s: label %s=%q, the API says %q", o.GetKind(), o.GetName(), k, labels[k], v)
			}
		}
		if labels[redisv1alpha1.LabelManagedBy] != redisv1alpha1.ManagedBy {
			t.Errorf("%s %s: label %s=%q, the API says %q", o.GetKind(), o.GetName(), redisv1alpha1.LabelManagedBy, labels[redisv1alpha1.LabelManagedBy], redisv1alpha1.ManagedBy)
		}
		if o.GetKind() != "StatefulSet" {
			continue
		}
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		if len(sel) != len(want) {
			t.Errorf("StatefulSet selector %v, the API says %v", sel, want)
		}
		for k, v := range want {
			if sel[k] != v {
				t.Errorf("StatefulSet selector %s=%q, the API says %q", k, sel[k], v)
			}
		}
	}
}
