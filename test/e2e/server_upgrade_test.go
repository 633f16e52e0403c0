//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// serverImage is one server as the spec asks for it and as its instances report it.
type serverImage struct {
	repository, version string
	server              string // INFO server, e.g. "valkey 9.1.2"
}

var (
	redis70  = serverImage{"library/redis", "7.0", "redis 7.0.15"}
	redis80  = serverImage{"library/redis", "8.0", "redis 8.0.2"}
	valkey81 = serverImage{"valkey/valkey", "8.1", "valkey 8.1.1"}
	valkey91 = serverImage{"valkey/valkey", "9.1", "valkey 9.1.2"}
)

// TestServerUpgrades rolls the demo cluster (6 pods, 3 masters, the exporter sidecar)
// across server versions and engines by changing spec.repository and spec.version, each
// roll with faultKeys keys loaded and the writer running throughout: Redis 7.0 -> 8.0 (then
// the way back, refused before any pod moves), Redis 7.0 -> Valkey 8.1 -> Valkey 9.1 on one
// cluster, and Redis 7.0 -> Valkey 9.1 directly. No key and no acknowledged write may be
// lost; every instance must report the new server; and no replica may ever be sent a full
// sync by a master whose RDB its server cannot read (the roll restarts the replicas first
// and fails each master over to an upgraded replica, so full syncs go from old to new).
// The three clusters roll at the same time.
func TestServerUpgrades(t *testing.T) {
	t.Parallel()
	chains := []struct {
		name  string
		steps []serverImage
		// refuse is a server the last step's cannot be rolled back to.
		refuse *serverImage
	}{
		{"redis-7.0-to-8.0", []serverImage{redis80}, &redis70},
		{"redis-7.0-to-valkey-8.1-to-9.1", []serverImage{valkey81, valkey91}, nil},
		{"redis-7.0-to-valkey-9.1", []serverImage{valkey91}, nil},
	}
	for i, c := range chains {
		t.Run(c.name, func(t *testing.T) {
			// The chains run at once: a roll mostly waits (each pod's preStop, its
			// restart, the sync check), so three take about as long as the longest.
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
			defer cancel()
			ns := fmt.Sprintf("server-upgrade-%d", i)
			begin := time.Now()
			f := startFault(ctx, t, ns, func(u *unstructured.Unstructured) {
				withServer(redis70.repository, redis70.version)(u)
				withExporter(u)
			})
			expectServer(ctx, t, ns, "demo", redis70.server)
			watch := watchSyncs(ctx, ns, "demo")
			from := redis70
			var report []string
			for _, to := range c.steps {
				f.w.TakeLongestGap()
				took := rollServer(ctx, t, ns, to)
				gap := f.w.TakeLongestGap()
				expectServer(ctx, t, ns, "demo", to.server)
				report = append(report, fmt.Sprintf("%s -> %s: roll %.1fs, longest write gap %v",
					from.server, to.server, took.Seconds(), gap.Round(time.Millisecond)))
				t.Logf("UPGRADE %s", report[len(report)-1])
				from = to
			}
			seen, bad := watch.stop()
			t.Logf("syncs served (master -> replica): %s", seen)
			if seen == "" {
				t.Errorf("the sync watcher read no sync served: it saw nothing")
			}
			if len(bad) > 0 {
				t.Errorf("full syncs a replica cannot load: %v", bad)
			}
			if c.refuse != nil {
				refuseDowngrade(ctx, t, ns, *c.refuse, from)
			}
			expectExporters(ctx, t, ns, "demo")
			rep := f.finish(c.name, 0, time.Since(begin))
			t.Logf("UPGRADE %s with %d keys: %s; writer over the whole case: %v; case %.1fs",
				c.name, faultKeys, strings.Join(report, "; "), rep, time.Since(begin).Seconds())
		})
	}
}

