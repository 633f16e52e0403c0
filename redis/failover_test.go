package redis

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// The family of faults where a master's pod comes back empty before Redis has promoted its
// replica: that replica holds the only copy of the master's slots, and healing must wait
// for the failover (or make it) before it touches the replica or the old node.

func TestFailWatchOverdue(t *testing.T) {
	w := NewFailWatch()
	t0 := time.Unix(1000, 0)
	owners := []topology.FailingOwner{{ID: "a"}}
	overdue := func(at time.Duration) (time.Duration, bool) {
		d, ok := w.Overdue(owners, t0.Add(at), 10*time.Second)["a"]
		return d, ok
	}
	if _, ok := overdue(0); ok {
		t.Fatal("overdue at once")
	}
	if d, ok := overdue(11 * time.Second); !ok || d != 11*time.Second {
		t.Fatalf("not overdue after the bound (%v, %v)", d, ok)
	}
	w.markPromoted("a", t0.Add(11*time.Second))
	if _, ok := overdue(12 * time.Second); ok {
		t.Fatal("promoted again within the cooldown")
	}
	if _, ok := overdue(18 * time.Second); !ok {
		t.Fatal("not promoted again after the cooldown")
	}
	w.Overdue(nil, t0.Add(19*time.Second), 10*time.Second)
	if _, ok := overdue(20 * time.Second); ok {
		t.Fatal("a node that stopped failing kept its clock")
	}
}

// healKeysReal is how many keys the real-server fault tests load: enough that a shard's
// worth of them lost would never go unnoticed.
const healKeysReal = 20000

// formLoaded is formForHealing with healKeysReal keys, written on each key's owner, then
// WAITed for on every master: the fault comes next, and keys Redis' asynchronous
// replication had not copied yet would be lost by Redis, not by healing.
func formLoaded(t *testing.T) ([]*redistest.Server, []topology.Member, Factory) {
	t.Helper()
	servers, members, f := formForHealing(t, 0)
	keys := healNames(healKeysReal)
	putKeys(t, f, members, keys)
	ctx := ctxFor(t, 30*time.Second)
	for addr := range byOwner(t, f, members, keys) {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		acked, err := c.Do(ctx, "wait", 1, 10000).Int64()
		c.Close()
		if err != nil || acked < 1 {
			t.Fatalf("WAIT on %s: %v (replicas acknowledging: %d)", addr, err, acked)
		}
	}
	return servers, members, f
}

// healNames are heal-0 … heal-(n-1); key i holds i.
func healNames(n int) []string { return numberedKeys("heal", n) }

// numberedKeys are PREFIX-0 … PREFIX-(n-1).
func numberedKeys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// assertAllKeys reads every key formLoaded wrote from its current owner.
func assertAllKeys(t *testing.T, f Factory, members []topology.Member) {
	t.Helper()
	if lost := lostKeys(t, f, members, healNames(healKeysReal)); lost > 0 {
		t.Fatalf("%d of %d keys lost", lost, healKeysReal)
	}
}

