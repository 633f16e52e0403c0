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

// safeKeys is how many keys the scale-safety tests load: enough that every slot that
// moves carries keys.
const safeKeys = 10000

// loadKeys writes n keys of valueSize bytes on their slots' owners, in pipelines, with
// plain clients: go-redis' cluster client races with itself under -race (its COMMAND
// lookup against its node GC), which failed these tests for no fault of the code tested.
func loadKeys(t *testing.T, f Factory, members []topology.Member, n, valueSize int) {
	t.Helper()
	value := strings.Repeat("v", valueSize)
	keys := numberedKeys("safe", n)
	ctx := ctxFor(t, 2*time.Minute)
	for addr, idx := range byOwner(t, f, members, keys) {
		c := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: 10 * time.Second})
		for from := 0; from < len(idx); from += 1000 {
			_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, i := range idx[from:min(len(idx), from+1000)] {
					p.Set(ctx, keys[i], fmt.Sprintf("%d:%s", i, value), 0)
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

// checkKeys reads back every key loadKeys wrote from its slot's owner and fails on any
// missing, wrong or redirected one.
func checkKeys(t *testing.T, f Factory, members []topology.Member, n, valueSize int) {
	t.Helper()
	value := strings.Repeat("v", valueSize)
	keys := numberedKeys("safe", n)
	ctx := ctxFor(t, 2*time.Minute)
	lost := 0
	for addr, idx := range byOwner(t, f, members, keys) {
		c := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: 10 * time.Second})
		for from := 0; from < len(idx); from += 1000 {
			cmds := map[int]*goredis.StringCmd{}
			_, _ = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, i := range idx[from:min(len(idx), from+1000)] {
					cmds[i] = p.Get(ctx, keys[i])
				}
				return nil
			})
			for i, cmd := range cmds {
				if v, err := cmd.Result(); err != nil || v != fmt.Sprintf("%d:%s", i, value) {
					lost++
				}
			}
		}
		c.Close()
	}
	t.Logf("read back %d keys: %d lost", n, lost)
	if lost > 0 {
		t.Fatalf("%d of %d keys lost", lost, n)
	}
}

// formSix starts eight servers and forms the first six as 3 masters with a replica each.
func formSix(t *testing.T) ([]topology.Member, Factory) {
	t.Helper()
	servers := redistest.Start(t, 8, healCfg)
	members := membersOf(servers)
	f := newFactory(t, Options{ReadTimeout: 10 * time.Second})
	if _, err := Bootstrap(ctxFor(t, 60*time.Second), f, members[:6], 3, 1); err != nil {
		t.Fatal(err)
	}
	return members, f
}

// step is one Scale call as the controller makes it.
type step struct {
	phase      string
	movedSlots int
	actions    []topology.Action
}

