//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

const scaleKeys = 500

// TestScaleOutAndIn resizes the demo sample with `kubectl scale` while a client writes:
// 6 → 8 pods gives 4 masters of ~4096 slots with a replica each, 8 → 6 gives 3 masters
// again, every node knowing exactly the 6 left; no key is lost either way.
func TestScaleOutAndIn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns, name := "e2e-scale", "demo"
	formDemo(ctx, t, ns, nil)
	writeKeys(ctx, t, ns, name, "scale", scaleKeys)

	w := &writer{errs: map[string]int{}}
	stop, done := make(chan struct{}), make(chan struct{})
	go w.run(ctx, ns, name, stop, done)
	defer func() {
		select {
		case <-done:
		default:
			close(stop)
			<-done
		}
	}()

	out := resize(ctx, t, ns, name, 8)
	expectShape(ctx, t, ns, name, 8, 4, 4096)
	in := resize(ctx, t, ns, name, 6)
	eventuallyFormed(ctx, t, ns, name)
	expectShape(ctx, t, ns, name, 6, 3, 5461)
	close(stop)
	<-done
	w.expectWrote(t, 20)
	expectKeys(ctx, t, ns, name, "scale", scaleKeys, w.ok)
	t.Logf("scale: out 6->8 %.1fs, in 8->6 %.1fs; writes during it: %d ok, %d failed %v, longest gap %v", out.Seconds(), in.Seconds(), len(w.ok), w.failed, w.errs, w.maxGap.Round(time.Millisecond))
	evs, err := stack.Events(ctx, getCluster(ctx, t, ns, name))
	if err == nil {
		for _, e := range evs {
			if e.Reason == "RedisAction" && len(e.Message) > 12 && e.Message[:12] == "MigrateSlots" {
				t.Logf("event: %s", e.Message)
			}
		}
	}
}

func resize(ctx context.Context, t *testing.T, ns, name string, n int) time.Duration {
	t.Helper()
	start := time.Now()
	if out, err := stack.Kubectl("-n", ns, "scale", "rec/"+name, fmt.Sprintf("--replicas=%d", n)); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	// Running with the new size observed: a scale-in of a few hundred keys can be Scaling
	// for less than one poll.
	if err := stack.WaitForObservedPhase(ctx, ns, name, "Running", 4*time.Minute); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, ns, name).Status.Reason)
	}
	return time.Since(start)
}

// expectShape checks from every pod's Redis: the node count, the masters with one replica
// each, and every master's share of the slots (± 1).
func expectShape(ctx context.Context, t *testing.T, ns, name string, pods, masters, share int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		expectShapeG(ctx, g, ns, name, pods, masters, share)
	}, time.Minute, time.Second).Should(Succeed())
}

// expectShapeG is expectShape's check, once.
func expectShapeG(ctx context.Context, g Gomega, ns, name string, pods, masters, share int) {
	ps, err := stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ps).To(HaveLen(pods))
	st := &topology.ClusterState{}
	for _, p := range ps {
		c := framework.NodeClient(p.Status.PodIP, pw(ctx, ns, name))
		text, err := c.ClusterNodes(ctx).Result()
		c.Close()
		g.Expect(err).NotTo(HaveOccurred())
		nodes, err := topology.ParseClusterNodes(text)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes).To(HaveLen(pods), "CLUSTER NODES on %s", p.Name)
		st.Members = append(st.Members, topology.MemberState{Member: topology.Member{Pod: p.Name}, Nodes: nodes})
		replicas, ms := map[string]int{}, 0
		for _, n := range nodes {
			if n.Replica {
				replicas[n.MasterID]++
			}
		}
		for _, n := range nodes {
			if n.Master && len(n.Slots) > 0 {
				ms++
				g.Expect(n.Slots.Count()).To(BeNumerically("~", share, 1), "slots of %s", n.ID)
				g.Expect(replicas[n.ID]).To(Equal(1), "replicas of %s", n.ID)
			}
		}
		g.Expect(ms).To(Equal(masters))
	}
	// Masters' markers only, as the operator counts them (a replica's may be stale).
	g.Expect(framework.NoOpenSlots(st)).To(Succeed())
	rc, err := stack.GetRedisCluster(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	phase, _, _ := unstructured.NestedString(rc.Object, "status", "phase")
	got, _, _ := unstructured.NestedInt64(rc.Object, "status", "masters")
	g.Expect(phase).To(Equal(string(redisv1alpha1.PhaseRunning)))
	g.Expect(got).To(BeEquivalentTo(masters))
}
