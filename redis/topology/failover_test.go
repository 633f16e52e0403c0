package topology

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const lostMaster = "0000000000000000000000000000000000000002" // demo-1's ID in formedState

// promoted makes demo-4, the replica of the lost demo-1, the owner of demo-1's slots in
// every view, as Redis' failover leaves it; the old node keeps its fail flag, slot-less.
func promoted(st *ClusterState) {
	for j := range st.Members {
		if j == 1 {
			continue
		}
		old := st.Members[j].Find(lostMaster)
		r := st.Members[j].Find(fmt.Sprintf("%040x", 5))
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
		{"the master back empty: its epoch first", func(st *ClusterState) { replaceMember(st, 1) }, nil, PhaseWaitingForFailover,
			"Set config epoch 7 on demo-1, above every epoch of the cluster, before it meets it"},
		{"the master back empty, its epoch set: only meets", func(st *ClusterState) { replaceMember(st, 1); st.Members[1].Nodes[0].ConfigEpoch = 7 }, nil, PhaseWaitingForFailover,
			"Made demo-0 meet demo-1 at 127.0.0.1:9000; Made demo-1 meet demo-2 at 127.0.0.1:7002; Made demo-1 meet demo-3 at 127.0.0.1:7003; " +
				"Made demo-1 meet demo-4 at 127.0.0.1:7004; Made demo-1 meet demo-5 at 127.0.0.1:7005"},
		{"met, still no failover: nothing", func(st *ClusterState) { replaceMember(st, 1); learnAll(st, 1) }, nil, PhaseWaitingForFailover, ""},
		{"only pfail so far: nothing", func(st *ClusterState) {
			replaceMember(st, 1)
			learnAll(st, 1)
			for j := range st.Members {
				if n := st.Members[j].Find(lostMaster); n != nil {
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
			if got := Messages(p.Actions); got != tt.want || p.Phase != tt.phase || p.Refusal != nil {
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
	got := Messages(p.Actions)
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
		if n := st.Members[j].Find(lostMaster); n != nil {
			n.Fail, n.PFail, n.NoAddr = false, false, true
		}
	}
	for _, a := range PlanHeal(st, 3, 1, nil).Actions {
		if a.Member == 4 || a.NodeID == lostMaster {
			t.Errorf("touches the only copy: %s", a.Message)
		}
	}
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
				if n := st.Members[j].Find(lostMaster); n != nil {
					n.Fail, n.PFail = false, true
				}
			}
		}, inSync, ""},
		{"link down long before the failure: nothing", func(*ClusterState) {}, Replication{Role: "slave", Offset: 4242, LinkDownSeconds: 600}, ""},
		{"never synced: nothing", func(*ClusterState) {}, Replication{Role: "slave", Offset: 1, LinkDownSeconds: -1}, ""},
		{"link up, the master lives: nothing", func(*ClusterState) {}, Replication{Role: "slave", Offset: 4242, LinkUp: true}, ""},
		{"no majority: still FORCE, never TAKEOVER", func(st *ClusterState) {
			for j := range st.Members {
				if n := st.Members[j].Find(fmt.Sprintf("%040x", 3)); n != nil && j != 2 {
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
				if n := st.Members[j].Find(lostMaster); n != nil {
					n.Fail, n.Connected = true, false
				}
			}
			tt.edit(st)
			st.Members[4].Repl = &tt.repl
			p := PlanHeal(st, 3, 1, map[string]time.Duration{lostMaster: 20 * time.Second})
			got := Messages(p.Actions)
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