// Scale-out 3 -> 4 masters: the new master gets its replica, in sync, before the first
// slot moves to it, and every one of 10,000 keys is there at the end.
func TestScaleOutGivesNewMasterItsReplicaFirst(t *testing.T) {
	t.Parallel()
	members, f := formSix(t)
	loadKeys(t, f, members[:6], safeKeys, 100)
	req := ScaleRequest{Masters: 4, ReplicasPerMaster: 1, Keep: 8, Pipeline: 100, Budget: time.Second}
	ctx := ctxFor(t, 180*time.Second)
	var steps []step
	start := time.Now()
	for {
		p, err := Scale(ctx, f, members, req)
		if err != nil {
			t.Fatalf("scale (%s): %v", p.Phase, err)
		}
		steps = append(steps, step{p.Phase, p.MovedSlots, p.Actions})
		if p.MovedSlots > 0 && len(steps) == firstMoveStep(steps)+1 {
			// A full sync takes seconds (diskless, with its delay); a replica in sync now,
			// right after the first step of moves, was in sync before it.
			st, err := Observe(ctx, f, members)
			if err != nil {
				t.Fatal(err)
			}
			if !newMasterReplicaInSync(ctx, t, f, st) {
				t.Fatalf("the new master has no replica in sync after the first slots moved; steps %+v", steps)
			}
		}
		if p.Done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("scaled out in %v, %d steps", time.Since(start).Round(time.Millisecond), len(steps))
	// The order of actions: the replica was attached in an earlier step than any move.
	attachedAt, firstMove := -1, -1
	for i, s := range steps {
		for _, a := range s.actions {
			if a.Kind == topology.ActionReplicate && strings.Contains(a.Message, "new master") && attachedAt < 0 {
				attachedAt = i
			}
		}
		if s.movedSlots > 0 && firstMove < 0 {
			firstMove = i
		}
	}
	if attachedAt < 0 || firstMove <= attachedAt {
		t.Fatalf("replica attached at step %d, first slot moved at step %d", attachedAt, firstMove)
	}
	// Both new pods got a config epoch (PlanFreshEpochs) in a step before any MEET with them.
	epochAt, metAt := map[int]int{}, map[int]int{}
	for i, s := range steps {
		for _, a := range s.actions {
			if _, ok := epochAt[a.Member]; a.Kind == topology.ActionSetConfigEpoch && !ok {
				epochAt[a.Member] = i
			}
			if a.Kind == topology.ActionMeet {
				for _, m := range []int{a.Member, a.Target} {
					if _, ok := metAt[m]; !ok {
						metAt[m] = i
					}
				}
			}
		}
	}
	for _, m := range []int{6, 7} {
		if e, ok := epochAt[m]; !ok || e >= metAt[m] {
			t.Errorf("demo-%d: config epoch set at step %d (set: %v), first met at step %d", m, e, ok, metAt[m])
		}
	}
	st, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Formed(4, 1) {
		t.Fatal("not formed as 4 masters with a replica each")
	}
	checkKeys(t, f, members, safeKeys, 100)
}

// newMasterReplicaInSync reports whether demo-6 or demo-7, whichever holds slots, has a
// replica whose INFO replication says link up and no sync in progress.
func newMasterReplicaInSync(ctx context.Context, t *testing.T, f Factory, st *topology.ClusterState) bool {
	t.Helper()
	for _, m := range []int{6, 7} {
		if len(st.Members[m].Self().Slots) == 0 {
			continue
		}
		for r := range st.Members {
			if self := st.Members[r].Self(); self.Replica && self.MasterID == st.Members[m].ID() {
				rep, err := f.For(st.Members[r].Addr).Replication(ctx)
				return err == nil && rep.InSync()
			}
		}
	}
	return false
}

func firstMoveStep(steps []step) int {
	for i, s := range steps {
		if s.movedSlots > 0 {
			return i
		}
	}
	return -1
}

// A new pod whose Redis holds keys is never given slots: the scale-out is refused naming
// the pod and its key count, and no slot moves.
func TestScaleOutRefusesNewNodeHoldingKeys(t *testing.T) {
	t.Parallel()
	members, f := formSix(t)
	loadKeys(t, f, members[:6], safeKeys, 10)
	// Give demo-6 keys and then drop its slots: data but no slots, as a pod reusing an
	// old volume would be.
	c := goredis.NewClient(&goredis.Options{Addr: members[6].Addr})
	defer c.Close()
	ctx := ctxFor(t, 120*time.Second)
	if err := c.Do(ctx, "cluster", "addslotsrange", 0, topology.SlotCount-1).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { s, _ := c.ClusterInfo(ctx).Result(); return strings.Contains(s, "cluster_state:ok") })
	for i := 0; i < 500; i++ {
		if err := c.Set(ctx, fmt.Sprintf("stale-%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx, "cluster", "delslotsrange", 0, topology.SlotCount-1).Err(); err != nil {
		t.Fatal(err)
	}
	req := ScaleRequest{Masters: 4, ReplicasPerMaster: 1, Keep: 8, Pipeline: 100, Budget: time.Second}
	var err error
	for {
		var p ScaleProgress
		p, err = Scale(ctx, f, members, req)
		if err != nil || ctx.Err() != nil {
			break
		}
		if p.MovedSlots > 0 {
			t.Fatal("slots moved to a node holding keys")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var ke *KeysError
	if !errors.Is(err, topology.ErrRefused) || !errors.As(err, &ke) || ke.Pod != "demo-6" || ke.Keys != 500 {
		t.Fatalf("got %v, want a refusal naming demo-6 and its 500 keys", err)
	}
	t.Log(err)
	st, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	if st.Masters() != 3 || !st.NoOpenSlots() || len(st.Members[6].Self().Slots) > 0 || len(st.Members[7].Self().Slots) > 0 {
		t.Fatalf("slots moved: %d masters hold slots, open %v", st.Masters(), !st.NoOpenSlots())
	}
	if n, _ := c.DBSize(ctx).Result(); n != 500 {
		t.Fatalf("demo-6 keeps %d of its 500 keys", n)
	}
	checkKeys(t, f, members[:6], safeKeys, 10)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Scale-in 4 -> 3 masters whose data does not fit in the kept masters' maxmemory with
// the headroom is refused before any slot moves, with the numbers; once maxmemory is
// raised it goes through and keeps every key.
func TestScaleInChecksCapacityFirst(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 8, healCfg)
	members := membersOf(servers)
	f := newFactory(t, Options{ReadTimeout: 10 * time.Second})
	ctx := ctxFor(t, 240*time.Second)
	if _, err := Bootstrap(ctx, f, members, 4, 1); err != nil {
		t.Fatal(err)
	}
	members = leavingLast(t, ctx, f, members)
	const valueSize = 1000
	loadKeys(t, f, members, safeKeys, valueSize)
	// maxmemory on each master: its use now plus a sixth of its data fits under the 80%
	// line, a third (what it receives from the leaving master) does not.
	setMaxMemory := func(share float64) {
		st, err := Observe(ctx, f, members)
		if err != nil {
			t.Fatal(err)
		}
		for i := range st.Members {
			if self := st.Members[i].Self(); !self.Master || len(self.Slots) == 0 {
				continue
			}
			m, err := f.For(st.Members[i].Addr).Memory(ctx)
			if err != nil {
				t.Fatal(err)
			}
			max := int64((float64(m.Used) + share*float64(m.Dataset)) / (1 - topology.CapacityHeadroom))
			c := goredis.NewClient(&goredis.Options{Addr: st.Members[i].Addr})
			err = c.ConfigSet(ctx, "maxmemory", fmt.Sprint(max)).Err()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: used %d, dataset %d, maxmemory %d", st.Members[i].Pod, m.Used, m.Dataset, max)
		}
	}
	setMaxMemory(1.0 / 6)
	req := ScaleRequest{Masters: 3, ReplicasPerMaster: 1, Keep: 6, Pipeline: 100, Budget: time.Second}
	var err error
	for ctx.Err() == nil {
		var p ScaleProgress
		p, err = Scale(ctx, f, members, req)
		if p.MovedSlots > 0 {
			t.Fatal("slots moved before the capacity check refused")
		}
		if err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var ce *topology.CapacityError
	if !errors.Is(err, topology.ErrRefused) || !errors.As(err, &ce) || ce.Masters != 3 || ce.Projected <= ce.Limit || ce.KeptMaxMemory == 0 {
		t.Fatalf("got %v, want a capacity refusal", err)
	}
	t.Log(err)
	st, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	for i := range st.Members {
		if n := st.Members[i].Self().Slots.Count(); n != 0 && n != 4096 {
			t.Fatalf("%s holds %d slots: something moved", st.Members[i].Pod, n)
		}
	}
	if st.Masters() != 4 || !st.NoOpenSlots() {
		t.Fatalf("%d masters, open %v", st.Masters(), !st.NoOpenSlots())
	}

	// Room for all of each master's data again: the scale-in goes through. (Not just over
	// a third: the check projects the leaving master's memory with its overhead, which
	// put a 0.6 share on the line on a loaded machine.)
	setMaxMemory(1.0)
	start := time.Now()
	moved := scaleLoop(t, ctx, f, members, req)
	t.Logf("scaled in 4 to 3 masters in %v, %d keys moved", time.Since(start).Round(time.Millisecond), moved)
	checkKeys(t, f, members[:6], safeKeys, valueSize)
}

// scaleLoop calls Scale as the controller would until Done and returns the keys moved.
func scaleLoop(t *testing.T, ctx context.Context, f Factory, members []topology.Member, req ScaleRequest) int {
	t.Helper()
	keys := 0
	for {
		p, err := Scale(ctx, f, members, req)
		keys += p.MovedKeys
		if err != nil {
			t.Fatalf("scale (%s): %v", p.Phase, err)
		}
		if p.Done {
			return keys
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leavingLast reorders the members so the last two are a master and its replica: the
// ones a scale-in to six members removes.
func leavingLast(t *testing.T, ctx context.Context, f Factory, members []topology.Member) []topology.Member {
	t.Helper()
	st, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	m, r := -1, -1
	for i := range st.Members {
		if self := st.Members[i].Self(); self.Master && len(self.Slots) > 0 {
			m = i
		}
	}
	for i := range st.Members {
		if st.Members[i].Self().MasterID == st.Members[m].ID() {
			r = i
		}
	}
	var out []topology.Member
	for i := range members {
		if i != m && i != r {
			out = append(out, members[i])
		}
	}
	return append(out, members[m], members[r])
}
