package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// scaleUntilDone calls Scale as the controller would until Done and returns the keys moved.
func scaleUntilDone(t *testing.T, f Factory, members []topology.Member, req ScaleRequest) int {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
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
		if ctx.Err() != nil {
			t.Fatalf("not scaled within 60 s; last phase %s", p.Phase)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeKeys writes heal-0 … heal-(n-1) on their owners (key i holds i).
func writeKeys(t *testing.T, f Factory, members []topology.Member, n int) {
	t.Helper()
	putKeys(t, f, members, healNames(n))
}

// readKeys checks every key written by writeKeys on its current owner.
func readKeys(t *testing.T, f Factory, members []topology.Member, n int) {
	t.Helper()
	if lost := lostKeys(t, f, members, healNames(n)); lost > 0 {
		t.Fatalf("%d of %d keys lost", lost, n)
	}
}

// A 3-master cluster with 2000 keys grows to 4 masters with a replica each, every master
// ends with 4096 slots, every key is readable, no slot is open; then it shrinks back.
func TestScaleOutAndInKeepsKeys(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 8, healCfg)
	members := membersOf(servers)
	f := newFactory(t, Options{})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members[:6], 3, 1); err != nil {
		t.Fatal(err)
	}
	writeKeys(t, f, members[:6], 2000)
	epochs := masterEpochs(t, f, members)

	start := time.Now()
	moved := scaleUntilDone(t, f, members, ScaleRequest{Masters: 4, ReplicasPerMaster: 1, Keep: 8, Pipeline: 10, Budget: time.Second})
	t.Logf("scaled out 3 to 4 masters in %v, %d keys moved", time.Since(start).Round(time.Millisecond), moved)
	st, err := Observe(ctxFor(t, 5*time.Second), f, members)
	if err != nil {
		t.Fatal(err)
	}
	if !st.NoOpenSlots() || st.Masters() != 4 || !st.MastersHaveReplicas(1) || !st.AllSlotsCovered() {
		t.Fatalf("not placed: masters %d, open %v", st.Masters(), !st.NoOpenSlots())
	}
	for i := range st.Members {
		if self := st.Members[i].Self(); self.Master && self.Slots.Count() != 4096 {
			t.Errorf("%s holds %d slots", st.Members[i].Pod, self.Slots.Count())
		}
	}
	if moved < 300 {
		t.Errorf("only %d keys moved for a quarter of the slots", moved)
	}
	// The new pods got epochs above the cluster's before they met it (PlanFreshEpochs): no
	// collision moved a source's epoch, which could have won a closing slot back.
	after := masterEpochs(t, f, members)
	seen := map[uint64]string{}
	for pod, e := range after {
		if old, ok := epochs[pod]; ok && old != e {
			t.Errorf("source %s's config epoch moved from %d to %d during the scale-out", pod, old, e)
		}
		if other, ok := seen[e]; ok {
			t.Errorf("%s and %s share config epoch %d", pod, other, e)
		}
		seen[e] = pod
	}
	readKeys(t, f, members, 2000)

	syncs := fullSyncs(t, members[:6])
	start = time.Now()
	moved = scaleUntilDone(t, f, members, ScaleRequest{Masters: 3, ReplicasPerMaster: 1, Keep: 6, Pipeline: 10, Budget: time.Second})
	t.Logf("scaled in 4 to 3 masters in %v, %d keys moved", time.Since(start).Round(time.Millisecond), moved)
	st, err = Observe(ctxFor(t, 5*time.Second), f, members[:6])
	if err != nil {
		t.Fatal(err)
	}
	if !st.NoOpenSlots() || st.Masters() != 3 || !st.AllSlotsCovered() || !st.KnowsOnly() {
		t.Fatalf("not shrunk: masters %d, knows only members %v", st.Masters(), st.KnowsOnly())
	}
	for _, m := range members[6:] {
		if n, _ := f.For(m.Addr).DBSize(ctxFor(t, time.Second)); n != 0 {
			t.Errorf("leaving %s keeps %d keys", m.Pod, n)
		}
	}
	readKeys(t, f, members[:6], 2000)
	// The leaving master and its replica stayed apart (keepLeavingApart): none turned
	// replica of the master that took the last slot, which would have made it serve a
	// full sync of its data to a node about to be reset.
	if after := fullSyncs(t, members[:6]); fmt.Sprint(after) != fmt.Sprint(syncs) {
		t.Errorf("kept nodes served full syncs during the scale-in: sync_full %v before, %v after", syncs, after)
	}
}

// masterEpochs is the config epoch of every master, by pod.
func masterEpochs(t *testing.T, f Factory, members []topology.Member) map[string]uint64 {
	t.Helper()
	st, err := Observe(ctxFor(t, 5*time.Second), f, members)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for i := range st.Members {
		if self := st.Members[i].Self(); self != nil && self.Master && len(self.Slots) > 0 {
			out[st.Members[i].Pod] = self.ConfigEpoch
		}
	}
	return out
}

