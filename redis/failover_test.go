package redis

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// The family of faults where a master's pod comes back empty before Redis has promoted its
// replica: that replica holds the only copy of the master's slots, and healing must wait
// for the failover (or make it) before it touches the replica or the old node.

const lostMaster = "0000000000000000000000000000000000000002" // demo-1's ID in formedState

// promoted makes demo-4, the replica of the lost demo-1, the owner of demo-1's slots in
// every view, as Redis' failover leaves it; the old node keeps its fail flag, slot-less.
func promoted(st *ClusterState) {
	for j := range st.Members {
		if j == 1 {
			continue
		}
		old := st.Members[j].find(lostMaster)
		r := st.Members[j].find(fmt.Sprintf("%040x", 5))
		r.Replica, r.Master, r.MasterID, r.Slots = false, true, "", old.Slots
		old.Slots = nil
	}
}

func TestPlanHealWaitsForFailoverOfAnEmptiedMaster(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(st *ClusterState)
		overdue map[string]time.Duration
		phase   string
		want    string
	}{
		{"the master back empty: only meets", func(st *ClusterState) { replaceMember(st, 1) }, nil, PhaseWaitingForFailover,
			"Made demo-0 meet demo-1 at 127.0.0.1:9000; Made demo-1 meet demo-2 at 127.0.0.1:7002; Made demo-1 meet demo-3 at 127.0.0.1:7003; " +
				"Made demo-1 meet demo-4 at 127.0.0.1:7004; Made demo-1 meet demo-5 at 127.0.0.1:7005"},
		{"met, still no failover: nothing", func(st *ClusterState) { replaceMember(st, 1); learnAll(st, 1) }, nil, PhaseWaitingForFailover, ""},
		{"only pfail so far: nothing", func(st *ClusterState) {
			replaceMember(st, 1)
			learnAll(st, 1)
			for j := range st.Members {
				if n := st.Members[j].find(lostMaster); n != nil {
					n.Fail, n.PFail = false, true
				}
			}
		}, nil, PhaseWaitingForFailover, ""},
		{"overdue: the replica is promoted with FORCE", func(st *ClusterState) {
			replaceMember(st, 1)
			learnAll(st, 1)
			st.Members[4].Repl = &Replication{Role: "slave", Offset: 4242, LinkDownSeconds: 6}
		}, map[string]time.Duration{lostMaster: 20 * time.Second}, PhaseWaitingForFailover,
			"Promoted demo-4 (offset 4242) with CLUSTER FAILOVER FORCE: its master " + lostMaster + ", holding slots 5461-10922, is down and Redis did not fail it over"},
		{"failed over: the empty node joins the new master", func(st *ClusterState) {
			replaceMember(st, 1)
			learnAll(st, 1)
			promoted(st)
		}, nil, PhaseForgetting,
			"Made demo-1 a replica of demo-4; Made demo-0 forget lost node " + lostMaster + "; Made demo-2 forget lost node " + lostMaster +
				"; Made demo-3 forget lost node " + lostMaster + "; Made demo-4 forget lost node " + lostMaster + "; Made demo-5 forget lost node " + lostMaster},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := formedState()
			tt.edit(st)
			p := PlanHeal(st, 3, 1, tt.overdue)
			if got := kinds(p.Actions); got != tt.want || p.Phase != tt.phase || p.Refusal != nil {
				t.Errorf("got %s (%s, %v)\nwant %s (%s)", got, p.Phase, p.Refusal, tt.want, tt.phase)
			}
			for _, a := range p.Actions {
				if (a.Kind == ActionReplicate || a.Kind == ActionForget) && (a.Member == 4 || a.NodeID == lostMaster) && tt.phase == PhaseWaitingForFailover {
					t.Errorf("touches the only copy: %s", a.Message)
				}
			}
		})
	}
}

func TestPlanHealReadsOffsetsBeforePromoting(t *testing.T) {
	st := formedState()
	replaceMember(st, 1)
	learnAll(st, 1)
	p := PlanHeal(st, 3, 1, map[string]time.Duration{lostMaster: 20 * time.Second})
	if len(p.Actions) != 0 || len(p.NeedReplication) != 1 || p.NeedReplication[0] != 4 {
		t.Fatalf("plan %+v", p)
	}
}

