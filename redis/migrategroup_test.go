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
	t.Parallel()
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
	p, err := migrate(ctx, f, st, moves, ScaleRequest{Pipeline: 10}, nil)
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

// Groups keep plan order per pair; a source serves up to streamsPerSource groups at a time
// (every source one before any two, the second to another target when there is one), a
// target up to streamsPerTarget, and no node is both at once; a stream whose group is done
// takes the next group while the others still move.
func TestStreamsTake(t *testing.T) {
	var moves []topology.SlotMove
	for s := 0; s < 5; s++ {
		moves = append(moves, topology.SlotMove{Slot: s, From: "a", To: "d"})
	}
	moves = append(moves, topology.SlotMove{Slot: 10, From: "b", To: "d"}, topology.SlotMove{Slot: 11, From: "c", To: "e"},
		topology.SlotMove{Slot: 5, From: "a", To: "d"}, topology.SlotMove{Slot: 12, From: "d", To: "b"})
	groups := groupMoves(moves, func(string) int { return 4 })
	want := []moveGroup{
		{"a", "d", []int{0, 1, 2, 3}}, {"a", "d", []int{4, 5}}, {"b", "d", []int{10}}, {"c", "e", []int{11}}, {"d", "b", []int{12}},
	}
	if !reflect.DeepEqual(groups, want) {
		t.Fatalf("groups %v, want %v", groups, want)
	}
	// a->d, b->d, c->e first (one stream each), then a's second: a->d again, a's only
	// target (d takes 3); d->b waits, d being a target.
	busy := newStreams()
	taken, rest := busy.take(groups)
	if !reflect.DeepEqual(taken, []moveGroup{want[0], want[2], want[3], want[1]}) || !reflect.DeepEqual(rest, []moveGroup{want[4]}) {
		t.Fatalf("taken %v, rest %v", taken, rest)
	}
	// d->b waits while d is a target; it starts once every group into d is done.
	if more, _ := busy.take(rest); len(more) != 0 {
		t.Fatalf("started %v while d is a target", more)
	}
	busy.release(want[0])
	busy.release(want[2])
	if more, _ := busy.take(rest); len(more) != 0 {
		t.Fatalf("started %v while d is still a target", more)
	}
	busy.release(want[1])
	if more, _ := busy.take(rest); !reflect.DeepEqual(more, []moveGroup{want[4]}) {
		t.Fatalf("d->b did not start once d was no target: %v", more)
	}
	// Up to streamsPerTarget sources into one target, no more.
	var many []moveGroup
	for i := 0; i <= streamsPerTarget; i++ {
		many = append(many, moveGroup{from: fmt.Sprintf("s%d", i), to: "t", slots: []int{i}})
	}
	if taken, rest := newStreams().take(many); len(taken) != streamsPerTarget || len(rest) != 1 {
		t.Fatalf("%d sources into one target: taken %v, rest %v", len(many), taken, rest)
	}
	// One source, three targets: streamsPerSource at once, and the next when one is done.
	var one []moveGroup
	for i := 0; i < 3; i++ {
		one = append(one, moveGroup{from: "s", to: fmt.Sprintf("t%d", i), slots: []int{i}})
	}
	busy = newStreams()
	if taken, _ := busy.take(one); len(taken) != streamsPerSource {
		t.Fatalf("one source: taken %v, want %d streams", taken, streamsPerSource)
	}
	busy.release(one[0])
	if taken, _ := busy.take(one[streamsPerSource:]); len(taken) != 1 {
		t.Fatalf("one source, a stream done: taken %v", taken)
	}
	// Scale-in plans each target's slots as one run: the second stream skips ahead to the
	// next target rather than doubling on the first.
	runs := []moveGroup{{"s", "t0", []int{0}}, {"s", "t0", []int{1}}, {"s", "t1", []int{2}}, {"s", "t1", []int{3}}}
	if taken, _ := newStreams().take(runs); !reflect.DeepEqual(taken, []moveGroup{runs[0], runs[2]}) {
		t.Fatalf("one source, runs per target: taken %v, want one group into each of t0 and t1", taken)
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
	t.Parallel()
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

// A stream moving a big key beside others of its source or its target: the key's
// MIGRATE takes both nodes to itself (gate.go), so the other stream's commands wait at the
// gate rather than on the wire behind it, where their read timeout or MIGRATE's own would
// cut them off and end the step. No other MIGRATE is sent while the big key's runs, and
// the step ends with every key moved.
func TestMigrateOtherStreamsWaitForBigKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		from, to int // the small keys' stream; the big key goes from master 0 to master 1
	}{
		{"same source", 0, 2},
		{"same target", 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members, f, calls, st, ctx := formRecorded(t, 3, 3*time.Minute)
			bigSlot := st.Members[0].Self().Slots[0].Start + 3
			big := fmt.Sprintf("{%s}:big", tagFor(bigSlot))
			// About 200 MB of MEMORY USAGE: over the 40 MB that MIGRATE's default timeout
			// moves at topology.BigKeyRate, so it goes alone with its own timeout, for seconds.
			redistest.ZAddBig(ctx, t, members[0].Addr, "", big, bigMembers)
			var small []string
			moves := []topology.SlotMove{{Slot: bigSlot, From: st.Members[0].ID(), To: st.Members[1].ID()}}
			first := st.Members[tc.from].Self().Slots[0].Start
			for i := 0; i < 16; i++ {
				slot := first + 10 + i
				small = append(small, slotKeyNames(tagFor(slot), 1000)...)
				moves = append(moves, topology.SlotMove{Slot: slot, From: st.Members[tc.from].ID(), To: st.Members[tc.to].ID()})
			}
			putKeys(t, f, members, small)

			// 10 keys per MIGRATE: the small keys' stream has work for as long as the big
			// key moves.
			p, err := migrate(ctx, f, st, moves, ScaleRequest{Pipeline: 10}, nil)
			if err != nil {
				t.Fatalf("the step ended with %v", err)
			}
			if p.MovedSlots != len(moves) || p.Remaining != 0 {
				t.Errorf("moved %d slots, %d left; want %d, 0", p.MovedSlots, p.Remaining, len(moves))
			}
			calls.mu.Lock()
			got := append([]migrateCall(nil), calls.calls...)
			calls.mu.Unlock()
			var bigCall migrateCall
			for _, c := range got {
				if c.first == big {
					bigCall = c
				}
			}
			end := bigCall.start.Add(bigCall.took)
			overlapping, after := 0, 0
			for _, c := range got {
				switch {
				case c.first == big:
				case c.start.After(bigCall.start) && c.start.Before(end):
					overlapping++
				case !c.start.Before(end):
					after++
				}
			}
			t.Logf("%d MIGRATE calls; the big key's took %v; %d others started during it, %d after it",
				len(got), bigCall.took.Round(time.Millisecond), overlapping, after)
			if bigCall.took < time.Second {
				t.Errorf("the big key's MIGRATE took %v: too short to show anything", bigCall.took)
			}
			if overlapping > 0 {
				t.Errorf("%d MIGRATE calls of the other stream were sent while the big key's ran", overlapping)
			}
			if after == 0 {
				t.Errorf("the other stream was done before the big key moved: the test shows nothing")
			}
			d := goredis.NewClient(&goredis.Options{Addr: members[1].Addr})
			defer d.Close()
			if n, err := d.ZCard(ctx, big).Result(); err != nil || n != bigMembers {
				t.Errorf("ZCARD on the target: %d, %v; want %d", n, err, bigMembers)
			}
			waitFor(t, func() bool {
				st, err := Observe(ctx, f, members)
				return err == nil && st.Agreed()
			})
			if n := lostKeys(t, f, members, small); n > 0 {
				t.Fatalf("%d of %d small keys lost", n, len(small))
			}
		})
	}
}

