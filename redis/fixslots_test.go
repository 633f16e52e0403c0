package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// slotKeys is how many keys the tests put in the slot that moves: hash tags put them all
// in one slot, so the open slot is a big one.
const slotKeys = 10000

// openSlotCluster forms masters masters with replicas replicas each, writes slotKeys keys
// in one slot of the first master and 2000 spread keys, and returns the slot's tag.
func openSlotCluster(t *testing.T, masters, replicas int) ([]topology.Member, Factory, *redistest.CommandCounter, int, string) {
	t.Helper()
	n := masters * (1 + replicas)
	servers := redistest.Start(t, n, healCfg)
	members := membersOf(servers)
	counter := redistest.NewCommandCounter()
	f := newFactory(t, Options{Hooks: []goredis.Hook{counter}})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, masters, replicas); err != nil {
		t.Fatal(err)
	}
	st, err := Observe(ctxFor(t, 5*time.Second), f, members)
	if err != nil {
		t.Fatal(err)
	}
	slot := st.Members[0].Self().Slots[0].Start + 7
	tag := tagFor(slot)
	putKeys(t, f, members, slotKeyNames(tag, slotKeys))
	putKeys(t, f, members, spreadKeyNames(2000))
	return members, f, counter, slot, tag
}

// openByHand opens slot from src to dst as redis-cli's reshard does and moves the first
// `moved` keys with MIGRATE, as a reshard cut off half-way leaves it.
func openByHand(t *testing.T, f Factory, src, dst topology.MemberState, slot, moved int) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	s := f.For(src.Addr)
	d := f.For(dst.Addr)
	if err := d.SetSlot(ctx, slot, "importing", src.ID()); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSlot(ctx, slot, "migrating", dst.ID()); err != nil {
		t.Fatal(err)
	}
	for moved > 0 {
		keys, err := s.GetKeysInSlot(ctx, slot, min(moved, 1000))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx, dst.Addr, keys, false, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		moved -= len(keys)
	}
}

// fixUntilClosed calls FixOpenSlots as Scale would, one step each, until no marker is
// left, and returns the keys moved.
func fixUntilClosed(t *testing.T, f Factory, members []topology.Member) int {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	keys := 0
	for {
		st, err := Observe(ctx, f, members)
		if err != nil {
			t.Fatal(err)
		}
		if st.NoOpenSlots() {
			return keys
		}
		p, err := FixOpenSlots(ctx, f, st, 100)
		keys += p.MovedKeys
		if err != nil {
			t.Fatalf("fix: %v", err)
		}
		for _, a := range p.Actions {
			t.Log(a.Message)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// assertNoStrayKeys checks, on every master, every slot it does not own: no key may sit
// where no client is sent. It returns the keys counted on the owners of all slots.
func assertNoStrayKeys(t *testing.T, f Factory, members []topology.Member) int64 {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	st, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	if !st.NoOpenSlots() || !st.AllSlotsCovered() {
		t.Fatalf("open %v, covered %v", !st.NoOpenSlots(), st.AllSlotsCovered())
	}
	var owned int64
	for i := range st.Members {
		self := st.Members[i].Self()
		if !self.Master {
			continue
		}
		c := goredis.NewClient(&goredis.Options{Addr: st.Members[i].Addr})
		cmds := make([]*goredis.IntCmd, topology.SlotCount)
		_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for s := 0; s < topology.SlotCount; s++ {
				cmds[s] = p.ClusterCountKeysInSlot(ctx, s)
			}
			return nil
		})
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		for s, cmd := range cmds {
			switch n := cmd.Val(); {
			case self.Slots.Contains(s):
				owned += n
			case n > 0:
				t.Errorf("%s holds %d keys of slot %d, which it does not own", st.Members[i].Pod, n, s)
			}
		}
	}
	return owned
}

func slotKeyNames(tag string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("{%s}-%d", tag, i)
	}
	return out
}

func spreadKeyNames(n int) []string { return numberedKeys("spread", n) }

