package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// migrateCall is one MIGRATE as a hook saw it: the timeout it carried, how long the
// source took to answer, and its error.
type migrateCall struct {
	timeout string
	keys    int
	first   string // the first key
	start   time.Time
	took    time.Duration
	err     error
}

// migrateCalls records every MIGRATE sent through the factory's clients.
type migrateCalls struct {
	mu    sync.Mutex
	calls []migrateCall
}

type startKey struct{}

func (m *migrateCalls) BeforeProcess(ctx context.Context, cmd goredis.Cmder) (context.Context, error) {
	return context.WithValue(ctx, startKey{}, time.Now()), nil
}

func (m *migrateCalls) AfterProcess(ctx context.Context, cmd goredis.Cmder) error {
	args := cmd.Args()
	if len(args) < 6 || fmt.Sprint(args[0]) != "migrate" {
		return nil
	}
	start, _ := ctx.Value(startKey{}).(time.Time)
	call := migrateCall{timeout: fmt.Sprint(args[5]), start: start, took: time.Since(start), err: cmd.Err()}
	for i, a := range args {
		if fmt.Sprint(a) == "keys" && i+1 < len(args) {
			call.keys, call.first = len(args)-i-1, fmt.Sprint(args[i+1])
		}
	}
	m.mu.Lock()
	m.calls = append(m.calls, call)
	m.mu.Unlock()
	return nil
}

func (m *migrateCalls) BeforeProcessPipeline(ctx context.Context, _ []goredis.Cmder) (context.Context, error) {
	return ctx, nil
}

func (m *migrateCalls) AfterProcessPipeline(context.Context, []goredis.Cmder) error { return nil }

// formRecorded forms a cluster of n masters at the node timeout the operator renders
// (MIGRATE's full timeout is half of it), with every MIGRATE through f recorded.
func formRecorded(t *testing.T, n int, d time.Duration) ([]topology.Member, Factory, *migrateCalls, *topology.ClusterState, context.Context) {
	t.Helper()
	return formRecordedAt(t, n, NodeTimeout, d)
}

// formRecordedAt is formRecorded at another cluster-node-timeout.
func formRecordedAt(t *testing.T, n int, nodeTimeout, d time.Duration) ([]topology.Member, Factory, *migrateCalls, *topology.ClusterState, context.Context) {
	t.Helper()
	servers := redistest.Start(t, n, redistest.Config{NodeTimeout: nodeTimeout})
	members := membersOf(servers)
	calls := &migrateCalls{}
	f := newFactory(t, Options{Hooks: []goredis.Hook{calls}})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, n, 0); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, d)
	st, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	return members, f, calls, st, ctx
}

// A target whose writes are paused (what CLUSTER FAILOVER on its replica does until the
// replica wins) holds its source for QuickMigrateTimeout, not the full MIGRATE timeout:
// the first try of the stream is quick, and once it timed out the stream goes on with the
// full timeout, so the batch still moves when the pause ends and nothing is lost.
func TestMigrateQuickFirstTryOnPausedTarget(t *testing.T) {
	t.Parallel()
	members, f, calls, st, ctx := formRecorded(t, 3, time.Minute)
	slot := st.Members[0].Self().Slots[0].Start + 7
	keys := slotKeyNames(tagFor(slot), 2000)
	putKeys(t, f, members, keys)
	src := MasterAddr{ID: st.Members[0].ID(), Addr: members[0].Addr}
	dst := MasterAddr{ID: st.Members[1].ID(), Addr: members[1].Addr}

	got := moveFromPausedTarget(ctx, t, f, calls, slot, src, dst, []string{members[2].Addr}, keys, 1500, MoveOptions{Pipeline: 100})
	if len(got) < 2 {
		t.Fatalf("%d MIGRATE calls, want a timed-out first try and more: %+v", len(got), got)
	}
	quick, full := fmt.Sprint(QuickMigrateTimeout.Milliseconds()), fmt.Sprint(DefaultMigrateTimeout.Milliseconds())
	first := got[0]
	t.Logf("first MIGRATE: timeout %s ms, answered after %v: %v; %d calls in all", first.timeout, first.took, first.err, len(got))
	if first.timeout != quick || !isMigrateTimeout(first.err) {
		t.Errorf("first MIGRATE: timeout %s ms, error %v; want %s ms and a timeout", first.timeout, first.err, quick)
	}
	if first.took >= DefaultMigrateTimeout {
		t.Errorf("the paused target held its source for %v, the full timeout", first.took)
	}
	for i, c := range got[1:] {
		if c.timeout != full {
			t.Errorf("MIGRATE %d after the timed-out try carried %s ms, want the full %s ms", i+2, c.timeout, full)
		}
	}
	waitFor(t, func() bool {
		st, err := Observe(ctx, f, members)
		return err == nil && st.Agreed()
	})
	st, _ = Observe(ctx, f, members)
	if owner := redistest.SlotOwner(st, slot); owner != dst.ID {
		t.Errorf("slot %d owned by %s, want the target %s", slot, owner, dst.ID)
	}
	if n := lostKeys(t, f, members, keys); n > 0 {
		t.Fatalf("%d of %d keys lost", n, len(keys))
	}
}

