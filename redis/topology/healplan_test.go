package topology

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// formedState is an observation of a formed 3-master cluster: demo-0..2 masters with the
// redis-cli split, demo-3..5 their replicas, each on another Kubernetes node than its
// master, every member seeing every other connected at its address.
func formedState() *ClusterState {
	st := &ClusterState{}
	k8s := []string{"n0", "n1", "n2", "n1", "n2", "n0"}
	var nodes []Node
	for i := 0; i < 6; i++ {
		n := Node{ID: fmt.Sprintf("%040x", i+1), IP: "127.0.0.1", Port: 7000 + i, Connected: true, ConfigEpoch: uint64(i + 1)}
		if i < 3 {
			n.Master, n.Slots = true, SlotRanges{SplitSlots(3)[i]}
		} else {
			n.Replica, n.MasterID = true, fmt.Sprintf("%040x", i-2)
		}
		nodes = append(nodes, n)
	}
	for i := 0; i < 6; i++ {
		view := make([]Node, len(nodes))
		copy(view, nodes)
		view[i].Myself = true
		st.Members = append(st.Members, MemberState{
			Member: Member{Pod: fmt.Sprintf("demo-%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", 7000+i), K8sNode: k8s[i]},
			Nodes:  view, Info: ClusterInfo{State: "ok"}, KeysKnown: true,
		})
	}
	return st
}

// moveMember gives member i a new address, in its own view only: a pod back with a new IP.
func moveMember(st *ClusterState, i, port int) {
	st.Members[i].Addr = fmt.Sprintf("127.0.0.1:%d", port)
	st.Members[i].Self().Port = port
}

// replaceMember puts a fresh, empty node in member i's place; the others keep the old
// node's line, flagged fail: a pod back with an empty data dir.
func replaceMember(st *ClusterState, i int) {
	for j := range st.Members {
		if j != i {
			n := st.Members[j].Find(st.Members[i].ID())
			n.Fail, n.Connected = true, false
		}
	}
	st.Members[i].Addr = "127.0.0.1:9000"
	st.Members[i].Nodes = []Node{{ID: strings.Repeat("e", 40), IP: "127.0.0.1", Port: 9000, Myself: true, Master: true, Connected: true}}
	st.Members[i].Info = ClusterInfo{State: "fail"}
}

// learnAll makes every member know member i at its current address, as after the meets.
func learnAll(st *ClusterState, i int) {
	self := *st.Members[i].Self()
	self.Myself = false
	for j := range st.Members {
		if j == i {
			continue
		}
		if n := st.Members[j].Find(self.ID); n != nil {
			*n = self
		} else {
			st.Members[j].Nodes = append(st.Members[j].Nodes, self)
		}
		other := *st.Members[j].Self()
		other.Myself = false
		if st.Members[i].Find(other.ID) == nil {
			st.Members[i].Nodes = append(st.Members[i].Nodes, other)
		}
	}
}