// byOwner groups key indexes by the address of the master that owns their slot, going
// by the masters' own claims: a key read there without a redirect is where clients are
// sent. Plain clients, not go-redis' cluster client: its COMMAND lookup races (under
// -race) and times out on a loaded test machine.
func byOwner(t *testing.T, f Factory, members []topology.Member, keys []string) map[string][]int {
	t.Helper()
	st, err := Observe(ctxFor(t, 10*time.Second), f, members)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int{}
	for i, k := range keys {
		slot := keySlot(k)
		if open := strings.IndexByte(k, '{'); open >= 0 {
			slot = keySlot(k[open+1 : strings.IndexByte(k, '}')])
		}
		owner := redistest.SlotOwner(st, slot)
		if owner == "" {
			t.Fatalf("slot %d of key %s has no owner", slot, k)
		}
		addr := st.Members[indexOf(st, owner)].Addr
		out[addr] = append(out[addr], i)
	}
	return out
}

// putKeys sets key i of keys to i on its slot's owner, in pipelines of 500.
func putKeys(t *testing.T, f Factory, members []topology.Member, keys []string) {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	for addr, idx := range byOwner(t, f, members, keys) {
		c := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: 10 * time.Second})
		for from := 0; from < len(idx); from += 500 {
			_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, i := range idx[from:min(from+500, len(idx))] {
					p.Set(ctx, keys[i], i, 0)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("SET on %s: %v", addr, err)
			}
		}
		c.Close()
	}
}

// lostKeys reads every key back from its slot's owner and counts those missing, wrong
// or redirected (key i must hold i).
func lostKeys(t *testing.T, f Factory, members []topology.Member, keys []string) int {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	lost := 0
	for addr, idx := range byOwner(t, f, members, keys) {
		c := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: 10 * time.Second})
		for from := 0; from < len(idx); from += 500 {
			cmds := map[int]*goredis.StringCmd{}
			_, _ = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, i := range idx[from:min(from+500, len(idx))] {
					cmds[i] = p.Get(ctx, keys[i])
				}
				return nil
			})
			for i, cmd := range cmds {
				if v, err := cmd.Int(); err != nil || v != i {
					lost++
				}
			}
		}
		c.Close()
	}
	return lost
}

// readAll checks that every key written by openSlotCluster reads back.
func readAll(t *testing.T, f Factory, members []topology.Member, tag string) {
	t.Helper()
	if n := lostKeys(t, f, members, slotKeyNames(tag, slotKeys)); n > 0 {
		t.Errorf("%d of %d keys of the slot lost or wrong", n, slotKeys)
	}
	if n := lostKeys(t, f, members, spreadKeyNames(2000)); n > 0 {
		t.Errorf("%d of 2000 spread keys lost or wrong", n)
	}
}