// healWithWatch calls HealWith as the controller does, one step each 200 ms, until the
// cluster is formed again, and returns every action made.
func healWithWatch(t *testing.T, f Factory, members []topology.Member, opts HealOptions, within time.Duration) []topology.Action {
	t.Helper()
	ctx := ctxFor(t, within)
	var all []topology.Action
	for {
		p, err := HealWith(ctx, f, members, 3, 1, opts)
		all = append(all, p.Actions...)
		if len(p.Actions) > 0 || err != nil {
			t.Logf("%s: %s (%v)", p.Phase, topology.Messages(p.Actions), err)
		}
		if err != nil && ctx.Err() == nil {
			t.Logf("heal step: %v", err) // a FAILOVER refused while the election runs, say
		}
		if p.Done {
			return all
		}
		if ctx.Err() != nil {
			t.Fatalf("not formed within %v; last phase %s; actions so far: %s", within, p.Phase, topology.Messages(all))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// replaceWithEmpty stops member i's server and starts an empty one in its place, as a pod
// with an emptyDir that comes back at a new address.
func replaceWithEmpty(t *testing.T, f Factory, servers []*redistest.Server, members []topology.Member, i int) (replica string) {
	t.Helper()
	st, err := Observe(ctxFor(t, 5*time.Second), f, members)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if m.Self().MasterID == st.Members[i].ID() {
			replica = m.Pod
		}
	}
	servers[i].Stop()
	fresh, err := redistest.StartIn(filepath.Join(t.TempDir(), "fresh"), healCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fresh.Stop)
	members[i].Addr = fresh.Addr
	return replica
}

// expectUntouched fails when healing re-pointed the lost master's replica: it held the
// only copy of the master's slots.
func expectUntouched(t *testing.T, acts []topology.Action, replica string) {
	t.Helper()
	for _, a := range acts {
		if a.Kind == topology.ActionReplicate && strings.HasPrefix(a.Message, "Made "+replica+" ") {
			t.Errorf("healing re-pointed %s, the lost master's replica: %s", replica, a.Message)
		}
	}
}

// The reproduction of the lost third: a master's pod comes back empty at once. Healing must
// wait for Redis to promote the replica, then join the empty node as its replica.
func TestHealKeepsEveryKeyWhenAMasterComesBackEmpty(t *testing.T) {
	t.Parallel()
	servers, members, f := formLoaded(t)
	replica := replaceWithEmpty(t, f, servers, members, 1)
	acts := healWithWatch(t, f, members, HealOptions{Watch: NewFailWatch(), PromoteAfter: time.Minute}, 60*time.Second)
	if got := topology.Messages(acts); strings.Contains(got, "CLUSTER FAILOVER") || !strings.Contains(got, "Made demo-1 a replica of ") {
		t.Errorf("actions: %s", got)
	}
	expectUntouched(t, acts, replica)
	assertAllKeys(t, f, members)
	assertFormed(t, f, members, "")
}

// Redis will not fail over (the replicas are set cluster-replica-no-failover): the operator
// promotes the replica itself once the bound passes, and loses nothing.
func TestHealPromotesAReplicaRedisWillNotFailOver(t *testing.T) {
	t.Parallel()
	servers, members, f := formLoaded(t)
	ctx := ctxFor(t, 10*time.Second)
	for _, s := range servers[3:] {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr})
		err := c.ConfigSet(ctx, "cluster-replica-no-failover", "yes").Err()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	replica := replaceWithEmpty(t, f, servers, members, 1)
	acts := healWithWatch(t, f, members, HealOptions{Watch: NewFailWatch(), PromoteAfter: 3 * time.Second}, 60*time.Second)
	if got := topology.Messages(acts); !strings.Contains(got, "Promoted "+replica) || !strings.Contains(got, "FAILOVER FORCE") {
		t.Errorf("actions: %s", got)
	}
	expectUntouched(t, acts, replica)
	assertAllKeys(t, f, members)
	assertFormed(t, f, members, "")
}

// A formed cluster with a reshard someone else left half-done (Running, not Scaling): healing
// finishes the slot first, then reports the cluster formed, with every key in place.
func TestHealFinishesAForeignOpenSlot(t *testing.T) {
	t.Parallel()
	members, f, _, slot, tag := openSlotCluster(t, 3, 1)
	st, _ := Observe(ctxFor(t, 5*time.Second), f, members)
	src, dst := -1, -1
	for i := range st.Members {
		switch self := st.Members[i].Self(); {
		case self.Master && self.Slots.Contains(slot):
			src = i
		case self.Master && dst < 0:
			dst = i
		}
	}
	openByHand(t, f, st.Members[src], st.Members[dst], slot, 4000)
	acts := healWithWatch(t, f, members, HealOptions{Watch: NewFailWatch(), PromoteAfter: time.Minute}, 60*time.Second)
	if got := topology.Messages(acts); !strings.Contains(got, fmt.Sprint(slot)) {
		t.Errorf("no action names slot %d: %s", slot, got)
	}
	readAll(t, f, members, tag)
	if n := assertNoStrayKeys(t, f, members); n != slotKeys+2000 {
		t.Errorf("owners hold %d keys, %d were written", n, slotKeys+2000)
	}
}
