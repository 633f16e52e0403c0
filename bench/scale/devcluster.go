package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// The devcluster side: the whole operator, as a user drives it. The demo RedisCluster (6
// pods: 3 masters, a replica each) is loaded with the same number of 64-byte values, then
// `kubectl scale rec/demo --replicas=8` and back to 6, with the e2e suite's writer running
// through each. A move is timed from the kubectl command to the phase Running again (new
// pods starting included), and its moving phase as for the other methods (moving.go);
// every loaded key and acknowledged write is read back.

const devclusterMethod = "devcluster"

// operatorPprof is where the bench's operator serves net/http/pprof (loopback only), to
// profile it while it moves slots: go tool pprof http://127.0.0.1:18090/debug/pprof/profile
const operatorPprof = "127.0.0.1:18090"

// devcluster runs the rounds of the devcluster side on one devcluster with one operator.
type devcluster struct {
	s      *framework.Stack
	sample string
	op     *framework.Operator
}

// withDevcluster starts (or reuses) the devcluster, installs the CRD, runs the operator as
// its own process and calls body.
func withDevcluster(ctx context.Context, body func(*devcluster) error) error {
	return framework.WithCRD(ctx, func(s *framework.Stack) error {
		op, err := s.StartOperator("--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0", "--pprof-bind-address="+operatorPprof)
		if err != nil {
			return err
		}
		defer op.Stop()
		fmt.Printf("devcluster: operator pid %d, logs in %s\n", op.PID(), op.Logs)
		return body(&devcluster{s: s, op: op, sample: filepath.Join(s.Root, "config", "samples", "redis_v1alpha1_rediscluster.yaml")})
	})
}

