package redis

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// migrateSpans records, per slot, when the first MIGRATE of its keys began and the last
// one ended, from a hook on every client of the factory.
type migrateSpans struct {
	mu    sync.Mutex
	spans map[int][2]time.Time
}

func (m *migrateSpans) slotOf(cmd goredis.Cmder) (int, bool) {
	args := cmd.Args()
	if len(args) == 0 || fmt.Sprint(args[0]) != "migrate" {
		return 0, false
	}
	for i, a := range args {
		if fmt.Sprint(a) == "keys" && i+1 < len(args) {
			return topology.KeySlot(fmt.Sprint(args[i+1])), true
		}
	}
	return 0, false
}

func (m *migrateSpans) BeforeProcess(ctx context.Context, cmd goredis.Cmder) (context.Context, error) {
	if slot, ok := m.slotOf(cmd); ok {
		m.mu.Lock()
		sp := m.spans[slot]
		if sp[0].IsZero() {
			sp[0] = time.Now()
		}
		m.spans[slot] = sp
		m.mu.Unlock()
	}
	return ctx, nil
}

func (m *migrateSpans) AfterProcess(ctx context.Context, cmd goredis.Cmder) error {
	if slot, ok := m.slotOf(cmd); ok {
		m.mu.Lock()
		sp := m.spans[slot]
		sp[1] = time.Now()
		m.spans[slot] = sp
		m.mu.Unlock()
	}
	return nil
}

func (m *migrateSpans) BeforeProcessPipeline(ctx context.Context, cmds []goredis.Cmder) (context.Context, error) {
	return ctx, nil
}

func (m *migrateSpans) AfterProcessPipeline(context.Context, []goredis.Cmder) error { return nil }

// Two slots whose sources and targets are four different masters move at the same time,
// each with its keys, and end closed on every master with nothing lost.
func TestMigrateDisjointPairsAtOnce(t *testing.T) {
	servers := redistest.Start(t, 4, healCfg)
	members := membersOf(servers)
	spans := &migrateSpans{spans: map[int][2]time.Time{}}
	f := newFactory(t, Options{ReadTimeout: 10 * time.Second, Hooks: []goredis.Hook{spans}})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 4, 0); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 60*time.Second)
	st, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	// Slot a of master 0 goes to master 2, slot b of master 1 to master 3.
	a, b := st.Members[0].Self().Slots[0].Start+3, st.Members[1].Self().Slots[0].Start+5
	tagA, tagB := tagFor(a), tagFor(b)
	keys := append(slotKeyNames(tagA, 3000), slotKeyNames(tagB, 3000)...)
	putKeys(t, f, members, keys)
	moves := []topology.SlotMove{
		{Slot: a, From: st.Members[0].ID(), To: st.Members[2].ID()},
		{Slot: b, From: st.Members[1].ID(), To: st.Members[3].ID()},
	}
	// 10 keys per MIGRATE: 300 calls a slot, long enough to see them overlap.
	p, err := migrate(ctx, f, st, moves, ScaleRequest{Pipeline: 10})
	if err != nil {
		t.Fatal(err)
	}
	if p.MovedSlots != 2 || p.MovedKeys != 6000 || p.Remaining != 0 {
		t.Fatalf("moved %d slots, %d keys, %d left; want 2, 6000, 0", p.MovedSlots, p.MovedKeys, p.Remaining)
	}
	sa, sb := spans.spans[a], spans.spans[b]
	t.Logf("slot %d moved %v–%v, slot %d %v–%v", a, sa[0].Format("15:04:05.000"), sa[1].Format("15:04:05.000"),
		b, sb[0].Format("15:04:05.000"), sb[1].Format("15:04:05.000"))
	if !sa[0].Before(sb[1]) || !sb[0].Before(sa[1]) {
		t.Errorf("the two slots moved one after the other, not at once")
	}
	waitFor(t, func() bool {
		st, err := Observe(ctx, f, members)
		return err == nil && st.Agreed()
	})
	st, _ = Observe(ctx, f, members)
	if redistest.SlotOwner(st, a) != st.Members[2].ID() || redistest.SlotOwner(st, b) != st.Members[3].ID() {
		t.Fatalf("slot %d owned by %s, slot %d by %s", a, redistest.SlotOwner(st, a), b, redistest.SlotOwner(st, b))
	}
	if owned := assertNoStrayKeys(t, f, members); owned != int64(len(keys)) {
		t.Errorf("owners hold %d keys, %d were written", owned, len(keys))
	}
	if n := lostKeys(t, f, members, keys); n > 0 {
		t.Fatalf("%d of %d keys lost", n, len(keys))
	}
}

