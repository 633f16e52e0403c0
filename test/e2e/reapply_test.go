//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// The re-apply suite: a RedisCluster deleted while its data is kept (hostPath directories,
// claims of a volumeClaimTemplate) and applied again re-forms from the nodes' own
// nodes.conf at their new addresses, and serves every key it had. Deleted with
// --cascade=orphan, its StatefulSet and pods keep serving and are adopted again.

const reapplyKeys = 100000

// preload writes PREFIX-0 … PREFIX-(n-1), each holding its number, straight to the master
// owning each key's slot, one pipeline per master and batch: a cluster client makes one
// round trip per key, minutes for 100,000 keys on a loaded 2-core machine.
func preload(ctx context.Context, t *testing.T, ns, name, prefix string, n int) {
	t.Helper()
	start := time.Now()
	for addr, keys := range keysByMaster(ctx, t, ns, name, prefix, n) {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		for from := 0; from < len(keys); from += 1000 {
			_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, i := range keys[from:min(from+1000, len(keys))] {
					p.Set(ctx, fmt.Sprintf("%s-%d", prefix, i), i, 0)
				}
				return nil
			})
			if err != nil {
				c.Close()
				t.Fatalf("SET on %s: %v", addr, err)
			}
		}
		c.Close()
	}
	t.Logf("preloaded %d keys %s-* in %.1fs", n, prefix, time.Since(start).Seconds())
}

// countLost reads every key preload wrote from the master owning its slot now and returns
// how many are missing or wrong.
func countLost(ctx context.Context, t *testing.T, ns, name, prefix string, n int) int {
	t.Helper()
	lost := 0
	for addr, keys := range keysByMaster(ctx, t, ns, name, prefix, n) {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		for from := 0; from < len(keys); from += 1000 {
			batch := keys[from:min(from+1000, len(keys))]
			cmds := make([]*goredis.StringCmd, len(batch))
			_, _ = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for k, i := range batch {
					cmds[k] = p.Get(ctx, fmt.Sprintf("%s-%d", prefix, i))
				}
				return nil
			})
			for k, cmd := range cmds {
				if v, err := cmd.Int(); err != nil || v != batch[k] {
					lost++
				}
			}
		}
		c.Close()
	}
	return lost
}

// keysByMaster groups key numbers by the address of the master owning their slot, from the
// pods' own view (CLUSTER NODES).
func keysByMaster(ctx context.Context, t *testing.T, ns, name, prefix string, n int) map[string][]int {
	t.Helper()
	addrs, err := stack.PodAddrs(ctx, ns, selectorOf(name))
	if err != nil {
		t.Fatal(err)
	}
	f := redis.NewFactory(redis.Options{})
	defer f.Close()
	slots, err := redis.ClusterSlots(ctx, f, addrs)
	if err != nil {
		t.Fatal(err)
	}
	owner := make([]string, topology.SlotCount)
	for _, s := range slots {
		for slot := s.Start; slot <= s.End; slot++ {
			owner[slot] = s.Nodes[0].Addr
		}
	}
	out := map[string][]int{}
	for i := 0; i < n; i++ {
		addr := owner[topology.KeySlot(fmt.Sprintf("%s-%d", prefix, i))]
		if addr == "" {
			t.Fatalf("no master owns the slot of %s-%d", prefix, i)
		}
		out[addr] = append(out[addr], i)
	}
	return out
}

// placement maps each pod of the cluster to its Kubernetes node and node ID.
type placement map[string][2]string

func placed(ctx context.Context, t *testing.T, ns, name string) placement {
	t.Helper()
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, c := range getCluster(ctx, t, ns, name).Status.Conditions {
		ids[c.Name] = c.NodeID
	}
	out := placement{}
	for _, p := range pods {
		out[p.Name] = [2]string{p.Spec.NodeName, ids[p.Name]}
	}
	return out
}

// waitForEmptyNodes waits until no pod is bound to a node, so the next cluster starts on
// empty nodes.
func waitForEmptyNodes(ctx context.Context, t *testing.T) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		out, err := stack.Kubectl("get", "pods", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(BeEmpty(), "pods still on the nodes")
	}, 3*time.Minute, time.Second).Should(Succeed())
}

func volumeType(vt string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		pods, _, _ := unstructured.NestedSlice(u.Object, "spec", "pod")
		pod := pods[0].(map[string]any)
		pod["volumes"] = map[string]any{"type": vt}
		if err := unstructured.SetNestedSlice(u.Object, pods, "spec", "pod"); err != nil {
			panic(err)
		}
	}
}

