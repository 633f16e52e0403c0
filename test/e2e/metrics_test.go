//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// operatorMetricsAddr is where the suite's operator serves its metrics (plain HTTP,
// --metrics-secure=false: the suite has no token for the secure endpoint's authorization).
const operatorMetricsAddr = "127.0.0.1:18087"

// The operator's own metrics (docs/metrics.md) checked against Redis on the demo cluster
// loaded with 100,000 keys and a writer running: after bootstrap, after a master pod is
// deleted and healed, after a scale-out 6 -> 8, and once the RedisCluster is deleted
// (its series are gone).
func TestOperatorMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const ns = "e2e-metrics"
	// emptyDir: the deleted pod comes back empty, so healing must join it (Meet, Replicate).
	f := startFault(ctx, t, ns, withVolumes(map[string]any{"type": "emptyDir"}))
	g := NewWithT(t)

	expectMetricsMatchRedis(ctx, t, ns, 3)
	g.Expect(clusterMetric(t, "redis_operator_cluster_phase", ns, `phase="Running"`)).To(Equal(1.0))
	g.Expect(clusterMetric(t, "redis_operator_cluster_phase", ns, `phase="Creating"`)).To(Equal(0.0))

	// A replica: a deleted master hands over first (controller/handover.go) and can come back
	// through another path than healing's.
	pod := pickPod(ctx, t, ns, "demo", topology.RoleSlave)
	old := map[string]string{pod: podIPs(ctx, t, ns, "demo")[pod]}
	phases := phaseChanges(ctx, t, ns, "demo")
	start := time.Now()
	if err := stack.DeletePod(ctx, ns, pod); err != nil {
		t.Fatal(err)
	}
	took := healed(ctx, t, ns, "demo", old, start, faultRecovery)
	t.Logf("replica %s deleted, healed %.1fs later", pod, took.Seconds())
	expectMetricsMatchRedis(ctx, t, ns, 3)
	g.Expect(phaseChanges(ctx, t, ns, "demo")).To(Equal(phases), "healing a replica changes no phase")
	g.Expect(clusterMetric(t, "redis_operator_heal_actions_total", ns, `kind="Replicate"`)).To(BeNumerically(">=", 1),
		"the returning empty pod was made a replica by healing")

	resize(ctx, t, ns, "demo", 8)
	expectMetricsMatchRedis(ctx, t, ns, 4)
	slots := clusterMetric(t, "redis_operator_migration_slots_moved_total", ns, "")
	keys := clusterMetric(t, "redis_operator_migration_keys_moved_total", ns, "")
	newMaster := newestMaster(ctx, t, ns)
	t.Logf("after scale-out: %v slots and %v keys moved; the new master %s holds %d slots and %d keys", slots, keys, newMaster.pod, newMaster.slots, newMaster.keys)
	g.Expect(slots).To(BeNumerically(">=", newMaster.slots), "every slot of the new master was moved to it")
	g.Expect(keys).To(BeNumerically(">", 0))
	g.Expect(keys).To(BeNumerically("<=", newMaster.keys), "the new master holds at least the keys moved to it")
	g.Expect(clusterMetric(t, "redis_operator_migration_keys_per_second", ns, "")).To(Equal(0.0), "no rate outside Scaling")
	f.finish("metrics: heal and scale-out 6->8", 0, took)

	if out, err := stack.Kubectl("-n", ns, "delete", "rec", "demo", "--wait=false"); err != nil {
		t.Fatalf("kubectl delete rec: %v: %s", err, out)
	}
	g.Eventually(func() string { return scrape(t) }, 3*time.Minute, time.Second).ShouldNot(ContainSubstring(`namespace="`+ns+`"`),
		"the series of a deleted RedisCluster are removed")
}

