package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// Slot migration watched and controlled by the user, on real redis-servers: a 6-pod
// cluster loaded with migrationTestKeys keys and a writer running throughout (the e2e suite's
// Router and Writer, routed to the servers directly).

const migrationTestKeys = 100_000

// migrationRun is a formed cluster under load, its servers and a background reconciler.
type migrationRun struct {
	t       *testing.T
	h       *harness
	rc      *redisv1alpha1.RedisCluster
	mu      sync.Mutex
	servers []*redistest.Server
	cfg     redistest.Config // how servers start
	r       *framework.Router
	w       *framework.Writer

	stop chan struct{}
	done chan struct{}
	err  error
}

func startMigrationRun(t *testing.T, edit func(*redisv1alpha1.RedisCluster)) *migrationRun {
	t.Helper()
	return startMigrationRunOn(t, redistest.Config{}, edit)
}

// startMigrationRunOn is startMigrationRun on servers started with cfg (another server's
// binary); the servers a scale-out adds are started with it too.
func startMigrationRunOn(t *testing.T, cfg redistest.Config, edit func(*redisv1alpha1.RedisCluster)) *migrationRun {
	t.Helper()
	h := newHarness(t)
	h.r.Options.ScaleTimeout = 10 * time.Minute // a rate-limited, paused migration outlives the default minute
	rc, servers := formClusterOn(t, h, cfg, edit)
	m := &migrationRun{t: t, h: h, rc: rc, servers: servers, cfg: cfg}
	m.r = framework.NewRouter(func(context.Context) ([]string, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return redistest.Addrs(m.servers), nil
	}, "")
	t.Cleanup(m.r.Close)
	ctx := context.Background()
	// WAIT times out while a replica is still in its first sync after forming: load again.
	var err error
	for try := 0; try < 5; try++ {
		if err = m.r.Load(ctx, "pre", migrationTestKeys); err == nil {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.r.StartWriter(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	m.w = w
	t.Cleanup(func() {
		m.stopReconciling()
		if m.w != nil {
			m.w.Stop()
		}
	})
	return m
}

// scaleOutTo8 asks for 8 pods and plays the StatefulSet controller: two more servers as
// demo-6 and demo-7, and the StatefulSet's status at 8 ready.
func (m *migrationRun) scaleOutTo8(edit func(*redisv1alpha1.RedisClusterSpec)) {
	m.t.Helper()
	update(m.t, m.rc, func(s *redisv1alpha1.RedisClusterSpec) {
		s.Replicas = 8
		if edit != nil {
			edit(s)
		}
	})
	m.h.reconcileUntil(m.rc, redisv1alpha1.PhaseScaling, 5)
	added := redistest.Start(m.t, 2, m.cfg)
	startPodsFrom(m.t, m.rc, 6, added)
	m.mu.Lock()
	m.servers = append(m.servers, added...)
	m.mu.Unlock()
	setStatefulSetReady(m.t, m.rc, 8)
}

// setStatefulSetReady gives the StatefulSet's status n ready pods.
func setStatefulSetReady(t *testing.T, rc *redisv1alpha1.RedisCluster, n int32) {
	t.Helper()
	sts := liveStatefulSet(t, rc)
	sts.Status.ObservedGeneration = sts.Generation
	sts.Status.Replicas, sts.Status.ReadyReplicas = n, n
	if err := apiClient.Status().Update(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
}

// reconcileInBackground reconciles the cluster over and over, as the manager would, until
// stopReconciling.
func (m *migrationRun) reconcileInBackground() {
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			res, err := m.h.r.Reconcile(context.Background(), reconcileRequest(m.rc))
			if err != nil && !strings.Contains(err.Error(), "the object has been modified") {
				m.err = err
				return
			}
			time.Sleep(min(max(res.RequeueAfter, time.Millisecond), 200*time.Millisecond))
		}
	}()
}

// stopReconciling waits for the reconcile in flight to return.
func (m *migrationRun) stopReconciling() {
	if m.stop == nil {
		return
	}
	close(m.stop)
	<-m.done
	m.stop = nil
	if m.err != nil {
		m.t.Fatalf("reconcile failed: %v", m.err)
	}
}

// waitFor polls the cluster until cond holds.
func (m *migrationRun) waitFor(what string, within time.Duration, cond func(*redisv1alpha1.RedisCluster) bool) *redisv1alpha1.RedisCluster {
	m.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := get(m.t, m.rc)
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) || (m.done != nil && isClosed(m.done)) {
			m.t.Fatalf("%s: not reached; phase %s, reason %q, progress %+v, reconcile error %v", what, got.Status.Phase, got.Status.Reason, got.Status.Progress, m.err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// integrity is framework.IntegrityOf on the first n servers.
func (m *migrationRun) integrity(n int) error {
	m.mu.Lock()
	addrs := redistest.Addrs(m.servers[:n])
	m.mu.Unlock()
	return framework.IntegrityOf(context.Background(), addrs, "", nil)
}

// finish stops the writer, then requires every pre-loaded key and acknowledged write
// readable, and the slots whole on the first n servers; it logs the figures.
func (m *migrationRun) finish(name string, n int) {
	t := m.t
	t.Helper()
	rep := m.w.Stop()
	acked := m.w.Acked()
	m.w = nil
	if err := m.integrity(n); err != nil {
		t.Errorf("integrity: %v", err)
	}
	ctx := context.Background()
	pre, err := m.r.Missing(ctx, keyNames("pre", migrationTestKeys))
	if err != nil {
		t.Fatal(err)
	}
	lost, err := m.r.Missing(ctx, acked)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MIGRATION %s: pre-loaded keys lost %d/%d, acknowledged writes lost %d/%d, longest write gap %v; writer: %v",
		name, len(pre), migrationTestKeys, len(lost), rep.Acked, rep.LongestGap, rep)
	if len(pre) > 0 || len(lost) > 0 {
		t.Errorf("lost %d pre-loaded keys (e.g. %v) and %d acknowledged writes (e.g. %v)", len(pre), pre[:min(5, len(pre))], len(lost), lost[:min(5, len(lost))])
	}
	if rep.Acked == 0 {
		t.Error("the writer got no write acknowledged")
	}
}

func keyNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s:%d", prefix, i)
	}
	return out
}

// milestoneEvents are the MigrateSlots events recorded.
func milestoneEvents(events []string) []string {
	var out []string
	for _, e := range events {
		if strings.Contains(e, "MigrateSlots:") {
			out = append(out, e)
		}
	}
	return out
}

// A scale-out 6 → 8 capped at 2000 keys/s, paused once slots have moved and resumed:
// the step in flight stops after its slots (none left open, no key on a master that does
// not own its slot), nothing is written to Redis while paused and the status says so,
// and un-pausing finishes at Running with every key. The progress counts every slot,
// with one event per tenth of them, and no step moves keys faster than the cap.
func TestMigrationProgressRateLimitPauseAndResume(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const limit = 2000
	m := startMigrationRun(t, func(rc *redisv1alpha1.RedisCluster) { rc.Spec.UpdateStrategy.MaxKeysPerSecond = limit })
	m.scaleOutTo8(nil)
	m.reconcileInBackground()
	moving := m.waitFor("slots moving", 3*time.Minute, func(rc *redisv1alpha1.RedisCluster) bool {
		return rc.Status.Progress != nil && rc.Status.Progress.SlotsMoved > 0
	})
	t.Logf("moving: %+v", *moving.Status.Progress)
	g.Expect(moving.Status.Progress.Operation).To(Equal(redisv1alpha1.PhaseScaling))
	g.Expect(moving.Status.Progress.SlotsToMove).To(BeEquivalentTo(4096))
	g.Expect(moving.Status.Progress.Summary).To(MatchRegexp(`^\d+/4096 slots$`))
	g.Expect(moving.Status.Progress.KeysPerSecond).To(BeNumerically("<=", limit*3/2), "the cap bounds a step's rate from above")

	update(t, m.rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Pause = true })
	paused := m.waitFor("paused in the status", time.Minute, func(rc *redisv1alpha1.RedisCluster) bool {
		return rc.Status.Progress != nil && rc.Status.Progress.Paused
	})
	m.stopReconciling() // the step in flight has returned
	g.Expect(paused.Status.Phase).To(Equal(redisv1alpha1.PhaseScaling))
	g.Expect(paused.Status.Reason).To(ContainSubstring("spec.pause is true"))
	g.Expect(paused.Status.Progress.Summary).To(HavePrefix("paused at "))
	g.Expect(m.integrity(8)).To(Succeed(), "no slot left open, no key on a master that does not own its slot")
	m.h.redis.Reset()
	for range 3 {
		m.h.reconcile(m.rc)
		time.Sleep(200 * time.Millisecond)
	}
	g.Expect(m.h.redis.WriteNames()).To(BeEmpty(), "nothing written to Redis while paused")
	still := get(t, m.rc).Status.Progress
	g.Expect(still.SlotsMoved).To(BeNumerically("<", 4096), "paused mid-migration")
	t.Logf("paused: %+v", *still)

	update(t, m.rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Pause = false })
	m.reconcileInBackground()
	done := m.waitFor("Running at 8", 5*time.Minute, func(rc *redisv1alpha1.RedisCluster) bool {
		return rc.Status.Phase == redisv1alpha1.PhaseRunning
	})
	m.stopReconciling()
	p := done.Status.Progress
	t.Logf("done: %+v", *p)
	g.Expect(p.FinishTime).NotTo(BeNil())
	g.Expect(p.SlotsMoved).To(BeEquivalentTo(4096))
	g.Expect(p.KeysMoved).To(BeNumerically(">", migrationTestKeys/5))
	g.Expect(p.Summary).To(HavePrefix("done in "))
	g.Expect(done.Status.Masters).To(BeEquivalentTo(4))
	evs := milestoneEvents(m.h.events())
	t.Logf("milestone events: %q", evs)
	g.Expect(len(evs)).To(BeNumerically(">=", 2))
	g.Expect(len(evs)).To(BeNumerically("<=", 11), "one event per tenth of the slots, not per batch")
	m.finish("progress, rate limit 2000 keys/s, pause and resume (6->8)", 8)
}