// Two of three masters gone: FORCE cannot win a vote, so the replicas take over.
func TestPlanHealTakesOverWithoutAMajority(t *testing.T) {
	st := formedState()
	replaceMember(st, 1)
	learnAll(st, 1)
	replaceMember(st, 2)
	st.Members[2].Self().ID = strings.Repeat("f", 40) // replaceMember's ID is taken by demo-1's new node
	learnAll(st, 2)
	for i := range st.Members {
		st.Members[i].Repl = &Replication{Role: "slave", Offset: 100, LinkDownSeconds: 6}
	}
	p := PlanHeal(st, 3, 1, map[string]time.Duration{lostMaster: 20 * time.Second, fmt.Sprintf("%040x", 3): 20 * time.Second})
	got := kinds(p.Actions)
	if strings.Count(got, "CLUSTER FAILOVER TAKEOVER") != 2 || strings.Contains(got, "replica of") {
		t.Fatalf("got %s (%s)", got, p.Phase)
	}
}

// A replica's old master that still holds slots in some view is never re-pointed away from,
// even once no node flags it failing any more (a view that has not heard yet).
func TestPlanHealNeverRepointsAReplicaOfASlotOwner(t *testing.T) {
	st := formedState()
	replaceMember(st, 1)
	learnAll(st, 1)
	for j := range st.Members {
		if n := st.Members[j].find(lostMaster); n != nil {
			n.Fail, n.PFail, n.NoAddr = false, false, true
		}
	}
	for _, a := range PlanHeal(st, 3, 1, nil).Actions {
		if a.Member == 4 || a.NodeID == lostMaster {
			t.Errorf("touches the only copy: %s", a.Message)
		}
	}
}