func countOn(t *testing.T, f Factory, addr string, slot int) int64 {
	t.Helper()
	m := f.For(addr)
	n, err := m.CountKeysInSlot(ctxFor(t, 5*time.Second), slot)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A reshard someone else started and abandoned (IMPORTING and MIGRATING set by hand,
// 4000 of 10000 keys moved) is finished: every key on the target, no marker left.
func TestFixForeignHalfDoneReshard(t *testing.T) {
	t.Parallel()
	members, f, _, slot, tag := openSlotCluster(t, 3, 0)
	st, _ := Observe(ctxFor(t, 5*time.Second), f, members)
	openByHand(t, f, st.Members[0], st.Members[1], slot, 4000)

	start := time.Now()
	moved := fixUntilClosed(t, f, members)
	t.Logf("fixed in %v, %d keys moved", time.Since(start).Round(time.Millisecond), moved)
	if moved != slotKeys-4000 {
		t.Errorf("moved %d keys, want %d", moved, slotKeys-4000)
	}
	st, _ = Observe(ctxFor(t, 5*time.Second), f, members)
	if owner := redistest.SlotOwner(st, slot); owner != st.Members[1].ID() {
		t.Fatalf("slot %d owned by %s, want the target", slot, owner)
	}
	if n := countOn(t, f, members[1].Addr, slot); n != slotKeys {
		t.Errorf("owner counts %d keys in the slot, %d were written", n, slotKeys)
	}
	if owned := assertNoStrayKeys(t, f, members); owned != slotKeys+2000 {
		t.Errorf("owners hold %d keys, %d were written", owned, slotKeys+2000)
	}
	readAll(t, f, members, tag)
}

// failoverAndWait runs CLUSTER FAILOVER on the replica of master and waits until every
// member sees the replica as a master and the old master as its replica.
func failoverAndWait(t *testing.T, f Factory, members []topology.Member, master string) topology.MemberState {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	st, _ := Observe(ctx, f, members)
	var rep topology.MemberState
	for i := range st.Members {
		if self := st.Members[i].Self(); self.Replica && self.MasterID == master {
			rep = st.Members[i]
		}
	}
	if rep.Addr == "" {
		t.Fatalf("no replica of %s", master)
	}
	if err := f.For(rep.Addr).Failover(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		st, _ = Observe(ctx, f, members)
		if ctx.Err() != nil {
			t.Fatal("failover not seen by every member within 30 s")
		}
		// Not Agreed(): a node importing the slot ignores the new owner of that slot
		// until the marker is closed, so the views differ there until the fix.
		if st.AllReachable() && allSee(st, rep.ID(), true) && allSee(st, master, false) {
			return rep
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// allSee reports whether every member sees node id as a master (or as a replica).
func allSee(st *topology.ClusterState, id string, master bool) bool {
	for i := range st.Members {
		n := st.Members[i].Find(id)
		if n == nil || n.Master != master || n.Fail || n.PFail {
			return false
		}
	}
	return true
}

func indexOf(st *topology.ClusterState, id string) int {
	for i := range st.Members {
		if st.Members[i].ID() == id {
			return i
		}
	}
	return -1
}

// A slot open from A to B with 4000 of 10000 keys moved, then A's replica takes over
// with CLUSTER FAILOVER: A turns replica and drops its MIGRATING, B still imports from
// A. The fix resumes the move from the promoted replica; then Scale settles the layout.
func TestFixAfterSourceFailover(t *testing.T) {
	t.Parallel()
	testFixAfterFailover(t, true)
}

// The same with B's replica taking over: A still migrates to B, now a replica, and the
// promoted replica holds the 4000 moved keys without any marker.
func TestFixAfterTargetFailover(t *testing.T) {
	t.Parallel()
	testFixAfterFailover(t, false)
}

func testFixAfterFailover(t *testing.T, source bool) {
	members, f, _, slot, tag := openSlotCluster(t, 3, 1)
	st, _ := Observe(ctxFor(t, 5*time.Second), f, members)
	src, dst := st.Members[0], st.Members[1]
	openByHand(t, f, src, dst, slot, 4000)
	failed := dst.ID()
	if source {
		failed = src.ID()
	}
	promoted := failoverAndWait(t, f, members, failed)
	st, _ = Observe(ctxFor(t, 5*time.Second), f, members)
	if st.NoOpenSlots() {
		t.Fatal("the failover closed every marker; the test opens nothing")
	}

	start := time.Now()
	moved := fixUntilClosed(t, f, members)
	t.Logf("fixed in %v after failover of the %s, %d keys moved", time.Since(start).Round(time.Millisecond),
		map[bool]string{true: "source", false: "target"}[source], moved)
	st, _ = Observe(ctxFor(t, 5*time.Second), f, members)
	owner := redistest.SlotOwner(st, slot)
	want := dst.ID()
	if !source {
		want = promoted.ID()
	}
	if owner != want {
		t.Errorf("slot %d owned by %s, want %s", slot, owner, want)
	}
	if n := countOn(t, f, st.Members[indexOf(st, owner)].Addr, slot); n != slotKeys {
		t.Errorf("owner counts %d keys in the slot, %d were written", n, slotKeys)
	}
	scaleUntilDone(t, f, members, ScaleRequest{Masters: 3, ReplicasPerMaster: 1, Keep: len(members), Pipeline: 100, Budget: time.Second})
	if owned := assertNoStrayKeys(t, f, members); owned != slotKeys+2000 {
		t.Errorf("owners hold %d keys, %d were written", owned, slotKeys+2000)
	}
	readAll(t, f, members, tag)
}

// Markers that name a node that is gone (stopped, flagged fail) are closed with STABLE:
// nothing was moved, so nothing moves, and the slot stays with its owner.
func TestFixStaleMarkerToGoneNode(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 4, healCfg)
	members := membersOf(servers)
	f := newFactory(t, Options{})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members[:3], 3, 0); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	for { // meet the fourth node as an empty master, through Scale's own step
		p, err := Scale(ctx, f, members, ScaleRequest{Masters: 4, Keep: 4, Pipeline: 10, Budget: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		if p.Phase == PhaseMigrating {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	putKeys(t, f, members, spreadKeyNames(2000))
	st, _ := Observe(ctx, f, members)
	gone := st.Members[3].ID()
	slot := st.Members[0].Self().Slots[0].Start
	slot2 := st.Members[2].Self().Slots[0].Start
	m0 := f.For(members[0].Addr)
	m1 := f.For(members[1].Addr)
	m2 := f.For(members[2].Addr)
	for _, err := range []error{
		m0.SetSlot(ctx, slot, "migrating", gone),
		m2.SetSlot(ctx, slot, "importing", gone),
		m1.SetSlot(ctx, slot2, "importing", gone),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	servers[3].Stop()
	members = members[:3]
	moved := fixUntilClosed(t, f, members)
	if moved != 0 {
		t.Errorf("%d keys moved for markers that moved nothing", moved)
	}
	st, _ = Observe(ctx, f, members)
	if redistest.SlotOwner(st, slot) != st.Members[0].ID() || redistest.SlotOwner(st, slot2) != st.Members[2].ID() {
		t.Errorf("owners changed")
	}
	if owned := assertNoStrayKeys(t, f, members); owned != 2000 {
		t.Errorf("owners hold %d keys, 2000 were written", owned)
	}
	if n := lostKeys(t, f, members, spreadKeyNames(2000)); n > 0 {
		t.Errorf("%d of 2000 keys lost or wrong", n)
	}
}

// A target that stalls (CLIENT PAUSE WRITE: it holds MIGRATE's RESTORE) makes a batch
// of 8 time out; it is split 8 -> 4 -> 2 -> 1 and the single key is named in a
// StuckKeyError. The next call within the backoff sends no MIGRATE at all. Once the
// target serves again and the backoff is over, the slot finishes with every key.
func TestMigrateSplitsDownToStuckKey(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 3, healCfg)
	members := membersOf(servers)
	counter := redistest.NewCommandCounter()
	f := newFactory(t, Options{Hooks: []goredis.Hook{counter}})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 3, 0); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 60*time.Second)
	st, _ := Observe(ctx, f, members)
	slot := st.Members[0].Self().Slots[0].Start + 3
	tag := tagFor(slot)
	withCluster(t, f, members, func(ctx context.Context, cc *goredis.ClusterClient) {
		for i := 0; i < 8; i++ {
			if err := cc.Set(ctx, fmt.Sprintf("{%s}-%d", tag, i), i, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	src := MasterAddr{ID: st.Members[0].ID(), Addr: members[0].Addr}
	dst := MasterAddr{ID: st.Members[1].ID(), Addr: members[1].Addr}
	pause := goredis.NewClient(&goredis.Options{Addr: members[1].Addr})
	defer pause.Close()
	if err := pause.Do(ctx, "client", "pause", 4000, "write").Err(); err != nil {
		t.Fatal(err)
	}
	opts := MoveOptions{Pipeline: 8, Timeout: 100 * time.Millisecond}
	counter.Reset()
	start := time.Now()
	_, err := MigrateSlotWith(ctx, f, slot, src, dst, []string{members[2].Addr}, opts)
	took := time.Since(start)
	var stuck *StuckKeyError
	if !errors.As(err, &stuck) {
		t.Fatalf("want a StuckKeyError, got %v", err)
	}
	t.Logf("stuck after %v and %d MIGRATE calls: %v", took.Round(time.Millisecond), counter.Count("migrate"), stuck)
	if stuck.Slot != slot || stuck.Source != src.Addr || stuck.Target != dst.Addr || stuck.Key == "" {
		t.Errorf("stuck key badly named: %+v", stuck)
	}
	if n := counter.Count("migrate"); n != 4 {
		t.Errorf("%d MIGRATE calls, want 4 (8, 4, 2, 1 keys)", n)
	}
	counter.Reset()
	_, err = MigrateSlotWith(ctx, f, slot, src, dst, []string{members[2].Addr}, opts)
	if !errors.As(err, &stuck) || counter.Count("migrate") != 0 || counter.Writes() != 0 {
		t.Fatalf("within the backoff: %v, %d MIGRATE, writes %v", err, counter.Count("migrate"), counter.WriteNames())
	}
	// The target serves again; the backoff runs out (shortened here).
	_ = pause.Do(ctx, "client", "unpause").Err()
	f.backoff().m[stuckID(src.Addr, dst.Addr, slot)].RetryAfter = time.Now()
	moved, err := MigrateSlotWith(ctx, f, slot, src, dst, []string{members[2].Addr}, opts)
	if err != nil {
		t.Fatalf("after the pause: %v", err)
	}
	t.Logf("then moved %d keys", moved)
	if n := countOn(t, f, dst.Addr, slot); n != 8 {
		t.Errorf("target holds %d keys of 8", n)
	}
	withCluster(t, f, members, func(ctx context.Context, cc *goredis.ClusterClient) {
		for i := 0; i < 8; i++ {
			if v, err := cc.Get(ctx, fmt.Sprintf("{%s}-%d", tag, i)).Int(); err != nil || v != i {
				t.Errorf("key %d: %v %v", i, v, err)
			}
		}
	})
}

// A step whose context cannot wait for one more MIGRATE sends none: the slot stays open
// and the next step (FixOpenSlots) finishes it.
func TestMigrateRefusesToOutliveCaller(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 3, healCfg)
	members := membersOf(servers)
	counter := redistest.NewCommandCounter()
	f := newFactory(t, Options{Hooks: []goredis.Hook{counter}})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 3, 0); err != nil {
		t.Fatal(err)
	}
	putKeys(t, f, members, spreadKeyNames(2000))
	st, _ := Observe(ctxFor(t, 5*time.Second), f, members)
	slot := st.Members[0].Self().Slots[0].Start
	for countOn(t, f, members[0].Addr, slot) == 0 {
		slot++
	}
	src := MasterAddr{ID: st.Members[0].ID(), Addr: members[0].Addr}
	dst := MasterAddr{ID: st.Members[1].ID(), Addr: members[1].Addr}
	short, cancel := context.WithTimeout(context.Background(), callTimeout(DefaultMigrateTimeout)-time.Second)
	defer cancel()
	counter.Reset()
	_, err := MigrateSlot(short, f, slot, src, dst, nil, 10)
	if !errors.Is(err, ErrBudgetSpent) || counter.Count("migrate") != 0 {
		t.Fatalf("want ErrBudgetSpent and no MIGRATE, got %v and %d", err, counter.Count("migrate"))
	}
	fixUntilClosed(t, f, members)
	if owned := assertNoStrayKeys(t, f, members); owned != 2000 {
		t.Errorf("owners hold %d keys, 2000 were written", owned)
	}
	if n := lostKeys(t, f, members, spreadKeyNames(2000)); n > 0 {
		t.Errorf("%d of 2000 keys lost or wrong", n)
	}
}