// fullSyncs reads INFO stats sync_full (full syncs served) of each member.
func fullSyncs(t *testing.T, members []topology.Member) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range members {
		c := goredis.NewClient(&goredis.Options{Addr: m.Addr})
		info, err := c.Info(ctxFor(t, 5*time.Second), "stats").Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "sync_full:"); ok {
				out[m.Pod] = v
			}
		}
	}
	return out
}

// A slot left IMPORTING/MIGRATING with half its keys moved is finished by the next step.
func TestScaleResumesOpenSlot(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 4, healCfg)
	members := membersOf(servers)
	f := newFactory(t, Options{})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members[:3], 3, 0); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	// Meet the fourth node first, through Scale's own step.
	for {
		p, err := Scale(ctx, f, members, ScaleRequest{Masters: 4, Keep: 4, Pipeline: 10, Budget: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		if p.Phase == PhaseMigrating {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	st, _ := Observe(ctx, f, members)
	src, dst := st.Members[0].Self(), st.Members[3].Self()
	slot := src.Slots[0].End
	if slot == 0 {
		t.Fatal("bad slot")
	}
	// Keys in that slot: hash tags make them land there.
	tag := tagFor(slot)
	withCluster(t, f, members[:3], func(ctx context.Context, cc *goredis.ClusterClient) {
		for i := 0; i < 40; i++ {
			if err := cc.Set(ctx, fmt.Sprintf("{%s}-%d", tag, i), i, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	s := f.For(members[0].Addr)
	d := f.For(members[3].Addr)
	if err := d.SetSlot(ctx, slot, "importing", src.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSlot(ctx, slot, "migrating", dst.ID); err != nil {
		t.Fatal(err)
	}
	keys, _ := s.GetKeysInSlot(ctx, slot, 20)
	if err := s.Migrate(ctx, members[3].Addr, keys, false, time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := Scale(ctx, f, members, ScaleRequest{Masters: 4, Keep: 4, Pipeline: 10, Budget: time.Nanosecond})
	if err != nil || p.Phase != PhaseFinishingSlots || p.MovedKeys != 20 {
		t.Fatalf("resume: phase %s, %d keys, %v", p.Phase, p.MovedKeys, err)
	}
	scaleUntilDone(t, f, members, ScaleRequest{Masters: 4, Keep: 4, Pipeline: 10, Budget: time.Second})
	st, _ = Observe(ctx, f, members)
	if !st.NoOpenSlots() || redistest.SlotOwner(st, slot) != dst.ID {
		t.Fatalf("slot %d owned by %s, open %v", slot, redistest.SlotOwner(st, slot), !st.NoOpenSlots())
	}
	withCluster(t, f, members, func(ctx context.Context, cc *goredis.ClusterClient) {
		for i := 0; i < 40; i++ {
			if v, err := cc.Get(ctx, fmt.Sprintf("{%s}-%d", tag, i)).Int(); err != nil || v != i {
				t.Fatalf("key %d: %v %v", i, v, err)
			}
		}
	})
}

// tagFor finds a hash tag whose slot is the given one.
func tagFor(slot int) string {
	for i := 0; ; i++ {
		s := fmt.Sprint(i)
		if keySlot(s) == slot {
			return s
		}
	}
}

func keySlot(key string) int { return topology.KeySlot(key) }

// A replica's pod evicted and back empty during a resize step that changes no size: its
// old identity is flagged fail, and the fresh node, met after that, never learns it (Redis
// does not take a failing node from gossip), so the views cannot agree until the old node
// is forgotten. Scale forgets it itself, then attaches the fresh node and ends Done with
// every key; it used to wait for an agreement only forgetting brings.
func TestScaleForgetsALostNode(t *testing.T) {
	t.Parallel()
	servers, members, f := formLoaded(t)
	ctx := ctxFor(t, 30*time.Second)
	st, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	i := 4 // a replica
	if !st.Members[i].Self().Replica {
		t.Fatalf("member %d is no replica", i)
	}
	lost := st.Members[i].ID()
	replaceWithEmpty(t, f, servers, members, i)
	for {
		st, err := Observe(ctx, f, members[:i])
		if err != nil {
			t.Fatal(err)
		}
		if n := st.Members[0].Find(lost); n != nil && n.Fail {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	scaleUntilDone(t, f, members, ScaleRequest{Masters: 3, ReplicasPerMaster: 1, Keep: 6, Pipeline: 100, Budget: time.Second})
	st, err = Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	if !st.KnowsOnly() {
		t.Errorf("a member still knows a node that is no member (the lost %s)", lost)
	}
	assertAllKeys(t, f, members)
	assertFormed(t, f, members, "")
}
