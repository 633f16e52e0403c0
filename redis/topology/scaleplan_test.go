package topology

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// layout builds the observation of a cluster from each member's own line: "m:0-5460" for
// a master holding slots, "m" for an empty master, "r:2" for a replica of member 2. Every
// member knows every other (only the own line matters to the planner).
func layout(roles ...string) *ClusterState {
	st := &ClusterState{}
	for i, r := range roles {
		n := Node{ID: fmt.Sprintf("%040d", i), Myself: true}
		kind, arg, _ := strings.Cut(r, ":")
		switch kind {
		case "m":
			n.Master = true
			if arg != "" {
				for _, part := range strings.Split(arg, ",") {
					var a, b int
					fmt.Sscanf(part, "%d-%d", &a, &b)
					n.Slots = append(n.Slots, SlotRange{a, b})
				}
			}
		case "r":
			var m int
			fmt.Sscanf(arg, "%d", &m)
			n.Replica, n.MasterID = true, fmt.Sprintf("%040d", m)
		}
		st.Members = append(st.Members, MemberState{
			Member: Member{Pod: fmt.Sprintf("demo-%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", 7000+i), K8sNode: fmt.Sprintf("node-%d", i%3)},
			Nodes:  []Node{n},
		})
	}
	return st
}

// The case: `kubectl scale` 6 -> 8 with five AssignReceive entries made NewFrom
// -2 and PlanScale indexed Members[-2] on every reconcile. Every bad entry list is an
// *AssignError now, before and during the migration, and good ones still plan.
func TestPlanScaleAssignNeverPanics(t *testing.T) {
	fresh := layout("m:0-5460", "r:0", "m:5461-10922", "r:2", "m:10923-16383", "r:4", "m", "m")
	// Half way: demo-6 took 100 slots of demo-0 and has demo-7 as its replica.
	half := layout("m:0-5360", "r:0", "m:5461-10922", "r:2", "m:10923-16383", "r:4", "m:5361-5460", "r:6")
	entry := func(n int, slots int) []Assignment {
		var out []Assignment
		for i := 0; i < n; i++ {
			out = append(out, Assignment{Slots: slots, From: []string{"demo-0", "demo-2"}})
		}
		return out
	}
	req := func(assign []Assignment) ScaleShape {
		// What the controller computes: the last len(assign) masters are the new ones.
		return ScaleShape{Masters: 4, ReplicasPerMaster: 1, Keep: 8, Assign: assign, NewFrom: (4 - len(assign)) * 2}
	}
	for _, tt := range []struct {
		name   string
		st     *ClusterState
		assign []Assignment
		index  int
		would  string
	}{
		{"five entries, one master added", fresh, entry(5, 1000), -1, "5 entries, but this scale-out adds 1 masters (demo-6)"},
		{"two entries, one master added", fresh, entry(2, 1000), -1, "2 entries, but this scale-out adds 1 masters"},
		{"empty list", fresh, []Assignment{}, -1, "found none"},
		{"zero slots", fresh, entry(1, 0), 0, "0 is out of range"},
		{"negative slots", fresh, entry(1, -1), 0, "-1 is out of range"},
		{"more slots than exist", fresh, entry(1, 20000), 0, "20000 is out of range"},
		{"more slots than the givers own", fresh, entry(1, 12000), 0, "own only 10923"},
		{"duplicate giver", fresh, []Assignment{{Slots: 10, From: []string{"demo-0", fmt.Sprintf("%040d", 0)}}}, 0, "name the same master"},
		{"a replica as giver", fresh, []Assignment{{Slots: 10, From: []string{"demo-1"}}}, 0, `"demo-1" is not an existing master`},
		{"a new master as giver", fresh, []Assignment{{Slots: 10, From: []string{"demo-6"}}}, 0, `"demo-6" is not an existing master`},
		{"five entries half way", half, entry(5, 1000), -1, "5 entries do not fit a cluster of 4 masters"},
		{"two entries half way", half, entry(2, 1000), 0, "demo-4 already holds 5461"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			moves, err := PlanScale(tt.st, req(tt.assign))
			var ae *AssignError
			if !errors.As(err, &ae) || ae.Index != tt.index || !strings.Contains(ae.Problem, tt.would) {
				t.Fatalf("got %d moves, %v; want entry %d: %q", len(moves), err, tt.index, tt.would)
			}
		})
	}
	for _, st := range []*ClusterState{fresh, half} {
		moves, err := PlanScale(st, req(entry(1, 1000)))
		if err != nil {
			t.Fatal(err)
		}
		want := 1000
		if st == half {
			want = 900
		}
		if len(moves) != want {
			t.Errorf("%d moves, want %d", len(moves), want)
		}
		for _, mv := range moves {
			if mv.To != st.Members[6].ID() {
				t.Fatalf("slot %d goes to %s, not demo-6", mv.Slot, mv.To)
			}
		}
	}
}

