package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// A spec whose image holds a server that cannot read the RDB the instances write is
// refused before any pod moves: the phase stays Running, one DowngradeRefused Warning
// names the field and the servers, nothing is applied and nothing is written to Redis.
// Setting the spec back clears it; an image the operator cannot tell rolls as before.
func TestDowngradeIsRefusedBeforeAnyPodMoves(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	rc := formCluster(t, h) // real redis-servers, 7.0.15: RDB 10
	sts := liveStatefulSet(t, rc)
	h.events()

	refused := func(wants ...string) {
		t.Helper()
		h.redis.Reset()
		for i := 0; i < 3; i++ {
			h.reconcile(rc)
		}
		got := get(t, rc)
		g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning), "a refused spec is no upgrade: %s", got.Status.Reason)
		g.Expect(got.Status.Reason).To(ContainSubstring("SpecRefused"))
		for _, w := range wants {
			g.Expect(got.Status.Reason).To(ContainSubstring(w))
		}
		g.Expect(warnings(h.events(), ReasonDowngradeRefused)).To(ConsistOf(ContainSubstring(wants[0])), "one Warning, not one per reconcile")
		g.Expect(liveStatefulSet(t, rc).ResourceVersion).To(Equal(sts.ResourceVersion), "the StatefulSet keeps its template")
		g.Expect(h.redis.WriteNames()).To(BeEmpty())
		g.Expect(h.redis.Count("info")).To(BeZero(), "no INFO replication: no roll may be under way")
		g.Expect(deletedPods(t, rc)).To(BeEmpty())
	}

	// Redis 7.0 writes RDB 10; Redis 6.2 reads up to 9.
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Version = "6.2" })
	refused("spec.version: library/redis:6.2 cannot load",
		"6 instances run redis 7.0.15, which writes RDB 10; redis 6.2 reads RDB up to 9",
		"keeps serving on library/redis:7.2")

	// Set back: cleared, nothing to apply.
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Version = "7.2" })
	h.reconcile(rc)
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	g.Expect(got.Status.Reason).NotTo(ContainSubstring("RDB"))
	g.Expect(liveStatefulSet(t, rc).ResourceVersion).To(Equal(sts.ResourceVersion))

	// Instances that said they run Valkey 9.1 (what learnServers remembers per process),
	// and a spec asking for Valkey 8.1, which reads up to RDB 11.
	key := types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name}
	known := h.r.memoryOf(key).servers
	valkey := map[string]topology.Server{}
	for id := range known {
		valkey[id] = topology.Server{Name: topology.ServerValkey, Version: "9.1.2"}
	}
	g.Expect(valkey).To(HaveLen(6))
	h.r.memoryOf(key).servers = valkey
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Repository = "valkey/valkey"; s.Version = "8.1" })
	refused("spec.repository and spec.version: valkey/valkey:8.1 cannot load",
		"6 instances run valkey 9.1.2, which writes RDB 80; valkey 8.1 reads RDB up to 11")

	// The same through middlewareImage.
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) {
		s.Pod = []redisv1alpha1.RedisPodTemplate{{MiddlewareImage: "docker.io/library/redis:8.0"}}
	})
	refused("spec.pod[0].middlewareImage: docker.io/library/redis:8.0 cannot load",
		"valkey 9.1.2, which writes RDB 80; redis 8.0 reads RDB up to 12")

	// An image whose name does not tell the server: the roll goes on as before.
	h.r.memoryOf(key).servers = known
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) {
		s.Repository, s.Version, s.Pod = "library/redis", "6.2-alpine", nil
	})
	h.reconcileUntil(rc, redisv1alpha1.PhaseUpgrading, 3)
	g.Expect(liveStatefulSet(t, rc).Spec.Template.Spec.Containers[0].Image).To(Equal("library/redis:6.2-alpine"))
	g.Expect(warnings(h.events(), ReasonDowngradeRefused)).To(BeEmpty())
}

// A reconcile in which Redis did not answer still refuses a downgrade, from the servers the
// instances said they run before: one slow reconcile must not let the older image roll.
func TestDowngradeIsRefusedWhileRedisDoesNotAnswer(t *testing.T) {
	g := NewWithT(t)
	image := func(img string) map[string]any {
		return map[string]any{"containers": []any{map[string]any{"name": "redis", "image": img}}}
	}
	rendered := &unstructured.Unstructured{Object: map[string]any{"kind": "StatefulSet",
		"spec": map[string]any{"template": map[string]any{"spec": image("library/redis:6.2")}}}}
	s := &scope{
		cluster:         newCluster("ns", 6),
		statefulSet:     &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "redis", Image: "library/redis:7.2"}}}}}},
		rendered:        []*unstructured.Unstructured{rendered},
		templateChanged: true,
	}
	g.Expect(s.redis).To(BeNil(), "Redis was not observed")
	observeDowngrade(s, []topology.Server{{Name: topology.ServerRedis, Version: "7.0.15"}})
	g.Expect(s.specErr).To(MatchError(ContainSubstring("redis 6.2 reads RDB up to 9")))
	g.Expect(s.templateChanged).To(BeFalse(), "a refused image is no change of template")
}
