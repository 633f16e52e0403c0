//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// The healing suite: pods of a formed cluster are deleted and come back at new addresses
// (the devcluster gives every new pod a new loopback IP), with their data (hostPath) or
// empty (emptyDir), and the operator must make the cluster whole again without losing a key.

const healKeys = 100

// writeKeys writes PREFIX-0 … PREFIX-(n-1), each holding its number, through a cluster client.
func writeKeys(ctx context.Context, t *testing.T, ns, name, prefix string, n int) {
	t.Helper()
	c, err := stack.RedisClient(ctx, ns, selectorOf(name), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < n; i++ {
		if err := c.Set(ctx, fmt.Sprintf("%s-%d", prefix, i), i, 0).Err(); err != nil {
			t.Fatalf("SET %s-%d: %v", prefix, i, err)
		}
	}
}

// expectKeys reads back the n keys writeKeys wrote and every key a writer reported
// written, through a client seeded with the pods' current addresses.
func expectKeys(ctx context.Context, t *testing.T, ns, name, prefix string, n int, written []string) {
	t.Helper()
	c, err := stack.RedisClient(ctx, ns, selectorOf(name), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < n; i++ {
		if v, err := c.Get(ctx, fmt.Sprintf("%s-%d", prefix, i)).Int(); err != nil || v != i {
			t.Fatalf("GET %s-%d = %v, %v", prefix, i, v, err)
		}
	}
	for _, k := range written {
		if err := c.Get(ctx, k).Err(); err != nil {
			t.Fatalf("GET %s (reported written): %v", k, err)
		}
	}
}

// podIPs maps pod name to IP for the pods that run with an address.
func podIPs(ctx context.Context, t *testing.T, ns, name string) map[string]string {
	t.Helper()
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			out[p.Name] = p.Status.PodIP
		}
	}
	return out
}

// healed waits until every named pod is back at a new address, the demo cluster (6 pods,
// 3 masters) is formed again (expectFormed), Running, and every node knows exactly the
// cluster's nodes, none flagged failing; it returns how long that took from `since`.
func healed(ctx context.Context, t *testing.T, ns, name string, old map[string]string, since time.Time, within time.Duration) time.Duration {
	t.Helper()
	return healedAs(ctx, t, ns, name, old, since, within, func(g Gomega, rc *redisv1alpha1.RedisCluster) {
		expectFormed(ctx, g, ns, name, rc)
	})
}

// healedAs is healed with the formed check of the caller's shape.
func healedAs(ctx context.Context, t *testing.T, ns, name string, old map[string]string, since time.Time, within time.Duration,
	formed func(Gomega, *redisv1alpha1.RedisCluster)) time.Duration {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		now := podIPs(ctx, t, ns, name)
		for pod, ip := range old {
			g.Expect(now[pod]).NotTo(BeEmpty(), "%s is back", pod)
			g.Expect(now[pod]).NotTo(Equal(ip), "%s has a new address", pod)
		}
		rc := getCluster(ctx, t, ns, name)
		g.Expect(rc.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
		formed(g, rc)
		for pod, ip := range now {
			c := framework.NodeClient(ip, pw(ctx, ns, name))
			text, err := c.ClusterNodes(ctx).Result()
			c.Close()
			g.Expect(err).NotTo(HaveOccurred())
			lines := strings.Split(strings.TrimSpace(text), "\n")
			g.Expect(lines).To(HaveLen(len(now)), "CLUSTER NODES on %s:\n%s", pod, text)
			g.Expect(text).NotTo(ContainSubstring("fail"), "CLUSTER NODES on %s", pod)
		}
	}, within, 500*time.Millisecond).Should(Succeed())
	return time.Since(since)
}

