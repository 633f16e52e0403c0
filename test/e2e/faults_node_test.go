//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// Faults of a whole node, on the devcluster's real nodes (hack/devcluster/node.sh), each
// with 100,000 keys and the writer.

// nodeOfMaster is the number N of devnode-N, the node of a master of the cluster demo in ns.
func nodeOfMaster(ctx context.Context, t *testing.T, ns string) (string, int) {
	t.Helper()
	pod := pickPod(ctx, t, ns, "demo", topology.RoleMaster)
	p, err := getPod(ctx, ns, pod)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimPrefix(p.Spec.NodeName, "devnode-"))
	if err != nil {
		t.Fatalf("pod %s is on node %q", pod, p.Spec.NodeName)
	}
	return pod, n
}

// nodeFault starts a fault case in ns and does action (node.sh) to the node of one of its
// masters, with undo (node.sh) done when the test ends whatever happened; it returns the case,
// the node's number and when the fault began.
func nodeFault(ctx context.Context, t *testing.T, ns, action, undo string) (*faultRun, int, time.Time) {
	t.Helper()
	f := startFault(ctx, t, ns, nil)
	pod, n := nodeOfMaster(ctx, t, f.ns)
	t.Cleanup(func() { _ = stack.Node(undo, n) })
	t.Logf("%s devnode-%d, which runs master %s", action, n, pod)
	start := time.Now()
	if err := stack.Node(action, n); err != nil {
		t.Fatal(err)
	}
	return f, n, start
}

// clusterInfoOffNode is CLUSTER INFO of a pod of demo that is not on devnode-N.
func clusterInfoOffNode(ctx context.Context, t *testing.T, ns string, n int) string {
	pods, err := stack.Pods(ctx, ns, selectorOf("demo"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName == "devnode-"+strconv.Itoa(n) || p.Status.PodIP == "" {
			continue
		}
		c := framework.NodeClient(p.Status.PodIP, "")
		defer c.Close()
		return c.ClusterInfo(ctx).Val()
	}
	return ""
}

func nodeReady(ctx context.Context, t *testing.T, n int) bool {
	cs, err := stack.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, "devnode-"+strconv.Itoa(n), metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// A node lost as a machine that loses power: its kubelet and containerd stop and its
// containers die, a master among them. Redis fails that master over to its replica on
// another node (the operator placed replicas off their masters' nodes), the cluster serves
// on, the node goes NotReady; when the node is back its pods restart and rejoin. Only the
// writes Redis' asynchronous replication had not copied may be lost, as for a killed process.
func TestFaultNodeLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	g := NewWithT(t)
	f, n, start := nodeFault(ctx, t, "fault-node-lost", "kill", "start")
	// The cluster serves every slot again without the node: Redis' own failover.
	g.Eventually(func() string { return clusterInfoOffNode(ctx, t, f.ns, n) }, 2*time.Minute, 500*time.Millisecond).
		Should(And(ContainSubstring("cluster_state:ok"), ContainSubstring("cluster_slots_ok:16384")))
	served := time.Since(start)
	g.Eventually(func() bool { return nodeReady(ctx, t, n) }, 2*time.Minute, time.Second).Should(BeFalse(), "devnode-%d stays Ready", n)
	t.Logf("every slot served %.1fs after the node died; node NotReady after %.1fs", served.Seconds(), time.Since(start).Seconds())
	g.Expect(stack.Node("start", n)).To(Succeed())
	back := time.Now()
	took := backToRunning(ctx, t, f.ns, back, 3*time.Minute)
	t.Logf("node back: Running and formed %.1fs later", took.Seconds())
	f.finish("node lost (kubelet, containerd and containers killed)", 500, time.Since(start))
}

// A node cut off from the others: its pods' packets to and from other nodes' pods are
// dropped (this machine, where the writer and the operator run, still reaches them: the
// writer is on the minority's side too). The majority promotes the cut-off master's
// replica after cluster-node-timeout; the cut-off master stops taking writes once it sees
// it lost the majority. Writes it acknowledged in between are lost when the partition heals
// and it rejoins as a replica: that is Redis Cluster's documented window, measured here.
func TestFaultNodePartitioned(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	g := NewWithT(t)
	f, n, start := nodeFault(ctx, t, "fault-partition", "partition", "heal")
	// Longer than cluster-node-timeout (5 s) and the election.
	time.Sleep(20 * time.Second)
	g.Expect(stack.Node("heal", n)).To(Succeed())
	took := backToRunning(ctx, t, f.ns, time.Now(), 3*time.Minute)
	t.Logf("partition healed: Running and formed %.1fs later", took.Seconds())
	// At the writer's pace (about 250 writes a second per shard) the window is
	// cluster-node-timeout plus the election: a few thousand writes at most.
	f.finish("node partitioned 20 s", 5000, time.Since(start))
}