// shrunkTo6 plays the StatefulSet controller once the operator shrank the StatefulSet to
// 6: demo-6 and demo-7 go, the status says 6 ready, and the Router forgets their servers.
func (m *migrationRun) shrunkTo6() bool {
	if *liveStatefulSet(m.t, m.rc).Spec.Replicas != 6 {
		return false
	}
	ctx := context.Background()
	for _, name := range []string{"demo-6", "demo-7"} {
		pod := &corev1.Pod{}
		if err := apiClient.Get(ctx, client.ObjectKey{Namespace: m.rc.Namespace, Name: name}, pod); err == nil {
			if err := apiClient.Delete(ctx, pod); err != nil {
				m.t.Fatal(err)
			}
		}
	}
	setStatefulSetReady(m.t, m.rc, 6)
	m.mu.Lock()
	m.servers = m.servers[:6]
	m.mu.Unlock()
	return true
}

// knowsOnly requires every one of the first n servers to know exactly n nodes.
func (m *migrationRun) knowsOnly(n int) {
	m.t.Helper()
	for _, srv := range m.servers[:n] {
		c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		text, err := c.ClusterNodes(context.Background()).Result()
		c.Close()
		if err != nil {
			m.t.Fatal(err)
		}
		if lines := strings.Split(strings.TrimSpace(text), "\n"); len(lines) != n {
			m.t.Errorf("%s knows %d nodes, want %d:\n%s", srv.Addr, len(lines), n, text)
		}
	}
}