func TestPlanHeal(t *testing.T) {
	ghost := fmt.Sprintf("%040x", 5) // demo-4's old ID
	tests := []struct {
		name  string
		edit  func(st *ClusterState)
		phase string
		want  string
	}{
		{"healthy", func(*ClusterState) {}, PhaseFormed, ""},
		{"one pod with a new IP", func(st *ClusterState) { moveMember(st, 1, 8001) }, PhaseMeeting,
			"Made demo-0 meet demo-1 at 127.0.0.1:8001; Made demo-2 meet demo-1 at 127.0.0.1:8001; Made demo-3 meet demo-1 at 127.0.0.1:8001; " +
				"Made demo-4 meet demo-1 at 127.0.0.1:8001; Made demo-5 meet demo-1 at 127.0.0.1:8001"},
		{"a member seen fail while it answers", func(st *ClusterState) { st.Members[0].Find(fmt.Sprintf("%040x", 3)).Fail = true }, PhaseWaitingForFailover,
			"Made demo-0 meet demo-2 at 127.0.0.1:7002"}, // a slot owner flagged fail: nothing but meets until the flag clears
		{"a handshake already in flight", func(st *ClusterState) {
			moveMember(st, 1, 8001)
			for j := range st.Members {
				st.Members[j].Nodes = append(st.Members[j].Nodes, Node{ID: strings.Repeat("a", 40), IP: "127.0.0.1", Port: 8001, Handshake: true, Master: true})
			}
		}, PhaseConverging, ""},
		{"a fresh node in a replica's place: its epoch first", func(st *ClusterState) { replaceMember(st, 4) }, PhaseMeeting,
			"Set config epoch 7 on demo-4, above every epoch of the cluster, before it meets it; " +
				"Made demo-0 forget lost node " + ghost + "; Made demo-1 forget lost node " + ghost + "; Made demo-2 forget lost node " + ghost + "; " +
				"Made demo-3 forget lost node " + ghost + "; Made demo-5 forget lost node " + ghost},
		{"a fresh node in a replica's place, its epoch set", func(st *ClusterState) { replaceMember(st, 4); st.Members[4].Nodes[0].ConfigEpoch = 7 }, PhaseMeeting,
			"Made demo-0 meet demo-4 at 127.0.0.1:9000; Made demo-1 meet demo-4 at 127.0.0.1:9000; Made demo-2 meet demo-4 at 127.0.0.1:9000; " +
				"Made demo-3 meet demo-4 at 127.0.0.1:9000; Made demo-4 meet demo-5 at 127.0.0.1:7005; " +
				"Made demo-0 forget lost node " + ghost + "; Made demo-1 forget lost node " + ghost + "; Made demo-2 forget lost node " + ghost + "; " +
				"Made demo-3 forget lost node " + ghost + "; Made demo-5 forget lost node " + ghost},
		{"the fresh node met", func(st *ClusterState) { replaceMember(st, 4); learnAll(st, 4) }, PhaseForgetting,
			"Made demo-4 a replica of demo-1; " +
				"Made demo-0 forget lost node " + ghost + "; Made demo-1 forget lost node " + ghost + "; Made demo-2 forget lost node " + ghost + "; " +
				"Made demo-3 forget lost node " + ghost + "; Made demo-5 forget lost node " + ghost},
		{"a lost node holding slots is never forgotten", func(st *ClusterState) {
			replaceMember(st, 4)
			learnAll(st, 4)
			for j := range st.Members {
				if n := st.Members[j].Find(ghost); n != nil {
					n.Slots = SlotRanges{{0, 10}}
				}
			}
		}, PhaseReplicating, "Made demo-4 a replica of demo-1"},
		{"a replica of a lost master", func(st *ClusterState) {
			lost := strings.Repeat("d", 40)
			for j := range st.Members {
				st.Members[j].Nodes = append(st.Members[j].Nodes, Node{ID: lost, IP: "127.0.0.1", Port: 7100, Master: true, Fail: true, NoAddr: true})
				st.Members[j].Find(fmt.Sprintf("%040x", 4)).MasterID = lost
			}
		}, PhaseForgetting,
			"Made demo-3 a replica of demo-0; Made demo-0 forget lost node dddddddddddddddddddddddddddddddddddddddd; " +
				"Made demo-1 forget lost node dddddddddddddddddddddddddddddddddddddddd; Made demo-2 forget lost node dddddddddddddddddddddddddddddddddddddddd; " +
				"Made demo-4 forget lost node dddddddddddddddddddddddddddddddddddddddd; Made demo-5 forget lost node dddddddddddddddddddddddddddddddddddddddd"},
		{"a replica of a member that is a replica now", func(st *ClusterState) {
			for j := range st.Members {
				st.Members[j].Find(fmt.Sprintf("%040x", 6)).MasterID = fmt.Sprintf("%040x", 4)
			}
		}, PhaseReplicating, "Made demo-5 a replica of demo-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := formedState()
			tt.edit(st)
			p := PlanHeal(st, 3, 1, nil)
			if got := Messages(p.Actions); got != tt.want || p.Phase != tt.phase || p.Refusal != nil {
				t.Errorf("got %s (%s, %v)\nwant %s (%s)", got, p.Phase, p.Refusal, tt.want, tt.phase)
			}
			if p.Done != (tt.phase == PhaseFormed) {
				t.Errorf("done = %v", p.Done)
			}
		})
	}
}

func TestPlanHealAllPodsWithNewIPs(t *testing.T) {
	st := formedState()
	for i := range st.Members {
		moveMember(st, i, 8000+i)
	}
	p := PlanHeal(st, 3, 1, nil)
	if len(p.Actions) != 15 || p.Phase != PhaseMeeting {
		t.Fatalf("want one MEET per pair (15), got %d: %s", len(p.Actions), Messages(p.Actions))
	}
	for _, a := range p.Actions {
		if a.Kind != ActionMeet || a.Member >= a.Target || a.TargetAddr != st.Members[a.Target].Addr {
			t.Errorf("unexpected action %+v", a)
		}
	}
}