// Before any slot moves, the new master is chosen and its replica placed on another
// Kubernetes node; on every later step the same member stays the new master.
func TestPlanScaleChoosesFreshMasterAndItsReplica(t *testing.T) {
	st := layout("m:0-5460", "r:0", "m:5461-10922", "r:2", "m:10923-16383", "r:4", "m", "m")
	p, err := PlanResize(st, ScaleShape{Masters: 4, ReplicasPerMaster: 1, Keep: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Fresh) != 1 || p.Fresh[0] != 6 || p.ReplicaOf[7] != 6 || len(p.Empty) != 2 {
		t.Fatalf("fresh %v, replicaOf %v, empty %v", p.Fresh, p.ReplicaOf, p.Empty)
	}
	if st.Members[7].K8sNode == st.Members[6].K8sNode {
		t.Fatalf("replica on its master's node")
	}
	if len(p.Moves) != 4096 {
		t.Fatalf("%d moves", len(p.Moves))
	}
	attached := layout("m:0-5460", "r:0", "m:5461-10922", "r:2", "m:10923-16383", "r:4", "m", "r:6")
	p, err = PlanResize(attached, ScaleShape{Masters: 4, ReplicasPerMaster: 1, Keep: 8})
	if err != nil || len(p.Fresh) != 1 || p.Fresh[0] != 6 || len(p.Moves) != 4096 {
		t.Fatalf("after attach: fresh %v, %d moves, %v", p.Fresh, len(p.Moves), err)
	}
}

// ProjectCapacity refuses when a kept master would pass maxmemory less the headroom,
// accepts when it fits, and ignores unlimited masters.
func TestProjectCapacity(t *testing.T) {
	st := layout("m:0-8191", "m:8192-12287", "m:12288-16383")
	ids := []string{st.Members[0].ID(), st.Members[1].ID(), st.Members[2].ID()}
	const mb = 1 << 20
	// demo-2 leaves: its 4096 slots (40 MB of data) go half to demo-0, half to demo-1.
	var moves []SlotMove
	for s := 12288; s < SlotCount; s++ {
		to := ids[0]
		if s%2 == 1 {
			to = ids[1]
		}
		moves = append(moves, SlotMove{Slot: s, From: ids[2], To: to})
	}
	mem := func(max int64) map[string]Memory {
		return map[string]Memory{
			ids[0]: {Used: 82 * mb, Dataset: 80 * mb, MaxMemory: max},
			ids[1]: {Used: 42 * mb, Dataset: 40 * mb, MaxMemory: max},
			ids[2]: {Used: 42 * mb, Dataset: 40 * mb, MaxMemory: max},
		}
	}
	// demo-0 would hold 82 + 20 = 102 MB: over 0.8*120 = 96, under 0.8*130 = 104.
	err := ProjectCapacity(st, []int{0, 1, 2}, mem(120*mb), moves)
	var ce *CapacityError
	if !errors.As(err, &ce) || ce.Pod != "demo-0" || ce.Projected != 102*mb || ce.Limit != 96*mb || ce.Dataset != 160*mb || ce.KeptMaxMemory != 240*mb || ce.Masters != 2 {
		t.Fatalf("got %#v (%v)", ce, err)
	}
	if !errors.Is(err, ErrRefused) {
		t.Fatal("a capacity refusal does not wrap ErrRefused")
	}
	t.Log(err)
	if err := ProjectCapacity(st, []int{0, 1, 2}, mem(130*mb), moves); err != nil {
		t.Fatal(err)
	}
	if err := ProjectCapacity(st, []int{0, 1, 2}, mem(0), moves); err != nil {
		t.Fatal(err)
	}
}

func TestParseMemory(t *testing.T) {
	m, err := ParseMemory("# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nused_memory_dataset:5000\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n")
	if err != nil || m.Used != 1<<20 || m.Dataset != 5000 || m.MaxMemory != 0 || m.Policy != "noeviction" {
		t.Fatalf("%+v %v", m, err)
	}
	if _, err := ParseMemory("used_memory:1\r\n"); err == nil {
		t.Fatal("no error without used_memory_dataset")
	}
}

// A spare replica is made an empty master only when the masters asked outnumber the kept
// nodes that are no replica, and only one whose master holds slots and keeps another
// replica: the data always stays in two copies.
func TestSpareReplicaToRelease(t *testing.T) {
	req := ScaleShape{Masters: 4, ReplicasPerMaster: 1, Keep: 8}
	for _, tt := range []struct {
		name string
		st   *ClusterState
		want int // member released, -1 for none
	}{
		// A scale-in set back: demo-6 gave its last slot to demo-0 and follows it, with demo-7.
		{"set back after the leaving master emptied", layout("m:0-5460", "r:0", "m:5461-10922", "r:2", "m:10923-16383", "r:4", "r:0", "r:0"), 7},
		{"enough masters already", layout("m:0-5460", "r:0", "m:5461-10922", "r:2", "m:10923-16383", "r:4", "m", "r:0"), -1},
		{"every master has a single replica", layout("m:0-5460", "r:0", "m:5461-10922", "r:2", "m:10923-16383", "r:4", "r:5", "r:6"), -1},
		{"a master without slots keeps its replicas", layout("m:0-8191", "r:0", "m:8192-16383", "r:2", "m", "r:4", "r:4", "r:4"), -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			act, ok := SpareReplicaToRelease(tt.st, req)
			switch {
			case tt.want < 0 && ok:
				t.Fatalf("released %s, want none", tt.st.Members[act.Member].Pod)
			case tt.want >= 0 && !ok:
				t.Fatalf("released none, want demo-%d", tt.want)
			case ok && act.Member != tt.want:
				t.Fatalf("released demo-%d, want demo-%d", act.Member, tt.want)
			}
		})
	}
}