// An abort: a scale-out 6 → 8 (capped at 2000 keys/s) is set back to 6 once slots have
// moved to the new masters. The step in flight stops after its slots, the slots already
// moved go back to the three old masters, the new nodes are forgotten and reset, the
// StatefulSet shrinks to 6, and the cluster is Running at 6 with every key.
func TestMigrationAbortScaleOutMovesSlotsBack(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	m := startMigrationRun(t, func(rc *redisv1alpha1.RedisCluster) { rc.Spec.UpdateStrategy.MaxKeysPerSecond = 2000 })
	m.scaleOutTo8(nil)
	m.reconcileInBackground()
	moving := m.waitFor("slots moving", 3*time.Minute, func(rc *redisv1alpha1.RedisCluster) bool {
		return rc.Status.Progress != nil && rc.Status.Progress.SlotsMoved > 0
	})
	t.Logf("aborting at %+v", *moving.Status.Progress)
	update(t, m.rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Replicas = 6 })
	done := m.waitFor("Running at 6", 5*time.Minute, func(rc *redisv1alpha1.RedisCluster) bool {
		if rc.Status.Phase == redisv1alpha1.PhaseRunning {
			return true
		}
		m.shrunkTo6()
		return false
	})
	m.stopReconciling()
	t.Logf("progress after the abort: %+v", *done.Status.Progress)
	g.Expect(done.Status.Masters).To(BeEquivalentTo(3))
	g.Expect(*liveStatefulSet(t, m.rc).Spec.Replicas).To(BeEquivalentTo(6))
	g.Expect(done.Status.Progress.SlotsMoved).To(BeNumerically(">", moving.Status.Progress.SlotsMoved), "the moved slots went back")
	m.knowsOnly(6)
	m.finish("abort of a scale-out 6->8 mid-migration", 6)
}

