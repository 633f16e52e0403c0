// Command fleet measures one operator running N RedisClusters on the devcluster: the time
// to form them all, the operator's RSS and CPU while they idle, the API writes and Redis
// write commands at idle (both should be 0), the Redis commands an idle cluster costs a
// minute, the Redis connections the operator holds, and the change-to-action latency of a
// spec change to one cluster and of a pod deletion while the others idle, and of the spec
// change again while the last cluster is stuck (every redis-server of it SIGSTOPped).
//
// Sizes are mixed: every fifth cluster has 6 pods (3 masters, 1 replica each), the others
// 3 masters and no replica. Each cluster has its own namespace fleet-<i>.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

func main() {
	n := flag.Int("clusters", 10, "number of RedisClusters")
	idle := flag.Duration("idle", 5*time.Minute, "idle window over which RSS, CPU, writes and commands are measured")
	samples := flag.Int("samples", 20, "spec changes timed (p50/p99)")
	podSamples := flag.Int("pod-samples", 5, "pod deletions timed; each waits for the cluster to heal")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *n, *idle, *samples, *podSamples); err != nil {
		fmt.Fprintln(os.Stderr, "bench/fleet:", err)
		os.Exit(1)
	}
}

type bench struct {
	s  *framework.Stack
	c  client.Client
	cs kubernetes.Interface
	n  int
}

func run(ctx context.Context, n int, idle time.Duration, samples, podSamples int) error {
	return framework.WithCRD(ctx, func(s *framework.Stack) error { return runOn(ctx, s, n, idle, samples, podSamples) })
}

// runOn is the bench on a devcluster with the CRD installed.
func runOn(ctx context.Context, s *framework.Stack, n int, idle time.Duration, samples, podSamples int) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	cs, err := s.Clientset()
	if err != nil {
		return err
	}
	b := &bench{s: s, c: c, cs: cs, n: n}
	op, err := s.StartOperator("--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0", "--pprof-bind-address="+pprofAddr)
	if err != nil {
		return err
	}
	defer op.Stop()
	fmt.Printf("%d clusters (every fifth 6 pods, the others 3), operator pid %d, logs %s\n", n, op.PID(), op.Logs)
	start0, err := startedStats(ctx, op)
	if err != nil {
		return err
	}
	fmt.Printf("operator RSS before any cluster   %s\n", rssLine(ctx, start0))

	formed, err := b.formAll(ctx)
	if err != nil {
		return fmt.Errorf("%w (operator logs: %s)", err, op.Logs)
	}
	fmt.Printf("time to form all                  %6.1f s\n", formed.Seconds())
	// Let the last statuses and the first health checks settle before idling.
	time.Sleep(45 * time.Second)
	if err := b.measureIdle(ctx, op.PID(), idle); err != nil {
		return err
	}
	free, err := b.measureSpecChange(ctx, samples, "")
	if err != nil {
		return err
	}
	if err := b.measurePodDeletion(ctx, podSamples); err != nil {
		return err
	}
	if n < 2 {
		return nil
	}
	return b.measureStuck(ctx, samples, free)
}

func ns(i int) string { return fmt.Sprintf("fleet-%d", i) }

// size is 6 pods for every fifth cluster, 3 for the others.
func size(i int) (replicas, perMaster int64) {
	if i%5 == 0 {
		return 6, 1
	}
	return 3, 0
}

// formAll applies every cluster and waits until all are Running.
func (b *bench) formAll(ctx context.Context) (time.Duration, error) {
	data, err := os.ReadFile(filepath.Join(b.s.Root, "config", "samples", "redis_v1alpha1_rediscluster.yaml"))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	for i := 0; i < b.n; i++ {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns(i)}}); client.IgnoreAlreadyExists(err) != nil {
			return 0, fmt.Errorf("failed to create namespace %s: %w", ns(i), err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return 0, err
		}
		u.SetNamespace(ns(i))
		r, pm := size(i)
		_ = unstructured.SetNestedField(u.Object, r, "spec", "replicas")
		_ = unstructured.SetNestedField(u.Object, pm, "spec", "replicasPerMaster")
		if err := b.c.Create(ctx, u); err != nil {
			return 0, fmt.Errorf("failed to create the cluster in %s: %w", ns(i), err)
		}
	}
	deadline := start.Add(time.Duration(b.n)*30*time.Second + 5*time.Minute)
	for time.Now().Before(deadline) {
		running, err := b.running(ctx)
		if err != nil {
			return 0, err
		}
		if running == b.n {
			return time.Since(start), nil
		}
		time.Sleep(time.Second)
	}
	running, _ := b.running(ctx)
	return 0, fmt.Errorf("%d of %d clusters Running after %v", running, b.n, time.Since(start))
}