// phaseChanges lists the PhaseChanged events of the cluster, one entry per occurrence.
func phaseChanges(ctx context.Context, t *testing.T, ns, name string) []string {
	t.Helper()
	evs, err := stack.Events(ctx, getCluster(ctx, t, ns, name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		for i := int32(0); e.Reason == "PhaseChanged" && i < max(e.Count, 1); i++ {
			out = append(out, e.Message)
		}
	}
	return out
}

// expectStayedRunning fails when the phase changed since `before` was taken: healing one
// pod is not a resize, and the cluster stays Running while it heals.
func expectStayedRunning(ctx context.Context, t *testing.T, ns, name string, before []string) {
	t.Helper()
	if after := phaseChanges(ctx, t, ns, name); len(after) != len(before) {
		t.Errorf("the phase changed while healing: %v", after[len(before):])
	}
}

// pickPod returns a pod of the given role from the status.
func pickPod(ctx context.Context, t *testing.T, ns, name, role string) string {
	t.Helper()
	for _, c := range getCluster(ctx, t, ns, name).Status.Conditions {
		if c.Type == role {
			return c.Name
		}
	}
	t.Fatalf("no %s in the status", role)
	return ""
}

func formHealCluster(ctx context.Context, t *testing.T, ns, name string, mutate func(*unstructured.Unstructured)) {
	t.Helper()
	formDemo(ctx, t, ns, mutate)
	writeKeys(ctx, t, ns, name, "heal", healKeys)
}

// TestHealingPodsBackAtNewAddresses uses the demo sample with volumeClaimTemplate data, which
// follows each pod to whatever node it lands on: a master pod, then every pod at once, come
// back at new addresses with their data and nodes.conf, and every key is kept. (With the
// sample's hostPath, a pod that lands on another node starts empty there, as on a real
// cluster; with every pod deleted at once a master and its replica may both move, and their
// slots' keys are gone: see docs/data.md.)
func TestHealingPodsBackAtNewAddresses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns, name := "e2e-heal", "demo"
	formHealCluster(ctx, t, ns, name, volumeType("volumeClaimTemplate"))

	t.Run("a master pod back at a new address", func(t *testing.T) {
		pod := pickPod(ctx, t, ns, name, topology.RoleMaster)
		old := map[string]string{pod: podIPs(ctx, t, ns, name)[pod]}
		phases := phaseChanges(ctx, t, ns, name)
		start := time.Now()
		if err := stack.DeletePod(ctx, ns, pod); err != nil {
			t.Fatal(err)
		}
		took := healed(ctx, t, ns, name, old, start, 90*time.Second)
		t.Logf("master %s deleted: formed again %.1fs later", pod, took.Seconds())
		expectStayedRunning(ctx, t, ns, name, phases)
		expectKeys(ctx, t, ns, name, "heal", healKeys, nil)
	})

	t.Run("every pod back at once at new addresses", func(t *testing.T) {
		old := podIPs(ctx, t, ns, name)
		if len(old) != 6 {
			t.Fatalf("pods with addresses: %v", old)
		}
		phases := phaseChanges(ctx, t, ns, name)
		start := time.Now()
		for pod := range old {
			if err := stack.DeletePod(ctx, ns, pod); err != nil {
				t.Fatal(err)
			}
		}
		took := healed(ctx, t, ns, name, old, start, 3*time.Minute)
		t.Logf("all 6 pods deleted: formed again %.1fs later; phase changes meanwhile: %v",
			took.Seconds(), phaseChanges(ctx, t, ns, name)[len(phases):])
		expectKeys(ctx, t, ns, name, "heal", healKeys, nil)
	})
}

// TestHealingEmptyReplicaPod uses the demo sample with emptyDir volumes: a replica pod
// comes back empty, as a new node; it must be joined as a replica and the node it replaces
// forgotten everywhere.
func TestHealingEmptyReplicaPod(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ns, name := "e2e-heal-empty", "demo"
	formHealCluster(ctx, t, ns, name, func(u *unstructured.Unstructured) {
		pods, _, _ := unstructured.NestedSlice(u.Object, "spec", "pod")
		pod := pods[0].(map[string]any)
		pod["volumes"] = map[string]any{"type": "emptyDir"}
		if err := unstructured.SetNestedSlice(u.Object, pods, "spec", "pod"); err != nil {
			t.Fatal(err)
		}
	})

	pod := pickPod(ctx, t, ns, name, topology.RoleSlave)
	var oldID string
	for _, c := range getCluster(ctx, t, ns, name).Status.Conditions {
		if c.Name == pod {
			oldID = c.NodeID
		}
	}
	old := map[string]string{pod: podIPs(ctx, t, ns, name)[pod]}
	phases := phaseChanges(ctx, t, ns, name)
	start := time.Now()
	if err := stack.DeletePod(ctx, ns, pod); err != nil {
		t.Fatal(err)
	}
	took := healed(ctx, t, ns, name, old, start, 2*time.Minute)
	t.Logf("replica %s deleted (emptyDir): joined again as a new node %.1fs later", pod, took.Seconds())
	expectStayedRunning(ctx, t, ns, name, phases)
	for _, c := range getCluster(ctx, t, ns, name).Status.Conditions {
		if c.Name == pod && (c.NodeID == oldID || c.Type != topology.RoleSlave) {
			t.Errorf("%s is node %s (%s), want a new replica (old ID %s)", pod, c.NodeID, c.Type, oldID)
		}
	}
	expectKeys(ctx, t, ns, name, "heal", healKeys, nil)

	rc := getCluster(ctx, t, ns, name)
	evs, err := stack.Events(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range evs {
		if e.Type == corev1.EventTypeNormal && e.Reason == "RedisAction" {
			seen = append(seen, e.Message)
		}
	}
	all := strings.Join(seen, "\n")
	for _, want := range []string{"Forget: ", "Replicate: Made " + pod + " a replica of"} {
		if !strings.Contains(all, want) {
			t.Errorf("no event %q among:\n%s", want, all)
		}
	}
}
