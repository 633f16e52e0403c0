package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// startPodsFrom is startPods for the pods a scale-out adds: ordinals first, first+1, ...
func startPodsFrom(t *testing.T, rc *redisv1alpha1.RedisCluster, first int, servers []*redistest.Server) {
	t.Helper()
	ctx := context.Background()
	for k, srv := range servers {
		i := first + k
		host, port, _ := strings.Cut(srv.Addr, ":")
		p, _ := strconv.Atoi(port)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: fmt.Sprintf("%s-%d", rc.Name, i), Labels: redisv1alpha1.SelectorLabels(rc.Name)},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%3),
				Containers: []corev1.Container{{Name: "redis", Image: "redis:7.2", Ports: []corev1.ContainerPort{{Name: "redis", ContainerPort: int32(p)}}}}},
		}
		if err := apiClient.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: host, HostIP: "10.0.0." + strconv.Itoa(i%3+1),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if err := apiClient.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
}

// An AssignReceive entry the schema cannot judge (a giver that is no master) refuses the
// scale-out with the field named in the status and a Warning event; no slot moves and
// the cluster keeps serving. The same spec with five entries panicked in PlanScale.
func TestScaleOutRefusesBadAssignStrategyByField(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	rc := formCluster(t, h)
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) {
		s.Replicas = 8
		s.UpdateStrategy = redisv1alpha1.RedisUpdateStrategy{Type: redisv1alpha1.UpdateStrategyAssignReceive,
			AssignStrategies: []redisv1alpha1.AssignStrategy{{Slots: 1000, FromReplicas: "demo-0,nosuch"}}}
	})
	h.reconcileUntil(rc, redisv1alpha1.PhaseScaling, 5)
	startPodsFrom(t, rc, 6, redistest.Start(t, 2, redistest.Config{}))
	want := "spec.updateStrategy.assignStrategies[0].fromReplicas: \"nosuch\" is not an existing master"
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(get(t, rc).Status.Reason, want) {
		if time.Now().After(deadline) {
			got := get(t, rc)
			t.Fatalf("phase %s, reason %q", got.Status.Phase, got.Status.Reason)
		}
		h.reconcile(rc)
		time.Sleep(100 * time.Millisecond)
	}
	got := get(t, rc)
	t.Logf("phase %s, reason %q", got.Status.Phase, got.Status.Reason)
	g.Expect(h.events()).To(ContainElement(And(HavePrefix("Warning "+ReasonInvalidSpec), ContainSubstring(want))))
	g.Expect(h.redis.WriteNames()).NotTo(ContainElement(ContainSubstring("setslot")))
	g.Expect(h.redis.WriteNames()).NotTo(ContainElement(ContainSubstring("migrate")))
}
