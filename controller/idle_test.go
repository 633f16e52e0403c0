package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// TestIdleReconcileCost: a reconcile of a Running cluster nobody changed reads CLUSTER
// NODES and CLUSTER INFO once per node and nothing else (no INFO replication: no upgrade
// can be under way; no INFO server: each process was asked once, when first seen), writes nothing to Redis or the API server, and comes back after the
// health-check interval.
func TestIdleReconcileCost(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	rc, _ := formRunning(t, h, redistest.Config{})
	h.reconcile(rc) // the status catches up with the formed cluster
	h.writes()
	h.redis.Reset()

	res := h.reconcile(rc)
	g.Expect(h.redis.Count("cluster nodes")).To(Equal(6))
	g.Expect(h.redis.Count("cluster info")).To(Equal(6))
	g.Expect(h.redis.Count("info")).To(BeZero(), "INFO replication or server read by an idle reconcile")
	g.Expect(h.redis.Writes()).To(BeZero())
	g.Expect(h.writes()).To(BeEmpty(), "API writes of an idle reconcile")
	g.Expect(res.RequeueAfter).To(Equal(requeueRunning))
	// Every instance's server is in the status, learnt when the pods were first seen.
	for _, c := range get(t, rc).Status.Conditions {
		g.Expect(c.Server).To(HavePrefix("redis "), "status.conditions[].server of %s", c.Name)
	}
}

// TestForgetClosesPools: a deleted cluster's clients and per-cluster memory are dropped by
// the reconcile that finds it gone.
func TestForgetClosesPools(t *testing.T) {
	h := newHarness(t)
	key := types.NamespacedName{Namespace: "ns", Name: "gone"}
	h.r.redis.factory(key, credentials{})
	mem := h.r.memoryOf(key)
	mem.failover = &failoverSent{}
	mem.servers = map[string]topology.Server{}
	if _, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.r.redis.byCR[key]; ok {
		t.Error("the deleted cluster's Redis clients are still held")
	}
	if _, ok := h.r.memories.Load(key); ok {
		t.Error("the deleted cluster's memory is still held")
	}
	if got := h.r.memoryOf(key); got == mem || got.servers != nil || got.failover != nil {
		t.Error("a cluster made again under the same name starts with the old one's memory")
	}
}