// rollServer sets the cluster's image to to and waits for the roll: Upgrading, then
// Running with every pod on the new revision. It returns how long that took.
func rollServer(ctx context.Context, t *testing.T, ns string, to serverImage) time.Duration {
	t.Helper()
	start := time.Now()
	patchSpec(ctx, t, ns, "demo", fmt.Sprintf(`{"repository":%q,"version":%q}`, to.repository, to.version))
	if err := stack.WaitForPhase(ctx, ns, "demo", "Upgrading", 30*time.Second); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, ns, "demo").Status.Reason)
	}
	if err := stack.WaitForPhase(ctx, ns, "demo", "Running", 6*time.Minute); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, ns, "demo").Status.Reason)
	}
	took := time.Since(start)
	g := NewWithT(t)
	sts := &appsv1.StatefulSet{}
	g.Expect(kubeClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, sts)).To(Succeed())
	pods, err := stack.Pods(ctx, ns, selectorOf("demo"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(6))
	for _, p := range pods {
		g.Expect(p.Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(sts.Status.UpdateRevision), "revision of %s", p.Name)
		g.Expect(containerStatus(&p, "redis").Image).To(Equal("docker.io/" + to.repository + ":" + to.version))
	}
	return took
}

// refuseDowngrade sets the image back to older, which cannot read what running writes, and
// expects the refusal (status reason and a DowngradeRefused Warning) with no pod restarted
// and the StatefulSet's template untouched; setting it forward again clears it.
func refuseDowngrade(ctx context.Context, t *testing.T, ns string, older, running serverImage) {
	t.Helper()
	g := NewWithT(t)
	kc := kubeClient(t)
	uids := func() map[string]types.UID {
		pods, err := stack.Pods(ctx, ns, selectorOf("demo"))
		g.Expect(err).NotTo(HaveOccurred())
		out := map[string]types.UID{}
		for _, p := range pods {
			out[p.Name] = p.UID
		}
		return out
	}
	before := uids()
	sts := &appsv1.StatefulSet{}
	g.Expect(kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, sts)).To(Succeed())
	image := sts.Spec.Template.Spec.Containers[0].Image
	start := time.Now()
	patchSpec(ctx, t, ns, "demo", fmt.Sprintf(`{"repository":%q,"version":%q}`, older.repository, older.version))
	var reason string
	g.Eventually(func() string {
		reason = getCluster(ctx, t, ns, "demo").Status.Reason
		return reason
	}, 30*time.Second, 100*time.Millisecond).Should(ContainSubstring("cannot load the data the instances hold"))
	refusedIn := time.Since(start)
	g.Expect(reason).To(ContainSubstring("6 instances run " + running.server))
	// A few reconciles more: still Running, no pod moved, the template kept.
	g.Consistently(func(g Gomega) {
		g.Expect(getCluster(ctx, t, ns, "demo").Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
		g.Expect(uids()).To(Equal(before))
		g.Expect(kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
	}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	evs, err := stack.Events(ctx, getCluster(ctx, t, ns, "demo"))
	g.Expect(err).NotTo(HaveOccurred())
	var warned []string
	for _, e := range evs {
		if e.Reason == "DowngradeRefused" && e.Type == corev1.EventTypeWarning {
			warned = append(warned, e.Message)
		}
	}
	g.Expect(warned).To(HaveLen(1), "one DowngradeRefused Warning")
	patchSpec(ctx, t, ns, "demo", fmt.Sprintf(`{"repository":%q,"version":%q}`, running.repository, running.version))
	g.Eventually(func() string { return getCluster(ctx, t, ns, "demo").Status.Reason }, 30*time.Second, 100*time.Millisecond).
		ShouldNot(ContainSubstring("cannot load"))
	g.Expect(uids()).To(Equal(before))
	t.Logf("DOWNGRADE %s -> %s refused in %v, no pod restarted: %s", running.server, older.server, refusedIn.Round(time.Millisecond), reason)
}

// syncWatcher samples every pod's INFO server, replication and stats while rolls run, and
// counts the syncs each master served (sync_full, sync_partial_ok) by the servers at both
// ends, the replica being the one the master lists. A full sync to a replica whose server
// cannot read the master's RDB (topology.UnreadableRDB) is what the roll's order must never
// cause; it is also caught while in flight (the master lists the replica in wait_bgsave or
// send_bulk, or the replica says master_sync_in_progress:1).
type syncWatcher struct {
	mu      sync.Mutex
	full    map[string]int // "redis 7.0.15 -> valkey 9.1.2" -> full syncs
	partial map[string]int
	bad     map[string]bool // full syncs a replica cannot load
	// served is each master process's (pod IP) last sync_full and sync_partial_ok.
	served map[string][2]int
	quit   chan struct{}
	done   chan struct{}
}

func watchSyncs(ctx context.Context, ns, name string) *syncWatcher {
	w := &syncWatcher{full: map[string]int{}, partial: map[string]int{}, bad: map[string]bool{},
		served: map[string][2]int{}, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			w.sample(ctx, ns, name)
			select {
			case <-w.quit:
				return
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the watch and says the syncs seen, and the full syncs a replica cannot load.
func (w *syncWatcher) stop() (seen string, bad []string) {
	close(w.quit)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for _, kind := range []struct {
		name string
		n    map[string]int
	}{{"full", w.full}, {"partial", w.partial}} {
		for dir, n := range kind.n {
			parts = append(parts, fmt.Sprintf("%s %s x%d", kind.name, dir, n))
		}
	}
	for k := range w.bad {
		bad = append(bad, k)
	}
	sort.Strings(parts)
	sort.Strings(bad)
	return strings.Join(parts, ", "), bad
}

type nodeInfo struct {
	pod    string
	server topology.Server
	fields map[string]string
}

// replicas are the replicas a master lists (slaveN), by IP, with their state.
func (n nodeInfo) replicas() map[string]string {
	out := map[string]string{}
	for k, v := range n.fields {
		if !strings.HasPrefix(k, "slave") || !strings.Contains(v, "state=") {
			continue
		}
		attrs := map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			if a, b, ok := strings.Cut(kv, "="); ok {
				attrs[a] = b
			}
		}
		out[attrs["ip"]] = attrs["state"]
	}
	return out
}

func (n nodeInfo) count(field string) int {
	v, _ := strconv.Atoi(n.fields[field])
	return v
}

func (w *syncWatcher) sample(ctx context.Context, ns, name string) {
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	if err != nil {
		return
	}
	byIP := map[string]nodeInfo{}
	for _, p := range pods {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		c := framework.NodeClient(p.Status.PodIP, "")
		sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		// One INFO of three sections (go-redis v8's Info sends only the first).
		text, err := c.Do(sctx, "info", "server", "replication", "stats").Text()
		cancel()
		c.Close()
		if err != nil {
			continue
		}
		fields := map[string]string{}
		for _, line := range strings.Split(text, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				fields[k] = v
			}
		}
		byIP[p.Status.PodIP] = nodeInfo{pod: p.Name, server: topology.ParseServer(text), fields: fields}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	inFlight := map[[2]string]bool{} // master IP, replica IP
	for ip, n := range byIP {
		if n.fields["role"] == "slave" && n.fields["master_sync_in_progress"] == "1" {
			inFlight[[2]string{n.fields["master_host"], ip}] = true
		}
		if n.fields["role"] != "master" {
			continue
		}
		reps := n.replicas()
		for rip, st := range reps {
			if st == "wait_bgsave" || st == "send_bulk" {
				inFlight[[2]string{ip, rip}] = true
			}
		}
		// Syncs served since the last sample, to the replicas the master lists now.
		now := [2]int{n.count("sync_full"), n.count("sync_partial_ok")}
		last, seen := w.served[ip]
		w.served[ip] = now
		if !seen {
			last = [2]int{}
		}
		for rip := range reps {
			r, ok := byIP[rip]
			if !ok || !n.server.Known() || !r.server.Known() {
				continue
			}
			dir := fmt.Sprintf("%s -> %s", n.server, r.server)
			if d := now[0] - last[0]; d > 0 {
				w.full[dir] += d
				inFlight[[2]string{ip, rip}] = true
			}
			if d := now[1] - last[1]; d > 0 {
				w.partial[dir] += d
			}
		}
	}
	for pair := range inFlight {
		m, okm := byIP[pair[0]]
		r, okr := byIP[pair[1]]
		if !okm || !okr || !m.server.Known() || !r.server.Known() {
			continue
		}
		if why := topology.UnreadableRDB(r.server, []topology.Server{m.server}); why != "" {
			w.bad[fmt.Sprintf("%s (%s) -> %s (%s): %s", m.pod, m.server, r.pod, r.server, why)] = true
		}
	}
}