func TestPlanHealChecksKeysBeforeClaiming(t *testing.T) {
	st := formedState()
	replaceMember(st, 4)
	learnAll(st, 4)
	st.Members[4].KeysKnown = false
	if p := PlanHeal(st, 3, 1, nil); len(p.Actions) != 0 || len(p.NeedKeys) != 1 || p.NeedKeys[0] != 4 {
		t.Fatalf("actions %s, need keys %v", Messages(p.Actions), p.NeedKeys)
	}
	st.Members[4].KeysKnown, st.Members[4].Keys = true, 3
	p := PlanHeal(st, 3, 1, nil)
	if p.Refusal == nil || !strings.Contains(p.Refusal.Error(), "pod demo-4") || len(p.Actions) != 0 || p.Phase != PhaseRefused {
		t.Fatalf("refusal %v, actions %s", p.Refusal, Messages(p.Actions))
	}
}

func TestPlanHealWaitsForUnreachable(t *testing.T) {
	st := formedState()
	moveMember(st, 1, 8001)
	st.Members[2].Err, st.Members[2].Nodes = fmt.Errorf("refused"), nil
	if p := PlanHeal(st, 3, 1, nil); len(p.Actions) != 0 || p.Phase != PhaseWaitingForPods {
		t.Fatalf("plan %+v", p)
	}
}

// A fresh node that has just completed its handshakes knows the members by ID only: the
// members whose role or slots it sees wrong re-announce themselves to it, and nobody
// else does; once its view is right, nothing is planned.
func TestPlanReannounce(t *testing.T) {
	st := formedState()
	if acts := PlanReannounce(st, nil); len(acts) != 0 {
		t.Fatalf("a formed cluster re-announces: %v", Messages(acts))
	}
	replaceMember(st, 1)
	learnAll(st, 1)
	fresh := &st.Members[1]
	for k := range fresh.Nodes {
		if n := &fresh.Nodes[k]; !n.Myself { // as after the handshake: the ID, no slots, no master
			n.Slots, n.MasterID = nil, ""
		}
	}
	for j := range st.Members { // everyone forgot the failed old node
		if j != 1 {
			st.Members[j].Nodes = slices.DeleteFunc(st.Members[j].Nodes, func(n Node) bool { return n.ID == fmt.Sprintf("%040x", 2) })
		}
	}
	got := map[string]bool{}
	for _, a := range PlanReannounce(st, nil) {
		if a.Kind != ActionMeet || !a.Refresh || a.Target != 1 || a.TargetAddr != fresh.Addr {
			t.Errorf("unexpected action %+v", a)
		}
		got[st.Members[a.Member].Pod] = true
	}
	// demo-0 and demo-2 own slots, demo-3..5 have a master the fresh node does not know.
	for _, pod := range []string{"demo-0", "demo-2", "demo-3", "demo-4", "demo-5"} {
		if !got[pod] {
			t.Errorf("%s does not re-announce itself to the fresh node; got %v", pod, got)
		}
	}
	if only := PlanReannounce(st, func(i int) bool { return i == 0 }); len(only) != 1 || only[0].Member != 0 {
		t.Errorf("announce(i) does not restrict who re-announces: %v", Messages(only))
	}
	learnAll(st, 1)
	for j := range st.Members {
		if j == 1 {
			continue
		}
		self := *st.Members[j].Self()
		self.Myself = false
		*fresh.Find(self.ID) = self
	}
	if acts := PlanReannounce(st, nil); len(acts) != 0 {
		t.Errorf("views that agree re-announce: %v", Messages(acts))
	}
}

// Fresh members of a formed cluster get distinct config epochs above every epoch known,
// the current epoch included, before any MEET; a cluster not yet formed is bootstrap's.
func TestPlanFreshEpochs(t *testing.T) {
	st := formedState()
	st.Members[0].Info.CurrentEpoch = 9 // above every config epoch (1-6): a failover vote
	for _, i := range []int{4, 5} {     // two new pods, each knowing only itself
		st.Members[i].Nodes = []Node{{ID: strings.Repeat(fmt.Sprint(i), 40), IP: "127.0.0.1", Port: 9000 + i, Myself: true, Master: true}}
	}
	acts := PlanFreshEpochs(st)
	if len(acts) != 2 || acts[0].Member != 4 || acts[0].Epoch != 10 || acts[1].Member != 5 || acts[1].Epoch != 11 {
		t.Fatalf("got %s", Messages(acts))
	}
	if got := PlanReconnect(st); Messages(got) != Messages(acts) {
		t.Fatalf("reconnect planned %s beside the epochs", Messages(got))
	}
	fresh := &ClusterState{}
	for i := 0; i < 3; i++ {
		fresh.Members = append(fresh.Members, MemberState{Member: Member{Pod: fmt.Sprintf("demo-%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", 7000+i)},
			Nodes: []Node{{ID: fmt.Sprintf("%040x", i+1), Myself: true, Master: true}}})
	}
	if acts := PlanFreshEpochs(fresh); len(acts) != 0 {
		t.Fatalf("a new cluster got %s", Messages(acts))
	}
}