// AssignReceive end to end: 6 → 8 with one entry giving the new master 3000 slots from
// demo-0 and demo-1 only; demo-2 keeps its slots. No cap on keys per second.
func TestMigrationAssignReceive(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	m := startMigrationRun(t, nil)
	before := m.slotsOf(2)
	m.scaleOutTo8(func(s *redisv1alpha1.RedisClusterSpec) {
		s.UpdateStrategy.Type = redisv1alpha1.UpdateStrategyAssignReceive
		s.UpdateStrategy.AssignStrategies = []redisv1alpha1.AssignStrategy{{Slots: 3000, FromReplicas: "demo-0,demo-1"}}
	})
	m.reconcileInBackground()
	done := m.waitFor("Running at 8", 5*time.Minute, func(rc *redisv1alpha1.RedisCluster) bool {
		return rc.Status.Phase == redisv1alpha1.PhaseRunning
	})
	m.stopReconciling()
	t.Logf("progress: %+v", *done.Status.Progress)
	g.Expect(done.Status.Masters).To(BeEquivalentTo(4))
	g.Expect(done.Status.Progress.SlotsMoved).To(BeEquivalentTo(3000))
	g.Expect(m.slotsOf(2)).To(Equal(before), "demo-2 gives nothing")
	newMaster := 0
	for _, c := range done.Status.Conditions {
		if (c.Name == "demo-6" || c.Name == "demo-7") && c.Type == topology.RoleMaster {
			newMaster++
			slots, err := topology.ParseSlotRanges(c.Slots)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(slots.Count()).To(Equal(3000))
		}
	}
	g.Expect(newMaster).To(Equal(1))
	m.finish("AssignReceive 6->8, 3000 slots from demo-0 and demo-1", 8)
}

// slotsOf is the slots server i serves, by its own CLUSTER NODES.
func (m *migrationRun) slotsOf(i int) string { return m.self(i).Slots.String() }

// self is server i's own line of CLUSTER NODES.
func (m *migrationRun) self(i int) topology.Node {
	m.t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: m.servers[i].Addr})
	defer c.Close()
	text, err := c.ClusterNodes(context.Background()).Result()
	if err != nil {
		m.t.Fatal(err)
	}
	nodes, err := topology.ParseClusterNodes(text)
	if err != nil {
		m.t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Myself {
			return n
		}
	}
	m.t.Fatalf("server %d does not name itself", i)
	return topology.Node{}
}

// A scale-in 8 → 6 set back to 8 once the leaving master has given away its last slot.
// The operator turned cluster-allow-replica-migration off on the leaving nodes, so it is
// still a master, empty: its share moves back to it. The second run then does what Redis
// does without that directive (before 6.2): makes it a replica of a master holding slots;
// the operator releases a spare replica into an empty master instead. Both end Running at
// 8 with 4 masters and every key.
func TestMigrationScaleInSetBackAfterLeavingMasterEmptied(t *testing.T) {
	t.Parallel()
	for _, asOldRedis := range []bool{false, true} {
		t.Run(map[bool]string{false: "stays master", true: "made replica"}[asOldRedis], func(t *testing.T) {
			scaleInSetBackAfterEmptied(t, asOldRedis)
		})
	}
}