// Groups keep plan order per pair; a source serves one group at a time, a target up to
// streamsPerTarget, and no node is both at once.
func TestPlanGroupsDisjoint(t *testing.T) {
	var moves []topology.SlotMove
	for s := 0; s < 5; s++ {
		moves = append(moves, topology.SlotMove{Slot: s, From: "a", To: "d"})
	}
	moves = append(moves, topology.SlotMove{Slot: 10, From: "b", To: "d"}, topology.SlotMove{Slot: 11, From: "c", To: "e"},
		topology.SlotMove{Slot: 5, From: "a", To: "d"}, topology.SlotMove{Slot: 12, From: "d", To: "b"})
	groups := groupMoves(moves, 4)
	want := []moveGroup{
		{"a", "d", []int{0, 1, 2, 3}}, {"a", "d", []int{4, 5}}, {"b", "d", []int{10}}, {"c", "e", []int{11}}, {"d", "b", []int{12}},
	}
	if !reflect.DeepEqual(groups, want) {
		t.Fatalf("groups %v, want %v", groups, want)
	}
	// a->d and b->d share their target; a is busy as a source, d as a target.
	taken, rest := disjoint(groups)
	if !reflect.DeepEqual(taken, []moveGroup{want[0], want[2], want[3]}) || !reflect.DeepEqual(rest, []moveGroup{want[1], want[4]}) {
		t.Fatalf("taken %v, rest %v", taken, rest)
	}
	// Up to streamsPerTarget sources into one target, no more.
	var many []moveGroup
	for i := 0; i <= streamsPerTarget; i++ {
		many = append(many, moveGroup{from: fmt.Sprintf("s%d", i), to: "t", slots: []int{i}})
	}
	if taken, rest := disjoint(many); len(taken) != streamsPerTarget || len(rest) != 1 {
		t.Fatalf("%d sources into one target: taken %v, rest %v", len(many), taken, rest)
	}
}

// A batch never holds more than the byte limit, unless one key alone is bigger.
func TestByBytes(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e"}
	got := byBytes(keys, []int64{40, 40, 100, 10, 10}, 64)
	want := [][]string{{"a"}, {"b"}, {"c"}, {"d", "e"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	if got := byBytes(keys, []int64{1, 1, 1, 1, 1}, 64); len(got) != 1 {
		t.Fatalf("%v: small keys split", got)
	}
}

// The source of a group of open slots fails over (CLUSTER FAILOVER on its replica) while
// its keys move: the next steps finish every slot of the group, close every marker, and
// no key is lost or left where no client is sent.
func TestMigrateGroupSourceFailoverMidMove(t *testing.T) {
	members, f, _, slot, tag := openSlotCluster(t, 3, 1)
	ctx := ctxFor(t, 60*time.Second)
	st, _ := Observe(ctx, f, members)
	src, dst := st.Members[0], st.Members[1]
	// The big slot and the 15 after it: the spread keys put a few in each.
	var slots []int
	for s := slot; s < slot+16; s++ {
		slots = append(slots, s)
	}
	done := make(chan error, 1)
	go func() {
		// 5 keys per MIGRATE: the big slot alone takes 2000 calls.
		_, err := MigrateSlots(ctx, f, slots, MasterAddr{ID: src.ID(), Addr: src.Addr}, MasterAddr{ID: dst.ID(), Addr: dst.Addr},
			topology.OtherAddrs(st, src.ID(), dst.ID()), MoveOptions{Pipeline: 5})
		done <- err
	}()
	waitFor(t, func() bool { return countOn(t, f, dst.Addr, slot) > 0 })
	failoverAndWait(t, f, members, src.ID())
	err := <-done
	t.Logf("the group's step ended with: %v", err)
	if st, _ := Observe(ctx, f, members); st.NoOpenSlots() {
		t.Fatal("no marker left open by the failover: the test proves nothing")
	}
	// As the controller does, a step that fails (the target reports CLUSTERDOWN for a
	// moment after the failover) is tried again.
	for deadline := time.Now().Add(30 * time.Second); ; {
		st, err := Observe(ctx, f, members)
		if err != nil {
			t.Fatal(err)
		}
		if st.NoOpenSlots() {
			break
		}
		p, err := FixOpenSlots(ctx, f, st, 100)
		t.Logf("fix step: %d slots finished, %d left, %d keys: %v", p.MovedSlots, p.Remaining, p.MovedKeys, err)
		if time.Now().After(deadline) {
			t.Fatal("markers still open after 30 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	scaleUntilDone(t, f, members, ScaleRequest{Masters: 3, ReplicasPerMaster: 1, Keep: len(members), Pipeline: 100, Budget: time.Second})
	if owned := assertNoStrayKeys(t, f, members); owned != slotKeys+2000 {
		t.Errorf("owners hold %d keys, %d were written", owned, slotKeys+2000)
	}
	readAll(t, f, members, tag)
}