// expectMetricsMatchRedis waits until the per-cluster gauges say what CLUSTER NODES says.
func expectMetricsMatchRedis(ctx context.Context, t *testing.T, ns string, masters int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		c := countsFromRedis(ctx, g, ns)
		g.Expect(c.masters).To(Equal(masters))
		for name, want := range map[string]int{
			"redis_operator_cluster_masters":                 c.masters,
			"redis_operator_cluster_replicas_ready":          c.replicas,
			"redis_operator_cluster_slots_covered":           c.slots,
			"redis_operator_cluster_open_slots":              c.open,
			"redis_operator_cluster_masters_without_replica": c.bare,
		} {
			g.Expect(clusterMetric(t, name, ns, "")).To(BeEquivalentTo(want), name)
		}
		g.Expect(c.slots).To(Equal(topology.SlotCount))
		g.Expect(c.bare).To(Equal(0))
		t.Logf("metrics agree with Redis: %d masters, %d replicas, %d slots, %d open", c.masters, c.replicas, c.slots, c.open)
	}, time.Minute, time.Second).Should(Succeed())
}

type redisCounts struct{ masters, replicas, slots, open, bare int }

// countsFromRedis reads the topology from every pod's CLUSTER NODES; all must agree.
func countsFromRedis(ctx context.Context, g Gomega, ns string) redisCounts {
	var views []redisCounts
	for _, ip := range podIPsG(ctx, g, ns) {
		cl := framework.NodeClient(ip, pw(ctx, ns, "demo"))
		text, err := cl.ClusterNodes(ctx).Result()
		cl.Close()
		g.Expect(err).NotTo(HaveOccurred())
		nodes, err := topology.ParseClusterNodes(text)
		g.Expect(err).NotTo(HaveOccurred())
		var c redisCounts
		followers := map[string]int{}
		open := map[int]bool{}
		for _, n := range nodes {
			if n.Replica {
				followers[n.MasterID]++
				continue // its markers are no open slot (framework.NoOpenSlots), as for the operator
			}
			for s := range n.Migrating {
				open[s] = true
			}
			for s := range n.Importing {
				open[s] = true
			}
		}
		for _, n := range nodes {
			if n.Master && len(n.Slots) > 0 {
				c.masters++
				c.slots += n.Slots.Count()
				c.replicas += followers[n.ID]
				if followers[n.ID] == 0 {
					c.bare++
				}
			}
		}
		c.open = len(open)
		views = append(views, c)
	}
	g.Expect(views).NotTo(BeEmpty())
	for _, v := range views {
		g.Expect(v).To(Equal(views[0]), "every node's view agrees")
	}
	return views[0]
}

func podIPsG(ctx context.Context, g Gomega, ns string) []string {
	pods, err := stack.Pods(ctx, ns, selectorOf("demo"))
	g.Expect(err).NotTo(HaveOccurred())
	var ips []string
	for _, p := range pods {
		g.Expect(p.Status.PodIP).NotTo(BeEmpty())
		ips = append(ips, p.Status.PodIP)
	}
	return ips
}

type masterShare struct {
	pod         string
	slots, keys int
}

// newestMaster is demo-6 or demo-7, whichever became a master: its slots and DBSIZE.
func newestMaster(ctx context.Context, t *testing.T, ns string) masterShare {
	t.Helper()
	ips := podIPs(ctx, t, ns, "demo")
	for _, pod := range []string{"demo-6", "demo-7"} {
		cl := framework.NodeClient(ips[pod], pw(ctx, ns, "demo"))
		text, err := cl.ClusterNodes(ctx).Result()
		n, derr := cl.DBSize(ctx).Result()
		cl.Close()
		if err != nil || derr != nil {
			t.Fatalf("%s: %v %v", pod, err, derr)
		}
		nodes, err := topology.ParseClusterNodes(text)
		if err != nil {
			t.Fatal(err)
		}
		for _, nd := range nodes {
			if nd.Myself && nd.Master && len(nd.Slots) > 0 {
				return masterShare{pod: pod, slots: nd.Slots.Count(), keys: int(n)}
			}
		}
	}
	t.Fatal("neither demo-6 nor demo-7 is a master")
	return masterShare{}
}

// scrape is the operator's metrics page.
func scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + operatorMetricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

// clusterMetric is the value of the series name{namespace=ns,name="demo"} that also has
// the label pair extra (e.g. `phase="Running"`), or -1 when there is no such series.
func clusterMetric(t *testing.T, name, ns, extra string) float64 {
	t.Helper()
	for _, line := range strings.Split(scrape(t), "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, fmt.Sprintf(`namespace="%s"`, ns)) ||
			!strings.Contains(line, `name="demo"`) || !strings.Contains(line, extra) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		return v
	}
	return -1
}