// running counts the clusters whose phase is Running.
func (b *bench) running(ctx context.Context) (int, error) {
	count := 0
	for i := 0; i < b.n; i++ {
		if ph, err := b.phase(ctx, i); err != nil {
			return 0, err
		} else if ph == "Running" {
			count++
		}
	}
	return count, nil
}

func (b *bench) phase(ctx context.Context, i int) (string, error) {
	u, err := b.s.GetRedisCluster(ctx, ns(i), "demo")
	if err != nil {
		return "", err
	}
	ph, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return ph, nil
}

// allAddrs is every pod's "ip:6379" of every cluster.
func (b *bench) allAddrs(ctx context.Context) ([]string, error) {
	var all []string
	for i := 0; i < b.n; i++ {
		addrs, err := b.s.PodAddrs(ctx, ns(i), "app.kubernetes.io/name=redis-cluster")
		if err != nil {
			return nil, err
		}
		all = append(all, addrs...)
	}
	return all, nil
}

// measureIdle reads the Redis nodes, the operator process and the API writes over the
// idle window and prints them.
func (b *bench) measureIdle(ctx context.Context, pid int, idle time.Duration) error {
	addrs, err := b.allAddrs(ctx)
	if err != nil {
		return err
	}
	writes, err := watchWrites(ctx, b.s)
	if err != nil {
		return err
	}
	before, err := framework.ReadStats(ctx, addrs, "")
	if err != nil {
		return err
	}
	p0, err := framework.ReadProcStats(pid)
	if err != nil {
		return err
	}
	start := time.Now()
	var maxRSS int64
	for time.Since(start) < idle {
		time.Sleep(min(5*time.Second, idle-time.Since(start)))
		if p, err := framework.ReadProcStats(pid); err == nil && p.RSS > maxRSS {
			maxRSS = p.RSS
		}
	}
	window := time.Since(start)
	p1, err := framework.ReadProcStats(pid)
	if err != nil {
		return err
	}
	after, err := framework.ReadStats(ctx, addrs, "")
	if err != nil {
		return err
	}
	apiWrites := writes.stop()
	d := framework.Delta(before, after)
	var conns int64
	for _, st := range after {
		conns += st.ConnectedClients
	}
	perMin := float64(d.Commands) / window.Minutes()
	fmt.Printf("idle window                       %6.0f s\n", window.Seconds())
	fmt.Printf("operator RSS at idle (end / max)  %s / max %.1f MiB\n", rssLine(ctx, p1), mib(maxRSS))
	if err := saveHeapProfile(ctx, heapProfileFile); err == nil {
		fmt.Printf("operator heap profile             %s (go tool pprof -top -sample_index=inuse_space bin/manager %s)\n", heapProfileFile, heapProfileFile)
	}
	fmt.Printf("operator CPU at idle              %6.2f %% of one core\n", 100*float64(p1.CPU-p0.CPU)/float64(window))
	ours, others := byOperator(apiWrites)
	fmt.Printf("API writes at idle, the operator  %6d %s\n", len(ours), countWrites(ours))
	fmt.Printf("API writes at idle, others        %6d %s\n", len(others), countWrites(others))
	fmt.Printf("Redis write commands at idle      %6d %v, epochs changed on %d nodes\n", d.Writes, d.WritesByCommand, len(d.EpochChanged))
	fmt.Printf("Redis commands per idle minute    %6.1f per cluster, %.1f per node (%d nodes): %s\n", perMin/float64(b.n), perMin/float64(len(addrs)), len(addrs), perNodeMinute(d.ByCommand, window, len(addrs)))
	fmt.Printf("Redis connections held            %6d (%.1f per node)\n", conns, float64(conns)/float64(len(addrs)))
	return nil
}

// startedStats reads the operator's /proc figures once its controller has started its
// workers (the caches are synced), so the RSS before any cluster is the settled one.
func startedStats(ctx context.Context, op *framework.Operator) (framework.ProcStats, error) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if logs, err := os.ReadFile(op.Logs); err == nil && strings.Contains(string(logs), "Starting workers") {
			return framework.ReadProcStats(op.PID())
		}
		if ctx.Err() != nil {
			return framework.ProcStats{}, ctx.Err()
		}
	}
	return framework.ProcStats{}, fmt.Errorf("the operator did not start its workers within a minute (logs: %s)", op.Logs)
}

// perNodeMinute spells the commands per node and minute by name, most frequent first.
func perNodeMinute(byCommand map[string]int64, window time.Duration, nodes int) string {
	names := make([]string, 0, len(byCommand))
	for name, n := range byCommand {
		if n > 0 {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return byCommand[names[i]] > byCommand[names[j]] })
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %.1f", name, float64(byCommand[name])/window.Minutes()/float64(nodes))
	}
	return strings.Join(parts, ", ")
}