// TestReapplyOverKeptData deletes a formed cluster holding 100,000 keys, waits until its
// pods are gone, applies the same CR again and expects Running with the same node IDs, the
// same roles and every key, for volumeClaimTemplate data (each claim's volume is on one
// node, and its pod comes back there). hostPath is left out: the scheduler may place a
// re-created pod on another node, where its directory is not (docs/data.md), as on any
// cluster.
func TestReapplyOverKeptData(t *testing.T) {
	for _, vt := range []string{"volumeClaimTemplate"} {
		t.Run(vt, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
			defer cancel()
			ns, name := "e2e-reapply-"+map[string]string{"hostPath": "hostpath", "volumeClaimTemplate": "claims"}[vt], "demo"
			waitForEmptyNodes(ctx, t)
			formDemo(ctx, t, ns, noPassword(volumeType(vt)))
			preload(ctx, t, ns, name, "kept", reapplyKeys)
			before := placed(ctx, t, ns, name)
			oldIPs := podIPs(ctx, t, ns, name)

			start := time.Now()
			if out, err := stack.Kubectl("delete", "rec", "-n", ns, name, "--timeout=3m"); err != nil {
				t.Fatalf("kubectl delete rec: %v: %s", err, out)
			}
			waitForEmptyNodes(ctx, t)
			t.Logf("deleted in %.1fs; pods gone", time.Since(start).Seconds())

			start = time.Now()
			applyCluster(ctx, t, demoSample, ns, noPassword(volumeType(vt)))
			if err := stack.WaitForPhase(ctx, ns, name, "Running", formTime); err != nil {
				t.Fatal(err)
			}
			eventuallyFormed(ctx, t, ns, name)
			took := time.Since(start)

			after := placed(ctx, t, ns, name)
			for pod, was := range before {
				now := after[pod]
				if now[0] != was[0] {
					t.Errorf("%s landed on %s, not on %s where its claim's volume is", pod, now[0], was[0])
				}
				if now[1] != was[1] {
					t.Errorf("%s is node %s, was %s: the cluster was made anew, not re-formed from nodes.conf", pod, now[1], was[1])
				}
			}
			newIPs := podIPs(ctx, t, ns, name)
			for pod, ip := range oldIPs {
				if newIPs[pod] == ip {
					t.Errorf("%s kept its address %s; the test needs new ones", pod, ip)
				}
			}
			lost := countLost(ctx, t, ns, name, "kept", reapplyKeys)
			t.Logf("%s: applied again, Running and formed %.1fs later; preloaded keys lost: %d of %d", vt, took.Seconds(), lost, reapplyKeys)
			if lost > 0 {
				t.Fatalf("%d of %d preloaded keys lost", lost, reapplyKeys)
			}
			if rc := getCluster(ctx, t, ns, name); rc.Status.Phase != redisv1alpha1.PhaseRunning {
				t.Errorf("phase %s: %s", rc.Status.Phase, rc.Status.Reason)
			}
		})
	}
}

// TestReapplyAfterOrphanDelete deletes the CR with --cascade=orphan while a client writes:
// the pods keep serving, the CR applied again adopts the StatefulSet and pods (same pods,
// same addresses) and is Running, and every preloaded key and acknowledged write is there.
func TestReapplyAfterOrphanDelete(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns, name := "e2e-reapply-orphan", "demo"
	formDemo(ctx, t, ns, noPassword(nil))
	preload(ctx, t, ns, name, "kept", reapplyKeys)
	oldIPs := podIPs(ctx, t, ns, name)

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
	time.Sleep(time.Second)

	start := time.Now()
	if out, err := stack.Kubectl("delete", "rec", "-n", ns, name, "--cascade=orphan", "--timeout=2m"); err != nil {
		t.Fatalf("kubectl delete rec --cascade=orphan: %v: %s", err, out)
	}
	t.Logf("CR gone %.1fs after the orphaning delete", time.Since(start).Seconds())
	if out, err := stack.Kubectl("get", "sts", "-n", ns, name); err != nil {
		t.Fatalf("the StatefulSet went with the CR: %v: %s", err, out)
	}
	time.Sleep(3 * time.Second) // the pods serve on their own meanwhile

	applyCluster(ctx, t, demoSample, ns, noPassword(nil))
	if err := stack.WaitForPhase(ctx, ns, name, "Running", formTime); err != nil {
		t.Fatal(err)
	}
	eventuallyFormed(ctx, t, ns, name)
	took := time.Since(start)
	time.Sleep(time.Second)
	close(stop)
	<-done
	w.expectWrote(t, 20)

	for pod, ip := range podIPs(ctx, t, ns, name) {
		if oldIPs[pod] != ip {
			t.Errorf("%s moved from %s to %s: the orphaned pods were not adopted as they were", pod, oldIPs[pod], ip)
		}
	}
	out, err := stack.Kubectl("get", "sts", "-n", ns, name, "-o", "jsonpath={.metadata.ownerReferences[0].uid}")
	if rc := getCluster(ctx, t, ns, name); err != nil || out != string(rc.UID) {
		t.Errorf("the StatefulSet's owner is %q (%v), want the new CR %s", out, err, rc.UID)
	}
	lost := countLost(ctx, t, ns, name, "kept", reapplyKeys)
	c, err := stack.RedisClient(ctx, ns, selectorOf(name), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lostWrites := 0
	for _, k := range w.ok {
		if err := c.Get(ctx, k).Err(); err != nil {
			lostWrites++
		}
	}
	t.Logf("orphaned and applied again: Running %.1fs after the delete; preloaded keys lost %d of %d; writes %d acknowledged, %d failed %v, acknowledged lost %d",
		took.Seconds(), lost, reapplyKeys, len(w.ok), w.failed, w.errs, lostWrites)
	if lost > 0 || lostWrites > 0 {
		t.Fatalf("lost %d preloaded keys and %d acknowledged writes", lost, lostWrites)
	}
	if w.failed > 0 {
		t.Errorf("%d writes failed while the CR was orphaned and applied again: %v", w.failed, w.errs)
	}
}