func scaleInSetBackAfterEmptied(t *testing.T, asOldRedis bool) {
	g := NewWithT(t)
	m := startMigrationRun(t, nil)
	m.scaleOutTo8(nil)
	m.reconcileInBackground()
	m.waitFor("Running at 8", 5*time.Minute, func(rc *redisv1alpha1.RedisCluster) bool {
		return rc.Status.Phase == redisv1alpha1.PhaseRunning
	})
	m.stopReconciling()
	leaving := 6
	if m.slotsOf(6) == "" {
		leaving = 7
	}
	g.Expect(m.slotsOf(leaving)).NotTo(BeEmpty())
	update(t, m.rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Replicas = 6 })
	ctx := context.Background()
	for step := 0; m.slotsOf(leaving) != ""; step++ {
		if step > 500 {
			t.Fatalf("demo-%d still serves %s after 500 reconciles", leaving, m.slotsOf(leaving))
		}
		if _, err := m.h.r.Reconcile(ctx, reconcileRequest(m.rc)); err != nil && !strings.Contains(err.Error(), "the object has been modified") {
			t.Fatal(err)
		}
	}
	g.Expect(m.self(leaving).Master).To(BeTrue(), "the emptied leaving master stays a master")
	if asOldRedis {
		for i := 0; i < 6; i++ {
			if m.slotsOf(i) != "" {
				c := goredis.NewClient(&goredis.Options{Addr: m.servers[leaving].Addr})
				err := c.Do(ctx, "cluster", "replicate", m.self(i).ID).Err()
				c.Close()
				g.Expect(err).NotTo(HaveOccurred())
				break
			}
		}
	}
	t.Logf("demo-%d emptied (made a replica: %v); setting replicas back to 8", leaving, asOldRedis)
	update(t, m.rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Replicas = 8 })
	m.reconcileInBackground()
	done := m.waitFor("Running at 8 again", 5*time.Minute, func(rc *redisv1alpha1.RedisCluster) bool {
		if rc.Status.Phase == redisv1alpha1.PhaseFailed {
			t.Fatalf("Failed: %s", rc.Status.Reason)
		}
		return rc.Status.Phase == redisv1alpha1.PhaseRunning && rc.Status.Masters == 4
	})
	// The scale-in had turned replica migration off on the leaving nodes; now kept, they
	// get redis.conf's value (the default, yes) back once Running.
	var seen []string // events() drains the recorder
	m.waitFor("replica migration set back", time.Minute, func(*redisv1alpha1.RedisCluster) bool {
		seen = append(seen, m.h.events()...)
		return slices.ContainsFunc(seen, func(e string) bool { return strings.Contains(e, ReasonReplicaMigrationRestored) })
	})
	m.stopReconciling()
	for i, s := range m.servers {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr})
		v, err := c.ConfigGet(ctx, "cluster-allow-replica-migration").Result()
		c.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v).To(Equal([]any{"cluster-allow-replica-migration", "yes"}), "demo-%d", i)
	}
	g.Expect(*liveStatefulSet(t, m.rc).Spec.Replicas).To(BeEquivalentTo(8))
	g.Expect(done.Status.Masters).To(BeEquivalentTo(4))
	var released []string
	for _, e := range append(seen, m.h.events()...) {
		if strings.Contains(e, string(topology.ActionReleaseReplica)) {
			released = append(released, e)
		}
	}
	t.Logf("release events: %q", released)
	if asOldRedis {
		g.Expect(released).To(HaveLen(1), "one spare replica made an empty master")
		m.finish("scale-in 8->6 set back to 8 after the leaving master was emptied and made a replica", 8)
		return
	}
	g.Expect(released).To(BeEmpty(), "no replica released: the emptied master is one")
	m.finish("scale-in 8->6 set back to 8 after the leaving master was emptied", 8)
}