// measureSpecChange times spec.clientService.annotations changes to cluster 0 until its
// client Service carries them; note says what else is going on.
func (b *bench) measureSpecChange(ctx context.Context, samples int, note string) ([]time.Duration, error) {
	var ds []time.Duration
	for k := 0; k < samples; k++ {
		value := fmt.Sprintf("%d-%d", time.Now().UnixNano(), k)
		patch := fmt.Sprintf(`{"spec":{"clientService":{"annotations":{"bench.fleet/round":%q}}}}`, value)
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(framework.RedisClusterGVK)
		u.SetNamespace(ns(0))
		u.SetName("demo")
		start := time.Now()
		if err := b.c.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return nil, fmt.Errorf("failed to patch the spec: %w", err)
		}
		for {
			svc, err := b.cs.CoreV1().Services(ns(0)).Get(ctx, "demo-client", metav1.GetOptions{})
			if err == nil && svc.Annotations["bench.fleet/round"] == value {
				break
			}
			if time.Since(start) > time.Minute {
				return nil, fmt.Errorf("the client Service did not get the annotation within a minute")
			}
			time.Sleep(5 * time.Millisecond)
		}
		ds = append(ds, time.Since(start))
		time.Sleep(500 * time.Millisecond)
	}
	p50, p99 := percentiles(ds)
	fmt.Printf("spec change to action (%d)        p50 %6.0f ms   p99 %6.0f ms   (patch to the client Service annotated%s)\n", len(ds), ms(p50), ms(p99), note)
	return ds, nil
}

// measureStuck stops (SIGSTOP) every redis-server of the last cluster, so its reconciles
// wait on nodes that hold their sockets and never answer, times cluster 0's spec changes
// again, and compares them with free, the same measure with no cluster stuck. The stopped
// servers are resumed and the cluster waited for before it returns.
func (b *bench) measureStuck(ctx context.Context, samples int, free []time.Duration) error {
	stuckNS := ns(b.n - 1)
	pods, err := b.s.Pods(ctx, stuckNS, "")
	if err != nil {
		return err
	}
	var pids []int
	for _, p := range pods {
		pid, err := b.s.PodPID(stuckNS, p.Name)
		if err != nil {
			return err
		}
		pids = append(pids, pid)
	}
	resume := func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer resume()
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("failed to stop redis-server %d of %s: %w", pid, stuckNS, err)
		}
	}
	time.Sleep(5 * time.Second) // its next reconciles start waiting on the stopped nodes
	stuck, err := b.measureSpecChange(ctx, samples, ", "+stuckNS+" stopped")
	if err != nil {
		return err
	}
	f50, f99 := percentiles(free)
	s50, s99 := percentiles(stuck)
	fmt.Printf("with one cluster stuck            p50 %+5.1f%%   p99 %+5.1f%%   (change against no cluster stuck)\n",
		100*(ms(s50)/ms(f50)-1), 100*(ms(s99)/ms(f99)-1))
	resume()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if ph, err := b.phase(ctx, b.n-1); err == nil && ph == "Running" {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("%s not Running within 3 minutes of its servers resuming", stuckNS)
}

// measurePodDeletion deletes a replica pod of cluster 0 (6 pods) and times until the
// operator's status counts one ready pod fewer, then waits until the cluster is whole
// and Running again.
func (b *bench) measurePodDeletion(ctx context.Context, samples int) error {
	var ds []time.Duration
	for k := 0; k < samples; k++ {
		pod := fmt.Sprintf("demo-%d", 3+k%3)
		start := time.Now()
		if err := b.s.DeletePod(ctx, ns(0), pod); err != nil {
			return err
		}
		for {
			u, err := b.s.GetRedisCluster(ctx, ns(0), "demo")
			if err != nil {
				return err
			}
			if ready, _, _ := unstructured.NestedInt64(u.Object, "status", "replicas"); ready < 6 {
				break
			}
			if time.Since(start) > time.Minute {
				return fmt.Errorf("the status did not count pod %s out within a minute", pod)
			}
			time.Sleep(5 * time.Millisecond)
		}
		ds = append(ds, time.Since(start))
		if err := b.waitWhole(ctx); err != nil {
			return err
		}
	}
	p50, p99 := percentiles(ds)
	fmt.Printf("pod deletion to action (%d)        p50 %6.0f ms   p99 %6.0f ms   (delete to status.replicas lowered)\n", len(ds), ms(p50), ms(p99))
	return nil
}

// waitWhole waits until cluster 0 is Running with 6 ready pods again.
func (b *bench) waitWhole(ctx context.Context) error {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		u, err := b.s.GetRedisCluster(ctx, ns(0), "demo")
		if err != nil {
			return err
		}
		ph, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		ready, _, _ := unstructured.NestedInt64(u.Object, "status", "replicas")
		if ph == "Running" && ready == 6 {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("cluster 0 not whole again within 3 minutes")
}

// percentiles are the nearest-rank p50 and p99 (p99 is the maximum under 100 samples).
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return rank(0.50), rank(0.99)
}

func mib(b int64) float64        { return float64(b) / (1 << 20) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