func TestFailWatchOverdue(t *testing.T) {
	w := NewFailWatch()
	t0 := time.Unix(1000, 0)
	owners := []FailingOwner{{ID: "a"}}
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
func formLoaded(t *testing.T) ([]*redistest.Server, []Member, Factory) {
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
func assertAllKeys(t *testing.T, f Factory, members []Member) {
	t.Helper()
	if lost := lostKeys(t, f, members, healNames(healKeysReal)); lost > 0 {
		t.Fatalf("%d of %d keys lost", lost, healKeysReal)
	}
}

// healWithWatch calls HealWith as the controller does, one step each 200 ms, until the
// cluster is formed again, and returns every action made.
func healWithWatch(t *testing.T, f Factory, members []Member, opts HealOptions, within time.Duration) []Action {
	t.Helper()
	ctx := ctxFor(t, within)
	var all []Action
	for {
		p, err := HealWith(ctx, f, members, 3, 1, opts)
		all = append(all, p.Actions...)
		if len(p.Actions) > 0 || err != nil {
			t.Logf("%s: %s (%v)", p.Phase, kinds(p.Actions), err)
		}
		if err != nil && ctx.Err() == nil {
			t.Logf("heal step: %v", err) // a FAILOVER refused while the election runs, say
		}
		if p.Done {
			return all
		}
		if ctx.Err() != nil {
			t.Fatalf("not formed within %v; last phase %s; actions so far: %s", within, p.Phase, kinds(all))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// replaceWithEmpty stops member i's server and starts an empty one in its place, as a pod
// with an emptyDir that comes back at a new address.
func replaceWithEmpty(t *testing.T, f Factory, servers []*redistest.Server, members []Member, i int) (replica string) {
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
func expectUntouched(t *testing.T, acts []Action, replica string) {
	t.Helper()
	for _, a := range acts {
		if a.Kind == ActionReplicate && strings.HasPrefix(a.Message, "Made "+replica+" ") {
			t.Errorf("healing re-pointed %s, the lost master's replica: %s", replica, a.Message)
		}
	}
}

// The reproduction of the lost third: a master's pod comes back empty at once. Healing must
// wait for Redis to promote the replica, then join the empty node as its replica.
func TestHealKeepsEveryKeyWhenAMasterComesBackEmpty(t *testing.T) {
	servers, members, f := formLoaded(t)
	replica := replaceWithEmpty(t, f, servers, members, 1)
	acts := healWithWatch(t, f, members, HealOptions{Watch: NewFailWatch(), PromoteAfter: time.Minute}, 60*time.Second)
	if got := kinds(acts); strings.Contains(got, "CLUSTER FAILOVER") || !strings.Contains(got, "Made demo-1 a replica of ") {
		t.Errorf("actions: %s", got)
	}
	expectUntouched(t, acts, replica)
	assertAllKeys(t, f, members)
	assertFormed(t, f, members, "")
}

// Redis will not fail over (the replicas are set cluster-replica-no-failover): the operator
// promotes the replica itself once the bound passes, and loses nothing.
func TestHealPromotesAReplicaRedisWillNotFailOver(t *testing.T) {
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
	if got := kinds(acts); !strings.Contains(got, "Promoted "+replica) || !strings.Contains(got, "FAILOVER FORCE") {
		t.Errorf("actions: %s", got)
	}
	expectUntouched(t, acts, replica)
	assertAllKeys(t, f, members)
	assertFormed(t, f, members, "")
}

// A member back with a stale copy claims the slots its former replica now owns: until Redis
// settles the conflict by config epoch, no node is attached to either claimant.
func TestPlanHealAttachesNothingWhileTwoMembersClaimASlot(t *testing.T) {
	st := formedState()
	replaceMember(st, 4)
	learnAll(st, 4)
	st.Members[3].Self().Slots = st.Members[0].Self().Slots // demo-3 claims demo-0's slots too
	st.Members[3].Self().Replica, st.Members[3].Self().Master = false, true
	p := PlanHeal(st, 3, 1, nil)
	for _, a := range p.Actions {
		if a.Kind == ActionReplicate || a.Kind == ActionForget {
			t.Errorf("acted while two members claim a slot: %s", a.Message)
		}
	}
	if p.Done {
		t.Error("done while two members claim a slot")
	}
}

// While a pod does not answer, the operator may be cut off from a master that lives: it
// promotes only for an owner a majority flagged fail, only with FORCE, and only a replica
// that was in sync until the failure.
func TestPlanHealPromotesStrictlyWhilePodsAreMissing(t *testing.T) {
	inSync := Replication{Role: "slave", Offset: 4242, LinkDownSeconds: 6}
	tests := []struct {
		name string
		edit func(st *ClusterState)
		repl Replication
		want string
	}{
		{"flagged fail, replica in sync: FORCE", func(*ClusterState) {}, inSync, "CLUSTER FAILOVER FORCE"},
		{"only pfail: nothing", func(st *ClusterState) {
			for j := range st.Members {
				if n := st.Members[j].find(lostMaster); n != nil {
					n.Fail, n.PFail = false, true
				}
			}
		}, inSync, ""},
		{"link down long before the failure: nothing", func(*ClusterState) {}, Replication{Role: "slave", Offset: 4242, LinkDownSeconds: 600}, ""},
		{"never synced: nothing", func(*ClusterState) {}, Replication{Role: "slave", Offset: 1, LinkDownSeconds: -1}, ""},
		{"link up, the master lives: nothing", func(*ClusterState) {}, Replication{Role: "slave", Offset: 4242, LinkUp: true}, ""},
		{"no majority: still FORCE, never TAKEOVER", func(st *ClusterState) {
			for j := range st.Members {
				if n := st.Members[j].find(fmt.Sprintf("%040x", 3)); n != nil && j != 2 {
					n.Fail = true
				}
			}
		}, inSync, "CLUSTER FAILOVER FORCE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := formedState()
			// demo-1, the master, is not running: unreachable, flagged fail by the others.
			st.Members[1].Err, st.Members[1].Nodes = fmt.Errorf("no pod"), nil
			for j := range st.Members {
				if n := st.Members[j].find(lostMaster); n != nil {
					n.Fail, n.Connected = true, false
				}
			}
			tt.edit(st)
			st.Members[4].Repl = &tt.repl
			p := PlanHeal(st, 3, 1, map[string]time.Duration{lostMaster: 20 * time.Second})
			got := kinds(p.Actions)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) || strings.Contains(got, "TAKEOVER") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			for _, a := range p.Actions {
				if a.Kind != ActionFailover {
					t.Errorf("acted on a partial view: %s", a.Message)
				}
			}
		})
	}
}

// A formed cluster with a reshard someone else left half-done (Running, not Scaling): healing
// finishes the slot first, then reports the cluster formed, with every key in place.
func TestHealFinishesAForeignOpenSlot(t *testing.T) {
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
	if got := kinds(acts); !strings.Contains(got, fmt.Sprint(slot)) {
		t.Errorf("no action names slot %d: %s", slot, got)
	}
	readAll(t, f, members, tag)
	if n := assertNoStrayKeys(t, f, members); n != slotKeys+2000 {
		t.Errorf("owners hold %d keys, %d were written", n, slotKeys+2000)
	}
}