// A batch known to be small gets the quick first try; a key over DefaultBatchBytes (but
// under the big-key size) goes with the full timeout from the start, since a target would
// still be restoring it when a quick try gave up, and restore it a second time.
func TestMigrateQuickOnlyForSmallBatches(t *testing.T) {
	t.Parallel()
	members, f, calls, st, ctx := formRecorded(t, 2, time.Minute)
	slot := st.Members[0].Self().Slots[0].Start + 9
	keys := slotKeyNames(tagFor(slot), 50)
	putKeys(t, f, members, keys)
	mid := fmt.Sprintf("{%s}:mid", tagFor(slot))
	c := goredis.NewClient(&goredis.Options{Addr: members[0].Addr})
	defer c.Close()
	if err := c.Set(ctx, mid, strings.Repeat("x", 3<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	src := MasterAddr{ID: st.Members[0].ID(), Addr: members[0].Addr}
	dst := MasterAddr{ID: st.Members[1].ID(), Addr: members[1].Addr}
	if _, err := MigrateSlotWith(ctx, f, slot, src, dst, nil, MoveOptions{Pipeline: 100}); err != nil {
		t.Fatal(err)
	}
	quick, full := fmt.Sprint(QuickMigrateTimeout.Milliseconds()), fmt.Sprint(DefaultMigrateTimeout.Milliseconds())
	calls.mu.Lock()
	defer calls.mu.Unlock()
	var sawQuick, sawFull bool
	for _, call := range calls.calls {
		if call.err != nil {
			t.Errorf("MIGRATE failed: %v", call.err)
		}
		switch {
		case call.keys == 1 && call.first == mid:
			sawFull = call.timeout == full
		case call.timeout == quick:
			sawQuick = true
		}
	}
	if !sawFull || !sawQuick {
		t.Errorf("the 3 MiB key went with the full timeout: %v; the small keys with the quick one: %v; calls %+v", sawFull, sawQuick, calls.calls)
	}
	if n := lostKeys(t, f, members, keys); n > 0 {
		t.Fatalf("%d of %d small keys lost", n, len(keys))
	}
	d := goredis.NewClient(&goredis.Options{Addr: dst.Addr})
	defer d.Close()
	if n, err := d.StrLen(ctx, mid).Result(); err != nil || n != 3<<20 {
		t.Errorf("the 3 MiB key on the target: %d bytes, %v", n, err)
	}
}

// A user ConfigMap may lower cluster-node-timeout below the template's 5 s. MIGRATE's
// timeout follows it (half of it), so a source blocked on a paused target is never blocked
// long enough for the other masters to flag it failing and fail it over: every MIGRATE
// carries at most half the node timeout, nobody is flagged, and the keys still move.
func TestMigrateTimeoutFollowsALowerNodeTimeout(t *testing.T) {
	t.Parallel()
	const nodeTimeout = 800 * time.Millisecond
	members, f, calls, st, ctx := formRecordedAt(t, 3, nodeTimeout, time.Minute)
	slot := st.Members[0].Self().Slots[0].Start + 11
	keys := slotKeyNames(tagFor(slot), 2000)
	putKeys(t, f, members, keys)
	src := MasterAddr{ID: st.Members[0].ID(), Addr: members[0].Addr}
	dst := MasterAddr{ID: st.Members[1].ID(), Addr: members[1].Addr}

	stop := make(chan struct{})
	flagged := watchFlags(members[2].Addr, stop)
	got := moveFromPausedTarget(ctx, t, f, calls, slot, src, dst, []string{members[2].Addr}, keys, 3000, MoveOptions{Pipeline: 100, NodeTimeout: nodeTimeout})
	close(stop)
	half := fmt.Sprint(MigrateTimeout(nodeTimeout).Milliseconds())
	timedOut := 0
	for i, c := range got {
		if ms, _ := strconv.Atoi(c.timeout); ms > int(MigrateTimeout(nodeTimeout).Milliseconds()) {
			t.Errorf("MIGRATE %d carried %s ms, more than half the node timeout (%s ms)", i+1, c.timeout, half)
		}
		if isMigrateTimeout(c.err) {
			timedOut++
		}
	}
	if timedOut == 0 {
		t.Errorf("no MIGRATE timed out on the paused target: the test paused nothing (%d calls)", len(got))
	}
	if seen := flagged(); len(seen) > 0 {
		t.Errorf("a master was flagged failing while its MIGRATE waited on a paused target: %v", seen)
	}
	if n := lostKeys(t, f, members, keys); n > 0 {
		t.Fatalf("%d of %d keys lost", n, len(keys))
	}
}

// moveFromPausedTarget pauses dst's writes for pauseMs, migrates the slot's keys to it and
// returns the MIGRATE calls made; every key must have moved.
func moveFromPausedTarget(ctx context.Context, t *testing.T, f Factory, calls *migrateCalls, slot int, src, dst MasterAddr, others, keys []string, pauseMs int, opts MoveOptions) []migrateCall {
	t.Helper()
	pause := goredis.NewClient(&goredis.Options{Addr: dst.Addr})
	defer pause.Close()
	if err := pause.Do(ctx, "client", "pause", pauseMs, "write").Err(); err != nil {
		t.Fatal(err)
	}
	moved, err := MigrateSlotWith(ctx, f, slot, src, dst, others, opts)
	if err != nil {
		t.Fatal(err)
	}
	if moved != len(keys) {
		t.Errorf("moved %d keys, want %d", moved, len(keys))
	}
	calls.mu.Lock()
	defer calls.mu.Unlock()
	return append([]migrateCall(nil), calls.calls...)
}
