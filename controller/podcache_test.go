package controller

import (
	"encoding/json"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hc-middleware/redis-cluster-operator/render"
)

// TestTrimPod: a pod made from the seed sample's rendered StatefulSet keeps, once trimmed
// for the cache, everything the operator reads of it, and loses most of its size.
func TestTrimPod(t *testing.T) {
	clusters, err := render.ReadFile("../config/samples/seed_rediscluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := renderer.Render(clusters[0], "")
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	for _, o := range objs {
		if o.GetKind() != "StatefulSet" {
			continue
		}
		sts := &appsv1.StatefulSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, sts); err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		pod = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: sts.Name + "-0", Namespace: "ns", UID: "u-0", Labels: sts.Spec.Template.Labels,
				Annotations:       sts.Spec.Template.Annotations,
				CreationTimestamp: now, DeletionTimestamp: &now,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}},
			},
			Spec: sts.Spec.Template.Spec,
			Status: corev1.PodStatus{
				Phase: corev1.PodRunning, PodIP: "10.0.0.7", HostIP: "192.168.0.3",
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "redis", Ready: true, RestartCount: 2}},
			},
		}
		pod.Spec.NodeName = "node-2"
	}
	if pod == nil {
		t.Fatal("the seed sample rendered no StatefulSet")
	}
	if len(pod.Spec.Containers) == 0 || clientPort(pod) == 0 {
		t.Fatalf("the rendered pod has no containers or client port: %+v", pod.Spec.Containers)
	}
	before := pod.DeepCopy()
	sizeBefore := jsonSize(t, before)

	out, err := TrimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := out.(*corev1.Pod)

	if trimmed.ManagedFields != nil {
		t.Error("managedFields are kept")
	}
	want := before.ObjectMeta
	want.ManagedFields = nil
	if !reflect.DeepEqual(trimmed.ObjectMeta, want) {
		t.Errorf("metadata changed:\n got %+v\nwant %+v", trimmed.ObjectMeta, want)
	}
	if !reflect.DeepEqual(trimmed.Status, before.Status) {
		t.Error("status changed")
	}
	if trimmed.Spec.NodeName != "node-2" {
		t.Errorf("node %q, want node-2", trimmed.Spec.NodeName)
	}
	if got, want := clientPort(trimmed), clientPort(before); got != want {
		t.Errorf("client port %d, want %d", got, want)
	}
	if podReady(trimmed) != podReady(before) {
		t.Error("readiness changed")
	}
	for i, c := range trimmed.Spec.Containers {
		if c.Name != before.Spec.Containers[i].Name || !reflect.DeepEqual(c.Ports, before.Spec.Containers[i].Ports) {
			t.Errorf("container %d: %s %v, want %s %v", i, c.Name, c.Ports, before.Spec.Containers[i].Name, before.Spec.Containers[i].Ports)
		}
	}
	sizeAfter := jsonSize(t, trimmed)
	t.Logf("a cached pod: %d bytes of JSON, %d trimmed (%.0f%% less)", sizeBefore, sizeAfter, 100*(1-float64(sizeAfter)/float64(sizeBefore)))
	if sizeAfter*2 > sizeBefore {
		t.Errorf("trimmed pod is %d bytes of %d: less than half was dropped", sizeAfter, sizeBefore)
	}

	// A tombstone (or anything not a pod) passes unchanged.
	if got, _ := TrimPod("tombstone"); got != "tombstone" {
		t.Errorf("a non-pod came back as %v", got)
	}
}

func jsonSize(t *testing.T, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}