// A group holds up to groupSlots slots, fewer where the source's slots hold so many keys
// or so much data that it would move more than about groupKeys or groupBytes,
// unknownGroupSlots when the source's figures are unknown, and fewer still under a
// keys/s cap (a second's worth: a slot's keys, or one batch a slot); and groupMoves cuts
// each source's moves by its own size.
func TestGroupSize(t *testing.T) {
	free := ScaleRequest{Pipeline: 100}
	capped := ScaleRequest{Pipeline: 100, MaxKeysPerSecond: 2000}
	smallBatches := ScaleRequest{Pipeline: 10, MaxKeysPerSecond: 1000}
	for _, c := range []struct {
		req   ScaleRequest
		load  slotLoad
		known bool
		want  int
	}{
		{free, slotLoad{}, false, unknownGroupSlots},
		{free, slotLoad{}, true, groupSlots},                          // an empty source
		{free, slotLoad{keys: 61, bytes: 61 * 120}, true, groupSlots}, // 1,000,000 small keys: ~7,800 keys a group
		{free, slotLoad{keys: 610, bytes: 610 * 120}, true, groupKeys / 610},
		{free, slotLoad{keys: 6, bytes: 6 * 100 << 10}, true, groupBytes / (6 * 100 << 10)}, // 100 KB values
		{free, slotLoad{keys: 1e6, bytes: 1e8}, true, 1},
		{capped, slotLoad{}, false, 20},
		{capped, slotLoad{keys: 610}, true, 3},
		{smallBatches, slotLoad{keys: 61}, true, 16}, // not 100: a slot is 61 keys, not one batch of 10
	} {
		if got := c.req.groupSize(c.load, c.known); got != c.want {
			t.Errorf("groupSize(%+v, known %v, cap %d, pipeline %d) = %d, want %d", c.load, c.known, c.req.MaxKeysPerSecond, c.req.Pipeline, got, c.want)
		}
	}
	var moves []topology.SlotMove
	for s := 0; s < 6; s++ {
		moves = append(moves, topology.SlotMove{Slot: s, From: "a", To: "c"}, topology.SlotMove{Slot: 100 + s, From: "b", To: "c"})
	}
	sizes := map[string]int{"a": 4, "b": 2}
	var got [][]int
	for _, g := range groupMoves(moves, func(from string) int { return sizes[from] }) {
		got = append(got, g.slots)
	}
	want := [][]int{{0, 1, 2, 3}, {100, 101}, {102, 103}, {4, 5}, {104, 105}} // in plan order
	if !reflect.DeepEqual(got, want) {
		t.Errorf("groups %v, want %v", got, want)
	}
}
