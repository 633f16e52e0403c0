package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// bigMembers is the size of the big key: a sorted set whose DUMP is tens of MB, so its
// RESTORE on the target takes longer than MIGRATE's default timeout.
const bigMembers = 2_000_000

// pingGaps pings addr every 10 ms until stop is closed and returns the longest time the
// node did not answer: how long a MIGRATE blocked it.
func pingGaps(addr string, stop <-chan struct{}) func() time.Duration {
	var mu sync.Mutex
	var longest time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: time.Minute})
		defer c.Close()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			start := time.Now()
			_ = c.Ping(context.Background()).Err()
			mu.Lock()
			longest = max(longest, time.Since(start))
			mu.Unlock()
		}
	}()
	return func() time.Duration {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return longest
	}
}

// watchFlags reads CLUSTER NODES on addr every 50 ms until stop is closed and returns the
// lines it saw with a failure flag (fail or fail?).
func watchFlags(addr string, stop <-chan struct{}) func() []string {
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		defer c.Close()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			nodes, err := topology.ParseClusterNodes(c.ClusterNodes(context.Background()).Val())
			if err != nil {
				continue
			}
			for _, n := range nodes {
				if n.Fail || n.PFail {
					seen = append(seen, n.Addr()+" "+n.Role())
				}
			}
		}
	}()
	return func() []string {
		<-done
		return seen
	}
}