// round forms the demo cluster in a namespace of its own, loads it, and times the
// scale-out to 8 pods and the scale-in back to 6.
func (d *devcluster) round(ctx context.Context, cfg config, r int) ([]result, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("bench-scale-%d-%d", time.Now().Unix(), r)
	obj, err := d.demoIn(ns)
	if err != nil {
		return nil, err
	}
	deleteNS, err := d.s.CreateNamespace(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer deleteNS()
	if _, err := d.s.ApplyYAML(ctx, ns, obj); err != nil {
		return nil, err
	}
	if err := d.s.WaitForPhase(ctx, ns, "demo", "Running", 5*time.Minute); err != nil {
		return nil, err
	}
	router := d.s.RouterFor(ns, "demo", "")
	defer router.Close()
	if err := router.Load(ctx, "pre", cfg.keys); err != nil {
		return nil, fmt.Errorf("failed to load keys: %w", err)
	}
	loaded := make([]string, cfg.keys)
	perSlot := make([]int, topology.SlotCount)
	for i := range loaded {
		loaded[i] = "pre:" + strconv.Itoa(i)
		perSlot[framework.KeySlot(loaded[i])]++
	}
	var out []result
	for _, m := range []struct {
		dir  string
		pods int
	}{{"out", 8}, {"in", 6}} {
		res, err := d.move(ctx, ns, router, m.pods, loaded, perSlot)
		if err != nil {
			return out, fmt.Errorf("scale-%s: %w", m.dir, err)
		}
		res.method, res.dir = devclusterMethod, m.dir
		out = append(out, res)
	}
	return out, nil
}

// demoIn is the sample in namespace ns, with maxmemory raised so the keys fit three
// masters with the capacity check's headroom.
func (d *devcluster) demoIn(ns string) (string, error) {
	b, err := os.ReadFile(d.sample)
	if err != nil {
		return "", fmt.Errorf("failed to read the sample: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		return "", fmt.Errorf("failed to parse the sample %s: %w", d.sample, err)
	}
	u.SetNamespace(ns)
	pods, _, _ := unstructured.NestedSlice(u.Object, "spec", "pod")
	pod := pods[0].(map[string]any)
	pod["env"] = []any{map[string]any{"name": "MAXMEMORY", "value": "1gb"}}
	delete(pod, "resources")
	if err := unstructured.SetNestedSlice(u.Object, pods, "spec", "pod"); err != nil {
		return "", err
	}
	out, err := yaml.Marshal(u.Object)
	return string(out), err
}

// move scales the cluster to pods with the writer running and measures it.
func (d *devcluster) move(ctx context.Context, ns string, router *framework.Router, pods int, loaded []string, perSlot []int) (result, error) {
	var res result
	before, err := owners(ctx, router)
	if err != nil {
		return res, err
	}
	cpu := d.startCPU(ns)
	w, err := router.StartWriter(ctx, fmt.Sprintf("w%d", pods))
	if err != nil {
		return res, err
	}
	time.Sleep(500 * time.Millisecond) // a baseline of writes before the move
	mw := watchMoving(distinct(before))
	others, busy0 := d.otherCPU(), machineBusy()
	start := time.Now()
	if out, err := d.s.Kubectl("-n", ns, "scale", "rec/demo", fmt.Sprintf("--replicas=%d", pods)); err != nil {
		w.Stop()
		return res, fmt.Errorf("kubectl scale: %w: %s", err, out)
	}
	if err := d.waitScaled(ctx, ns, start); err != nil {
		mw.stop()
		w.Stop()
		return res, err
	}
	res.took = time.Since(start)
	busy := machineBusy() - busy0
	from, to, lastOpen, cores, seen := mw.stop()
	rep := w.Stop()
	if !seen {
		return res, fmt.Errorf("no slot was seen moving")
	}
	res.moving, res.after, res.cores = to.Sub(from), start.Add(res.took).Sub(lastOpen), cores
	fmt.Printf("  %6.2fs  first slot seen moving\n  %6.2fs  last poll before every slot was placed and closed\n  %6.2fs  every slot seen placed and closed\n",
		from.Sub(start).Seconds(), lastOpen.Sub(start).Seconds(), to.Sub(start).Seconds())
	if verbose { // for matching with other tools' samples
		fmt.Printf("  moving phase from %.3f to %.3f (Unix time)\n", float64(from.UnixNano())/1e9, float64(to.UnixNano())/1e9)
	}
	res.cpu = cpu()
	var parts []string
	for name, t := range d.otherCPU() {
		parts = append(parts, fmt.Sprintf("%s %.2fs", name, (t-others[name]).Seconds()))
	}
	sort.Strings(parts)
	fmt.Printf("  CPU over the move: machine %.2fs, redis-servers %.2fs, %s\n", busy.Seconds(), res.cpu.Seconds(), strings.Join(parts, ", "))
	res.gap, res.acked, res.failed, res.errors = rep.LongestGap, rep.Acked, rep.Failed, rep.Errors
	fmt.Printf("  longest write gap %v, ended %.2fs after kubectl scale; the writer's slowest read of the slot owners %v\n",
		rep.LongestGap, rep.GapEnded.Sub(start).Seconds(), rep.SlowestRead.Round(time.Millisecond))
	after, err := owners(ctx, router)
	if err != nil {
		return res, err
	}
	for s := range before {
		if before[s] != after[s] {
			res.moved += perSlot[s]
		}
	}
	lost, err := router.Missing(ctx, append(append([]string(nil), loaded...), w.Acked()...))
	if err != nil {
		return res, err
	}
	res.lost = len(lost)
	return res, nil
}

// waitScaled waits until the phase has left Running (the operator saw the new size) and
// is Running again. It prints when the phase, the reason or the progress summary changed,
// from start: where the time of a move goes. It watches the RedisCluster rather than
// polling it: the bench should not load the control plane it measures.
func (d *devcluster) waitScaled(ctx context.Context, ns string, start time.Time) error {
	cfg, err := d.s.RESTConfig()
	if err != nil {
		return err
	}
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("failed to create a watching client: %w", err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(framework.RedisClusterGVK.GroupVersion().WithKind("RedisClusterList"))
	left := false
	last := ""
	for {
		w, err := c.Watch(ctx, list, client.InNamespace(ns), client.MatchingFields{"metadata.name": "demo"})
		if err != nil {
			return fmt.Errorf("failed to watch rec/demo: %w", err)
		}
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue // a watch error: watch again
			}
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			reason, _, _ := unstructured.NestedString(u.Object, "status", "reason")
			summary, _, _ := unstructured.NestedString(u.Object, "status", "progress", "summary")
			if now := strings.TrimSpace(phase + " " + reason + " " + summary); now != last {
				fmt.Printf("  %6.2fs  %s\n", time.Since(start).Seconds(), now)
				last = now
			}
			left = left || phase != "Running"
			if left && phase == "Running" {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("not Running again: %w", err)
		}
	}
}

// otherCPU is the CPU time used so far by the operator, this program (the writer), and the
// devcluster's control plane and nodes (their pid files).
func (d *devcluster) otherCPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	if t, err := procCPU(d.op.PID()); err == nil {
		out["operator"] = t
	}
	if t, err := procCPU(os.Getpid()); err == nil {
		out["bench and writer"] = t
	}
	files, _ := filepath.Glob(filepath.Join(d.s.StateDir, "pids", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		if t, err := procCPU(pid); err == nil {
			out["control plane and nodes"] += t
		}
	}
	return out
}

// owners maps every slot to its owner's address.
func owners(ctx context.Context, r *framework.Router) ([]string, error) {
	if err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	out := make([]string, topology.SlotCount)
	for s := range out {
		out[s] = r.Owner(s)
	}
	return out, nil
}

// startCPU samples the CPU time of every redis-server of the namespace's pods every
// 200 ms, so a process that starts or goes during the move is counted while it ran (up to
// its last sample); the returned function stops sampling and gives the total used since
// the start.
func (d *devcluster) startCPU(ns string) func() time.Duration {
	var mu sync.Mutex
	first, last := map[int]time.Duration{}, map[int]time.Duration{}
	started := false
	sample := func() {
		// The nodes' cgroups, not the API: the bench should not load the control plane it
		// measures. The bench's namespace is the only one with Redis pods while it runs.
		pids := framework.RedisServerPIDs()
		mu.Lock()
		defer mu.Unlock()
		for _, pid := range pids {
			t, err := procCPU(pid)
			if err != nil {
				continue
			}
			if _, ok := first[pid]; !ok && !started {
				first[pid] = t // a process started during the move counts from 0
			}
			last[pid] = t
		}
		started = true
	}
	sample()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				sample()
			}
		}
	}()
	return func() time.Duration {
		close(stop)
		<-done
		sample()
		mu.Lock()
		defer mu.Unlock()
		var sum time.Duration
		for pid, t := range last {
			sum += t - first[pid]
		}
		return sum
	}
}
