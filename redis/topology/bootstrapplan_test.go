package topology

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fakeState builds an observation of n fresh members; tweak edits member views.
func fakeState(n int) *ClusterState {
	st := &ClusterState{}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%040x", i+1)
		st.Members = append(st.Members, MemberState{
			Member: Member{Pod: fmt.Sprintf("demo-%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", 7000+i), K8sNode: "n"},
			Nodes:  []Node{{ID: id, IP: "127.0.0.1", Port: 7000 + i, Myself: true, Master: true, Connected: true}},
			Info:   ClusterInfo{State: "fail"}, KeysKnown: true,
		})
	}
	return st
}

func TestPlanBootstrapFreshAssignsEpochsAndSlotsFirst(t *testing.T) {
	p := PlanBootstrap(fakeState(6), 3, 1)
	want := "Set config epoch 1 on demo-0; Set config epoch 2 on demo-1; Set config epoch 3 on demo-2; " +
		"Set config epoch 4 on demo-3; Set config epoch 5 on demo-4; Set config epoch 6 on demo-5; " +
		"Assigned slots 0-5460 to demo-0; Assigned slots 5461-10922 to demo-1; Assigned slots 10923-16383 to demo-2"
	if got := Messages(p.Actions); got != want || p.Phase != PhaseAssigning {
		t.Errorf("got %s (%s)\nwant %s", got, p.Phase, want)
	}
}

func TestPlanBootstrapFillsOnlyMissingSlots(t *testing.T) {
	st := fakeState(6)
	st.Members[1].Nodes[0].Slots = SlotRanges{{5461, 10922}}
	st.Members[1].Nodes[0].ConfigEpoch = 2
	p := PlanBootstrap(st, 3, 1)
	got := Messages(p.Actions)
	if !strings.Contains(got, "Assigned slots 0-5460 to demo-0") || !strings.Contains(got, "Assigned slots 10923-16383 to demo-2") ||
		strings.Contains(got, "5461-10922") || strings.Contains(got, "epoch 2 ") {
		t.Errorf("got %s", got)
	}
}

func TestPlanBootstrapRefuses(t *testing.T) {
	withKeys := fakeState(6)
	withKeys.Members[4].Keys = 7
	overlap := fakeState(6)
	overlap.Members[0].Nodes[0].Slots = SlotRanges{{0, 100}}
	overlap.Members[3].Nodes[0].Slots = SlotRanges{{50, 60}}
	foreign := fakeState(6)
	foreign.Members[2].Nodes = append(foreign.Members[2].Nodes,
		Node{ID: strings.Repeat("f", 40), IP: "10.0.0.9", Port: 6379, Master: true, Slots: SlotRanges{{0, 10}}})
	tooMany := fakeState(6)
	for i := range tooMany.Members {
		tooMany.Members[i].Nodes[0].Slots = SlotRanges{{i, i}}
	}
	tests := map[string]struct {
		st   *ClusterState
		want string
	}{
		"keys on a claimed node": {withKeys, "pod demo-4"},
		"two owners of a slot":   {overlap, "slots 50-60 are claimed by both demo-0 and demo-3"},
		"a foreign cluster":      {foreign, "outside this cluster"},
		"too many slot holders":  {tooMany, "6 members already hold slots"},
		"too few members":        {fakeState(4), "need 6 members"},
	}
	for name, tt := range tests {
		p := PlanBootstrap(tt.st, 3, 1)
		if p.Refusal == nil || !strings.Contains(p.Refusal.Error(), tt.want) || len(p.Actions) > 0 || p.Phase != PhaseRefused {
			t.Errorf("%s: refusal %v, actions %s", name, p.Refusal, Messages(p.Actions))
		}
	}
}

func TestPlanBootstrapAsksForKeysBeforeWriting(t *testing.T) {
	st := fakeState(6)
	st.Members[5].KeysKnown = false
	p := PlanBootstrap(st, 3, 1)
	if len(p.Actions) != 0 || len(p.NeedKeys) != 1 || p.NeedKeys[0] != 5 {
		t.Errorf("actions %s, need keys %v", Messages(p.Actions), p.NeedKeys)
	}
}

func TestPlanBootstrapWaitsForUnreachable(t *testing.T) {
	st := fakeState(6)
	st.Members[2].Err, st.Members[2].Nodes = errors.New("refused"), nil
	if p := PlanBootstrap(st, 3, 1); len(p.Actions) != 0 || p.Phase != PhaseWaitingForPods {
		t.Errorf("plan %+v", p)
	}
}

// After slots: masters meet each other and replicas meet only their master.
func TestPlanBootstrapMeetsAfterSlots(t *testing.T) {
	st := fakeState(6)
	for i, r := range SplitSlots(3) {
		st.Members[i].Nodes[0].Slots = SlotRanges{r}
	}
	for i := range st.Members {
		st.Members[i].Nodes[0].ConfigEpoch = uint64(i + 1)
	}
	p := PlanBootstrap(st, 3, 1)
	want := "Made demo-0 meet demo-1; Made demo-0 meet demo-2; Made demo-1 meet demo-2; " +
		"Made demo-3 meet demo-0; Made demo-4 meet demo-1; Made demo-5 meet demo-2"
	if got := Messages(p.Actions); got != want || p.Phase != PhaseMeeting {
		t.Errorf("got %s (%s)\nwant %s", got, p.Phase, want)
	}
}