// A slot holding a 2,000,000-member sorted set (and small keys) moves with the default
// MIGRATE timeout, in a step with the controller's budget: the big key's MIGRATE takes
// longer than that timeout, so it is sized (MEMORY USAGE) and sent alone with a timeout its
// size calls for, at once, instead of timing out in a batch, being split down to itself and
// reported stuck. Redis blocks the source (DUMP) and the target (RESTORE) while it moves:
// the test measures that block, and checks that no master was flagged failing for it
// (failure detection is held while it moves) and that the node timeouts are set back.
func TestMigrateMovesABigKey(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("loads a 2M-member sorted set")
	}
	// A node timeout of 1 s, far below the block of the key's MIGRATE (3 to 12 s seen):
	// without failure detection held, the third master flags the source failing at once.
	servers := redistest.Start(t, 3, healCfg)
	members := membersOf(servers)
	counter := redistest.NewCommandCounter()
	f := newFactory(t, Options{Hooks: []goredis.Hook{counter}})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 3, 0); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 3*time.Minute)
	st, _ := Observe(ctx, f, members)
	slot := st.Members[0].Self().Slots[0].Start + 11
	tag := tagFor(slot)
	big := fmt.Sprintf("{%s}:big", tag)
	start := time.Now()
	redistest.ZAddBig(ctx, t, members[0].Addr, "", big, bigMembers)
	small := slotKeyNames(tag, 100)
	putKeys(t, f, members, small)
	sizes, err := f.For(members[0].Addr).MemoryUsages(ctx, []string{big}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %s (%d members, MEMORY USAGE %d MB) in %v", big, bigMembers, sizes[0]>>20, time.Since(start).Round(time.Millisecond))

	src := MasterAddr{ID: st.Members[0].ID(), Addr: members[0].Addr}
	dst := MasterAddr{ID: st.Members[1].ID(), Addr: members[1].Addr}
	stop := make(chan struct{})
	srcGap, dstGap := pingGaps(src.Addr, stop), pingGaps(dst.Addr, stop)
	flagged := watchFlags(members[2].Addr, stop)
	// The controller's budget for a scale step that may move a big key.
	step, cancel := context.WithTimeout(ctx, 12*time.Second+BigKeyBudget)
	defer cancel()
	counter.Reset()
	start = time.Now()
	moved, err := MigrateSlotWith(step, f, slot, src, dst, []string{members[2].Addr}, MoveOptions{Pipeline: 10})
	took := time.Since(start)
	time.Sleep(50 * time.Millisecond)
	close(stop)
	sg, dg := srcGap(), dstGap()
	t.Logf("moved %d keys in %v with %d MIGRATE calls; longest block: source %v, target %v",
		moved, took.Round(time.Millisecond), counter.Count("migrate"), sg.Round(time.Millisecond), dg.Round(time.Millisecond))
	if fl := flagged(); len(fl) > 0 {
		t.Errorf("the third master flagged nodes failing while the key moved: %v", fl)
	}
	var stuck *StuckKeyError
	if errors.As(err, &stuck) {
		t.Fatalf("the big key was reported stuck: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// 101 keys in batches of 10 are 11 batches; the big key alone adds one MIGRATE. A
	// batch that timed out on it first would add more (and a second RESTORE on the target).
	if n := counter.Count("migrate"); n > 12 {
		t.Errorf("%d MIGRATE calls, want at most 12: the big key was not sent alone at once", n)
	}
	if moved != 101 {
		t.Errorf("moved %d keys, want 101", moved)
	}
	if n := countOn(t, f, src.Addr, slot); n != 0 {
		t.Errorf("the source still holds %d keys of the slot", n)
	}
	d := goredis.NewClient(&goredis.Options{Addr: dst.Addr})
	defer d.Close()
	if n, err := d.ZCard(ctx, big).Result(); err != nil || n != bigMembers {
		t.Errorf("ZCARD on the target: %d, %v; want %d", n, err, bigMembers)
	}
	if sc, err := d.ZScore(ctx, big, fmt.Sprintf("member:%07d", bigMembers-1)).Result(); err != nil || sc != bigMembers-1 {
		t.Errorf("last member's score on the target: %v, %v", sc, err)
	}
	if n := lostKeys(t, f, members, small); n > 0 {
		t.Errorf("%d of 100 small keys of the slot lost", n)
	}
	after, _ := Observe(ctx, f, members)
	for i := range after.Members {
		for _, n := range after.Members[i].Nodes {
			if n.Fail || n.PFail {
				t.Errorf("%s sees %s failing after the move", members[i].Addr, n.Addr())
			}
		}
	}
	for _, m := range members {
		if d, err := f.For(m.Addr).NodeTimeout(ctx); err != nil || d != healCfg.NodeTimeout {
			t.Errorf("cluster-node-timeout on %s after the move: %v %v, want it set back to %v", m.Addr, d, err, healCfg.NodeTimeout)
		}
	}
	if !after.NoOpenSlots() {
		t.Errorf("a marker is left open")
	}
}

// A key that does not move even with the timeout its size calls for is still stuck: a
// target paused for longer than any sized timeout is reported, not waited for.
func TestMigrateBigKeyStillStuckWhenTargetStalls(t *testing.T) {
	t.Parallel()
	f, members, st := formMasters(t, 3)
	ctx := ctxFor(t, time.Minute)
	slot := st.Members[0].Self().Slots[0].Start + 5
	key := fmt.Sprintf("{%s}:z", tagFor(slot))
	redistest.ZAddBig(ctx, t, members[0].Addr, "", key, 20_000)
	src := MasterAddr{ID: st.Members[0].ID(), Addr: members[0].Addr}
	dst := MasterAddr{ID: st.Members[1].ID(), Addr: members[1].Addr}
	pause := goredis.NewClient(&goredis.Options{Addr: dst.Addr})
	defer pause.Close()
	if err := pause.Do(ctx, "client", "pause", 3000, "write").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := MigrateSlotWith(ctx, f, slot, src, dst, nil, MoveOptions{Pipeline: 10, Timeout: 100 * time.Millisecond})
	var stuck *StuckKeyError
	if !errors.As(err, &stuck) || stuck.Key != key {
		t.Fatalf("want the key %s stuck, got %v", key, err)
	}
	t.Logf("%v", stuck)
	_ = pause.Do(ctx, "client", "unpause").Err()
}

// A hold an earlier operator process left behind (it died between raising and setting
// back) is set back; a hold this process has under way is left alone.
func TestReleaseStaleHolds(t *testing.T) {
	servers := redistest.Start(t, 2, healCfg)
	addrs := redistest.Addrs(servers)
	f := NewFactory(Options{})
	defer f.Close()
	ctx := context.Background()
	timeoutOf := func(addr string) time.Duration {
		d, err := f.For(addr).NodeTimeout(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	const configured = time.Second
	// What a dead operator leaves: the first node raised, the second at its configured value.
	if err := f.For(addrs[0]).SetNodeTimeout(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	restore := holdDetection(ctx, f, addrs[1:], 20*time.Second)
	if n, err := ReleaseStaleHolds(ctx, f, addrs, configured); err != nil || n != 0 {
		t.Fatalf("released %d (%v) while this process holds detection; want 0", n, err)
	}
	if got := timeoutOf(addrs[1]); got != 20*time.Second {
		t.Fatalf("the hold under way was changed: cluster-node-timeout %v", got)
	}
	restore()

	n, err := ReleaseStaleHolds(ctx, f, addrs, configured)
	if err != nil || n != 1 {
		t.Fatalf("released %d (%v); want the one raised node", n, err)
	}
	for _, a := range addrs {
		if got := timeoutOf(a); got != configured {
			t.Errorf("%s: cluster-node-timeout %v, want %v", a, got, configured)
		}
	}
}

// A key gone since it was listed does not hide the others' sizes: a source migrating the
// slot answers ASK for it, which sizes it 0, and the big key beside it keeps its size (and
// so its own timeout and hold).
func TestMemoryUsagesKeyGoneWhileMigrating(t *testing.T) {
	t.Parallel()
	f, members, st := formMasters(t, 2)
	ctx := ctxFor(t, time.Minute)
	slot := st.Members[0].Self().Slots[0].Start + 5
	big, gone := fmt.Sprintf("{%s}:z", tagFor(slot)), fmt.Sprintf("{%s}:gone", tagFor(slot))
	redistest.ZAddBig(ctx, t, members[0].Addr, "", big, 20_000)
	src := f.For(members[0].Addr).(*admin)
	if err := src.SetSlot(ctx, slot, "migrating", st.Members[1].ID()); err != nil {
		t.Fatal(err)
	}
	got, err := src.MemoryUsages(ctx, []string{big, gone}, false)
	if err != nil {
		t.Fatalf("MemoryUsages: %v", err)
	}
	if got[0] < 1<<20 || got[1] != 0 {
		t.Errorf("sizes %v: want the big key's (over 1 MiB) and 0 for the missing one", got)
	}
	km := keyMover{s: src, src: members[0].Addr, dst: members[1].Addr, slot: slot, timeout: DefaultMigrateTimeout}
	if _, sized, err := km.sizes(ctx, []string{big, gone}); err != nil || !sized {
		t.Errorf("sizes: sized %v, %v; want sized", sized, err)
	}
	_ = src.SetSlot(ctx, slot, "stable", "")
}
