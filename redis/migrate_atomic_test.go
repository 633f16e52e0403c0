package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// valkeyCfg runs Valkey 9.1.2 from the project's image (bin/images/valkey-9.1.tar).
func valkeyCfg(t *testing.T) redistest.Config {
	cfg := healCfg
	cfg.Binary = redistest.ServerBinary(t, redistest.Image{Name: "valkey 9.1", Archive: "valkey-9.1"})
	return cfg
}

// valkeyCluster starts n Valkey 9.1 servers, forms 3 masters with rpm replicas each from
// the first ones, and loads n keys named prefix-i.
func valkeyCluster(t *testing.T, n, rpm int, prefix string, nkeys int) (Factory, []topology.Member, []string) {
	t.Helper()
	members := membersOf(redistest.Start(t, n, valkeyCfg(t)))
	f := newFactory(t, Options{})
	formed := members[:3*(1+rpm)]
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, formed, 3, rpm); err != nil {
		t.Fatal(err)
	}
	keys := numberedKeys(prefix, nkeys)
	putKeysTLS(t, f, formed, keys, nil)
	return f, members, keys
}

// scaleAtomic is scaleUntilDone that also checks every step that moved slots used the
// atomic mover, and returns the keys moved and the steps that moved slots.
func scaleAtomic(t *testing.T, f Factory, members []topology.Member, req ScaleRequest) (int, int) {
	t.Helper()
	ctx := ctxFor(t, 90*time.Second)
	keys, steps := 0, 0
	for {
		p, err := Scale(ctx, f, members, req)
		if err != nil {
			t.Fatalf("scale (%s): %v", p.Phase, err)
		}
		if p.MovedSlots > 0 || p.Phase == PhaseMigrating {
			if p.Mover != MoverAtomic {
				t.Fatalf("a step moving slots on Valkey 9 used the %q mover", p.Mover)
			}
			steps++
		}
		keys += p.MovedKeys
		if p.Done {
			return keys, steps
		}
		if ctx.Err() != nil {
			t.Fatalf("not scaled within 90 s; last phase %s", p.Phase)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// On Valkey 9.1.2 a 3-master cluster with 100,000 keys grows to 4 masters and shrinks back
// with a writer running, the slots moved by the servers (CLUSTER MIGRATESLOTS): every
// key and every acknowledged write is readable after each, the moved keys are counted,
// the longest write gap is logged, and no slot is left open or any job running.
func TestAtomicScaleOutAndInKeepsKeys(t *testing.T) {
	f, members, keys := valkeyCluster(t, 8, 1, "asm", 100_000)

	w := startTLSWriter(t, members, nil)
	began := time.Now()
	imports := watchImports(t, f, members)
	moved, steps := scaleAtomic(t, f, members, ScaleRequest{Masters: 4, ReplicasPerMaster: 1, Keep: 8, Budget: 2 * time.Second})
	out := time.Since(began)
	atOnce, sources, exports := imports()
	t.Logf("the new master imported from %d sources, at most %d at once; a source ran at most %d jobs at once", sources, atOnce, exports)
	if atOnce > AtomicSourcesPerTarget || sources < 2 {
		t.Errorf("the new master imported from %d sources at once (%d in all), want at most %d at once and every old master in turn",
			atOnce, sources, AtomicSourcesPerTarget)
	}
	if exports > AtomicJobsPerSource || exports == 0 {
		t.Errorf("a source ran %d jobs at once, want 1 to %d", exports, AtomicJobsPerSource)
	}
	began = time.Now()
	back, _ := scaleAtomic(t, f, members, ScaleRequest{Masters: 3, ReplicasPerMaster: 1, Keep: 6, Budget: 2 * time.Second})
	in := time.Since(began)
	written, failed, gap := w.stop()
	t.Logf("Valkey 9.1 ASM: 3->4 masters %v (%d keys, %d steps), 4->3 %v (%d keys); writer %d acknowledged, %d failed, longest gap %v",
		out, moved, steps, in, back, len(written), failed, gap)
	if moved < 20_000 || back < 20_000 {
		t.Errorf("moved %d keys out and %d in, want about a quarter of 100,000 each", moved, back)
	}
	if len(written) == 0 {
		t.Fatal("the writer wrote nothing")
	}
	if lost := lostKeysTLS(t, f, members[:6], append(keys, written...), nil); lost > 0 {
		t.Fatalf("%d keys lost", lost)
	}
	st, err := Observe(ctxFor(t, 5*time.Second), f, members[:6])
	if err != nil {
		t.Fatal(err)
	}
	if !st.NoOpenSlots() || !st.AllSlotsCovered() || st.Masters() != 3 {
		t.Fatalf("after scale-in: open slots %v, covered %v, %d masters", !st.NoOpenSlots(), st.AllSlotsCovered(), st.Masters())
	}
	assertNoRunningJobs(t, f, members[:6])
}

// watchImports reads the nodes' jobs every 5 ms until the returned function is called,
// which reports the most sources whose imports one node ran at once, how many sources
// were seen in all, and the most exports one node ran at once.
func watchImports(t *testing.T, f Factory, nodes []topology.Member) func() (int, int, int) {
	t.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	atOnce, seen, exports := 0, map[string]bool{}, 0
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			for _, n := range nodes {
				jobs, _ := f.For(n.Addr).SlotMigrations(context.Background())
				now, out := map[string]bool{}, 0
				for _, j := range jobs {
					if j.Operation == "IMPORT" && !j.Finished() && j.Source != "" {
						now[j.Source], seen[j.Source] = true, true
					}
					if j.Operation == "EXPORT" && !j.Finished() {
						out++
					}
				}
				atOnce, exports = max(atOnce, len(now)), max(exports, out)
			}
		}
	}()
	return func() (int, int, int) {
		close(stop)
		<-done
		return atOnce, len(seen), exports
	}
}

// nodeJob is one job of CLUSTER GETSLOTMIGRATIONS and the node that reported it.
type nodeJob struct {
	addr string
	SlotMigration
}

// allJobs reads the jobs of every member.
func allJobs(t *testing.T, f Factory, members []topology.Member) []nodeJob {
	t.Helper()
	var out []nodeJob
	for _, m := range members {
		jobs, err := f.For(m.Addr).SlotMigrations(ctxFor(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			out = append(out, nodeJob{m.Addr, j})
		}
	}
	return out
}

func assertNoRunningJobs(t *testing.T, f Factory, members []topology.Member) {
	t.Helper()
	for _, j := range allJobs(t, f, members) {
		if !j.Finished() {
			t.Errorf("%s still runs slot migration %s (%s, %s)", j.addr, j.Name, j.Operation, j.State)
		}
	}
}

// An operator restarted mid-move finds the servers' jobs running: the next step adopts
// them instead of starting a second migration of the same slots (which the source would
// refuse: "I am already migrating slot"), and the resize finishes. An abort (the size set
// back while a job runs) cancels the job with CLUSTER CANCELSLOTMIGRATIONS: the slots stay
// with their source, the target keeps none of their keys, nothing is lost.
func TestAtomicAdoptsRunningJobsAndCancelsUnwanted(t *testing.T) {
	f, members, keys := valkeyCluster(t, 4, 0, "adopt", 30_000)
	// Jobs of at most 1,000 keys: each source's move is two jobs or more, so adoption and
	// cancellation meet several jobs of one pair, as with millions of keys.
	defer func(n float64) { AtomicJobKeys = n }(AtomicJobKeys)
	AtomicJobKeys = 1000
	out := ScaleRequest{Masters: 4, Keep: 4, Budget: 2 * time.Second}

	// Steps until the first one that migrates: it starts jobs; a budget of 1 ns returns
	// at once and leaves them running (the operator "crashed").
	ctx := ctxFor(t, 60*time.Second)
	startJobsAndLeave(ctx, t, f, members)
	// A second start of the same slots is what adoption avoids: the source refuses it.
	job, src, ok := aRunningExport(t, f, members)
	if !ok {
		t.Fatal("no export job running after a step that started them")
	}
	slot := job.Slots[0].Start
	err := f.For(src).MigrateSlotsAtomic(ctx, []AtomicJob{{Slots: []topology.SlotRange{{Start: slot, End: slot}}, Target: job.Target}})
	if err == nil || !strings.Contains(err.Error(), "already migrating") {
		t.Fatalf("a second migration of slot %d: %v, want refused as already migrating", slot, err)
	}

	// Abort: the size set back while the jobs run cancels them.
	if _, err := Scale(ctx, f, members, ScaleRequest{Masters: 3, Keep: 3, Budget: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	cancelled := 0
	for _, j := range allJobs(t, f, members[:3]) {
		if j.State == "cancelled" {
			cancelled++
		}
	}
	if cancelled == 0 {
		t.Fatal("the abort cancelled no job")
	}
	if lost := lostKeysTLS(t, f, members, keys, nil); lost > 0 {
		t.Fatalf("%d keys lost after the abort", lost)
	}

	// Start again, leave the jobs running, then resume with a normal budget: adopted.
	startJobsAndLeave(ctx, t, f, members)
	if _, _, ok := aRunningExport(t, f, members); !ok {
		t.Fatal("no export job running after the second start")
	}
	moved, _ := scaleAtomic(t, f, members, out)
	if moved == 0 {
		t.Error("the resumed resize counted no key moved")
	}
	succeeded := 0
	for _, j := range allJobs(t, f, members[:3]) {
		if j.State == "failed" {
			t.Errorf("%s: job %s failed: %s (a second start of adopted slots?)", j.addr, j.Name, j.Message)
		}
		if j.Operation == "EXPORT" && j.State == "success" {
			succeeded++
		}
	}
	if succeeded <= 3 {
		t.Errorf("%d export jobs succeeded for 3 sources: the moves were not cut into jobs of at most %v keys", succeeded, AtomicJobKeys)
	}
	if lost := lostKeysTLS(t, f, members, keys, nil); lost > 0 {
		t.Fatalf("%d keys lost", lost)
	}
	assertNoRunningJobs(t, f, members)
}

// startJobsAndLeave takes scale-out steps to 4 masters until one starts jobs, with a
// budget of 1 ns: the step returns at once and leaves them running, as an operator that
// crashed would.
func startJobsAndLeave(ctx context.Context, t *testing.T, f Factory, members []topology.Member) {
	t.Helper()
	for {
		p, err := Scale(ctx, f, members, ScaleRequest{Masters: 4, Keep: 4, Budget: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		if p.Phase == PhaseMigrating {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// aRunningExport is an export job some member runs, and that member's address.
func aRunningExport(t *testing.T, f Factory, members []topology.Member) (SlotMigration, string, bool) {
	t.Helper()
	for _, j := range allJobs(t, f, members) {
		if j.Operation == "EXPORT" && !j.Finished() {
			return j.SlotMigration, j.addr, true
		}
	}
	return SlotMigration{}, "", false
}

// The operator user's rules (one file for every server) cannot name the ASM commands, which
// Redis and Valkey 8 refuse in a rule: on Valkey 9 the mover grants them to the operator
// user on a node that answers NOPERM, and goes on; ACL LOG keeps only that first refusal.
func TestAtomicGrantsItsCommandsToTheOperatorUser(t *testing.T) {
	const pw = "pw"
	users := ClusterUsers(PasswordHash(pw))
	cfg := valkeyCfg(t)
	cfg.Password = pw
	cfg.AuthConf = AuthConf(pw, users)
	servers := redistest.Start(t, 2, cfg)
	members := membersOf(servers)
	f := newFactory(t, Options{User: OperatorUser, Password: pw})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 2, 0); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	st, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := st.Members[0].Self(), st.Members[1].Self()
	slot := src.Slots[0].Start
	m := f.For(members[0].Addr)
	if err := m.MigrateSlotsAtomic(ctx, []AtomicJob{{Slots: []topology.SlotRange{{Start: slot, End: slot + 9}}, Target: dst.ID}}); err != nil {
		t.Fatal(err)
	}
	waitOwned(t, f, members, []int{slot, slot + 9}, dst.ID)
	jobs, err := m.SlotMigrations(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].State != "success" {
		t.Fatalf("jobs %+v, %v: want one that succeeded", jobs, err)
	}
	admin := goredis.NewClient(&goredis.Options{Addr: members[0].Addr, Password: pw})
	defer admin.Close()
	rules, err := admin.Do(ctx, "acl", "getuser", OperatorUser).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range AtomicMigrationCommands {
		if !strings.Contains(strings.ToLower(strings.ReplaceAll(fmtReply(rules), "\n", " ")), "+"+c) {
			t.Errorf("the operator user lacks +%s after the grant: %v", c, rules)
		}
	}
}

func fmtReply(v interface{}) string {
	switch x := v.(type) {
	case []interface{}:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fmtReply(e)
		}
		return strings.Join(parts, " ")
	case map[interface{}]interface{}:
		var parts []string
		for k, e := range x {
			parts = append(parts, fmtReply(k), fmtReply(e))
		}
		return strings.Join(parts, " ")
	case string:
		return x
	}
	return ""
}

// recentFailures bounds retries: failures of the pair in a row, newest first, within the
// window; a success ends the run, a cancellation is skipped, other pairs do not count.
func TestRecentFailuresBoundsRetries(t *testing.T) {
	now := time.Now()
	p := &atomicPair{from: "a", to: "b", slots: []int{5, 6}}
	job := func(state, target string, ago time.Duration, lo, hi int) SlotMigration {
		return SlotMigration{Operation: "EXPORT", Target: target, State: state, Message: state + "-msg", Created: now.Add(-ago),
			Slots: []topology.SlotRange{{Start: lo, End: hi}}}
	}
	cases := []struct {
		jobs []SlotMigration
		want int
	}{
		{[]SlotMigration{job("failed", "b", 0, 5, 6), job("cancelled", "b", 0, 5, 6), job("failed", "b", time.Second, 0, 10), job("failed", "b", 0, 5, 5)}, 3},
		{[]SlotMigration{job("failed", "b", 0, 5, 6), job("success", "b", 0, 5, 6), job("failed", "b", 0, 5, 6)}, 1},
		{[]SlotMigration{job("failed", "c", 0, 5, 6), job("failed", "b", 0, 7, 9)}, 0},
		{[]SlotMigration{job("failed", "b", 0, 5, 6), job("failed", "b", atomicFailureWindow+time.Minute, 5, 6)}, 1},
	}
	for i, c := range cases {
		if n, msg := recentFailures(c.jobs, p, now); n != c.want || n > 0 && msg != "failed-msg" {
			t.Errorf("case %d: %d failures (%q), want %d", i, n, msg, c.want)
		}
	}
	if !UsesAtomicMigration([]topology.Server{{Name: "valkey", Version: "9.1.2"}, {Name: "valkey", Version: "9.0.0"}}) {
		t.Error("an all-Valkey-9 cluster must use ASM")
	}
	for _, mixed := range [][]topology.Server{
		{{Name: "valkey", Version: "9.1.2"}, {Name: "valkey", Version: "8.1.4"}},
		{{Name: "valkey", Version: "9.1.2"}, {}},
		{{Name: "redis", Version: "8.0.2"}},
		nil,
	} {
		if UsesAtomicMigration(mixed) {
			t.Errorf("%v must use the legacy mover", mixed)
		}
	}
}

// A target that refuses every job (its default user, which the source's migration link
// authenticates as, may not run CLUSTER SYNCSLOTS) fails each one: the steps report the
// server's message, start the pair again, and after atomicAttempts failures report an
// *AtomicMigrationError and start no more. Nothing moved, nothing is lost.
func TestAtomicGivesUpAfterRepeatedFailures(t *testing.T) {
	f, members, keys := valkeyCluster(t, 4, 0, "fail", 5_000)
	ctx := ctxFor(t, 60*time.Second)
	target := goredis.NewClient(&goredis.Options{Addr: members[3].Addr})
	defer target.Close()
	if err := target.Do(ctx, "acl", "setuser", "default", "-cluster|syncslots").Err(); err != nil {
		t.Fatal(err)
	}
	req := ScaleRequest{Masters: 4, Keep: 4, Budget: 2 * time.Second}
	var gaveUp *AtomicMigrationError
	failures := 0
	for step := 0; gaveUp == nil; step++ {
		if step > 100 {
			t.Fatalf("no AtomicMigrationError after %d steps (%d failures seen)", step, failures)
		}
		_, err := Scale(ctx, f, members, req)
		switch {
		case errors.As(err, &gaveUp):
		case err != nil && strings.Contains(err.Error(), "failed"):
			failures++
		case err != nil:
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("gave up after %d failed steps: %v", failures, gaveUp)
	if gaveUp.Failures < atomicAttempts || !strings.Contains(gaveUp.Message, "SYNCSLOTS") && !strings.Contains(gaveUp.Message, "NOPERM") {
		t.Errorf("gave up with %d failures and message %q, want %d and the server's refusal", gaveUp.Failures, gaveUp.Message, atomicAttempts)
	}
	// Another step starts nothing new: the failures are recent.
	before := len(allJobs(t, f, members[:3]))
	if _, err := Scale(ctx, f, members, req); !errors.As(err, &gaveUp) {
		t.Fatalf("the step after giving up: %v, want the AtomicMigrationError again", err)
	}
	if after := len(allJobs(t, f, members[:3])); after != before {
		t.Errorf("a step after giving up started %d jobs", after-before)
	}
	if lost := lostKeysTLS(t, f, members, keys, nil); lost > 0 {
		t.Fatalf("%d keys lost", lost)
	}
}

// AssignReceive on Valkey 9: the new master takes 1000 slots from demo-0 and demo-1 only,
// moved by the servers; demo-2 keeps all of its slots and no key is lost.
func TestAtomicAssignReceive(t *testing.T) {
	f, members, keys := valkeyCluster(t, 4, 0, "assign", 20_000)
	ctx := ctxFor(t, 10*time.Second)
	before, err := Observe(ctx, f, members[:3])
	if err != nil {
		t.Fatal(err)
	}
	kept := before.Members[2].Self().Slots.Count()
	req := ScaleRequest{Masters: 4, Keep: 4, Budget: 2 * time.Second, NewFrom: 3,
		Assign: []topology.Assignment{{Slots: 1000, From: []string{"demo-0", "demo-1"}}}}
	if moved, steps := scaleAtomic(t, f, members, req); moved == 0 || steps == 0 {
		t.Fatalf("moved %d keys in %d atomic steps", moved, steps)
	}
	st, err := Observe(ctxFor(t, 10*time.Second), f, members)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Members[3].Self().Slots.Count(); got != 1000 {
		t.Errorf("the new master owns %d slots, want 1000", got)
	}
	if got := st.Members[2].Self().Slots.Count(); got != kept {
		t.Errorf("demo-2 owns %d slots, had %d: it was not named in From", got, kept)
	}
	if lost := lostKeysTLS(t, f, members, keys, nil); lost > 0 {
		t.Fatalf("%d keys lost", lost)
	}
}