// A CR deleted and applied again over kept data: every pod is back at a new address with
// its nodes.conf. Bootstrap adopts the cluster: it re-meets the members where they are now
// and assigns no slot, sets no epoch and changes no role.
func TestPlanBootstrapAdoptsAClusterBackAtNewAddresses(t *testing.T) {
	st := formedState()
	for i := range st.Members {
		moveMember(st, i, 8000+i)
	}
	p := PlanBootstrap(st, 3, 1)
	if p.Refusal != nil || p.Phase != PhaseMeeting || len(p.Actions) != 15 {
		t.Fatalf("want one MEET per pair (15), got %s (%s, %v)", Messages(p.Actions), p.Phase, p.Refusal)
	}
	for _, a := range p.Actions {
		if a.Kind != ActionMeet || a.TargetAddr != st.Members[a.Target].Addr {
			t.Errorf("unexpected action %+v", a)
		}
	}
}

// One pod of the kept cluster came back empty (a hostPath pod rescheduled to another node):
// the rest are adopted, and the empty one is joined as a replica once it is met; its
// earlier life, holding no slots, is forgotten. No slot is assigned.
func TestPlanBootstrapAdoptsAndJoinsAnEmptyMember(t *testing.T) {
	st := formedState()
	replaceMember(st, 4)
	learnAll(st, 4)
	p := PlanBootstrap(st, 3, 1)
	got := Messages(p.Actions)
	if p.Refusal != nil || !strings.Contains(got, "Made demo-4 a replica of demo-1") || !strings.Contains(got, "forget lost node") ||
		strings.Contains(got, "Assigned") || strings.Contains(got, "epoch") {
		t.Fatalf("got %s (%s, %v)", got, p.Phase, p.Refusal)
	}
}

// A pod lands on a node holding an old copy of its directory: it claims the slots it owned
// in an earlier life, with the config epoch of then, while its former replica owns them now
// with a higher epoch. Bootstrap does not refuse (they were one cluster), and does nothing
// but meet until Redis has settled the claim by epoch: no slot, no REPLICATE to the stale
// claimant, no refusal.
func TestPlanBootstrapLeavesAStaleClaimToRedis(t *testing.T) {
	st := formedState()
	old := st.Members[0].ID()           // demo-0's earlier life, master of 0-5460 at epoch 1
	promoted := fmt.Sprintf("%040x", 4) // demo-3, its replica then, master now
	for j := 1; j < 6; j++ {
		m := &st.Members[j]
		n := m.Find(promoted)
		n.Replica, n.Master, n.MasterID, n.Slots, n.ConfigEpoch = false, true, "", SlotRanges{SplitSlots(3)[0]}, 7
		var keep []Node
		for _, x := range m.Nodes {
			if x.ID != old {
				keep = append(keep, x)
			}
		}
		m.Nodes = keep
	}
	moveMember(st, 0, 8000)
	// And a fresh member with nowhere to go yet, which must not be given to the stale claimant.
	st.Members = append(st.Members, MemberState{
		Member: Member{Pod: "demo-6", Addr: "127.0.0.1:9006", K8sNode: "n2"},
		Nodes:  []Node{{ID: strings.Repeat("e", 40), IP: "127.0.0.1", Port: 9006, Myself: true, Master: true, Connected: true}},
		Info:   ClusterInfo{State: "fail"}, KeysKnown: true,
	})
	learnAll(st, 6)
	p := PlanBootstrap(st, 3, 1)
	if p.Refusal != nil {
		t.Fatalf("refused: %v", p.Refusal)
	}
	for _, a := range p.Actions {
		if a.Kind != ActionMeet {
			t.Errorf("want only MEETs while two members claim slots 0-5460, got %s", a.Message)
		}
	}
	if !strings.Contains(Messages(p.Actions), "meet demo-0 at 127.0.0.1:8000") {
		t.Errorf("the stale member is not met: %s", Messages(p.Actions))
	}
}

// Data of another cluster is still refused, naming the pod, even among members that were
// one cluster before.
func TestPlanBootstrapRefusesForeignSlotsOnAKeptCluster(t *testing.T) {
	st := formedState()
	for i := range st.Members {
		moveMember(st, i, 8000+i)
	}
	st.Members[2].Nodes = append(st.Members[2].Nodes,
		Node{ID: strings.Repeat("f", 40), IP: "10.0.0.9", Port: 6379, Master: true, Slots: SlotRanges{{0, 10}}})
	p := PlanBootstrap(st, 3, 1)
	if p.Refusal == nil || !strings.Contains(p.Refusal.Error(), "pod demo-2 knows node "+strings.Repeat("f", 40)) || len(p.Actions) > 0 {
		t.Fatalf("refusal %v, actions %s", p.Refusal, Messages(p.Actions))
	}
}

// A master's pod came back empty (hostPath on another node) while the rest kept their data:
// its slots' keys are only in its replica now, and the other members know its earlier life
// holding them. Bootstrap refuses, naming a pod, and writes nothing (healing a formed
// cluster is where a replica takes such slots over).
func TestPlanBootstrapRefusesAKeptClusterMissingAMaster(t *testing.T) {
	st := formedState()
	old := st.Members[0].ID()
	replaceMember(st, 0)
	for i := 1; i < 6; i++ {
		moveMember(st, i, 8000+i)
	}
	p := PlanBootstrap(st, 3, 1)
	if p.Refusal == nil || !strings.Contains(p.Refusal.Error(), "knows node "+old) || len(p.Actions) > 0 {
		t.Fatalf("refusal %v, actions %s", p.Refusal, Messages(p.Actions))
	}
}
