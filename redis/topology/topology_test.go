package topology

import (
	"fmt"
	"testing"
)

// The node a pod deleted with an emptyDir leaves behind is not counted once its pod is
// back as a new node, so healing is not read as a resize; a node some member reaches is.
func TestReachableNodesLeavesOutUnreachableNonMembers(t *testing.T) {
	id := func(i int) string { return fmt.Sprintf("%040x", i) }
	state := func(extra Node) *ClusterState {
		st := &ClusterState{}
		for i := 1; i <= 6; i++ {
			var view []Node
			for j := 1; j <= 6; j++ {
				view = append(view, Node{ID: id(j), Myself: i == j, Master: true, Connected: true, PongRecv: 2000})
			}
			view = append(view, extra)
			st.Members = append(st.Members, MemberState{Member: Member{Pod: fmt.Sprintf("demo-%d", i-1)}, Nodes: view})
		}
		return st
	}
	cases := map[string]struct {
		extra    Node
		answered bool // the node answered the operator with its ID
		want     int
	}{
		"a lost node just gone":         {Node{ID: id(99), Replica: true}, true, 6},
		"a lost node flagged fail":      {Node{ID: id(99), Replica: true, Fail: true}, true, 6},
		"a lost master holding slots":   {Node{ID: id(99), Master: true, PFail: true, Slots: SlotRanges{{Start: 0, End: 10}}}, true, 6},
		"a node outside the pods, live": {Node{ID: id(99), Master: true, Connected: true}, true, 7},
		// A pod's graceful stop: Redis reconnects at once and pings later, so for a few
		// seconds its node reads connected everywhere with no ping outstanding. Only the
		// operator's own probe tells it is gone.
		"a node just stopped, live in every view": {Node{ID: id(99), Replica: true, Connected: true}, false, 6},
		"a handshake": {Node{ID: id(99), Handshake: true, Connected: true}, true, 6},
		// Gone without a reset: connected, not yet flagged, its ping unanswered while another
		// node answered since.
		"a node whose ping is unanswered": {Node{ID: id(99), Master: true, Connected: true, PingSent: 1000}, true, 6},
		"a live node, ping in flight":     {Node{ID: id(99), Master: true, Connected: true, PingSent: 3000, PongRecv: 1500}, true, 7},
	}
	for name, c := range cases {
		st := state(c.extra)
		st.Answered = map[string]bool{id(99): c.answered}
		if got := st.ReachableNodes(); got != c.want {
			t.Errorf("%s: %d nodes, want %d", name, got, c.want)
		}
	}
	// A dead node Redis is reconnecting to reads connected in one view for a moment; the
	// others see it disconnected. A pod evicted and back empty was read as a resize that way.
	st := state(Node{ID: id(99), Replica: true})
	st.Answered = map[string]bool{id(99): true}
	st.Members[2].Nodes[6].Connected = true
	if got := st.ReachableNodes(); got != 6 {
		t.Errorf("a dead node connected in one view of six: %d nodes, want 6", got)
	}
}

// sixNodes is a formed view of three masters (ids 1-3) and their replicas (ids 4-6, of
// masters 1-3), as every member sees it; member i is node i+1.
func sixNodes() *ClusterState {
	id := func(i int) string { return fmt.Sprintf("%040x", i) }
	st := &ClusterState{}
	for i := 1; i <= 6; i++ {
		var view []Node
		for j := 1; j <= 6; j++ {
			n := Node{ID: id(j), Myself: i == j, Connected: true, Master: j <= 3}
			if j > 3 {
				n.Replica, n.MasterID = true, id(j-3)
			}
			view = append(view, n)
		}
		st.Members = append(st.Members, MemberState{Member: Member{Pod: fmt.Sprintf("demo-%d", i-1)}, Nodes: view, Info: ClusterInfo{State: "ok"}})
	}
	return st
}

func TestMemberByIDAndReplicasAndMasters(t *testing.T) {
	st := sixNodes()
	if m := st.MemberByID(fmt.Sprintf("%040x", 2)); m == nil || m.Pod != "demo-1" {
		t.Errorf("MemberByID(2) = %v, want demo-1", m)
	}
	if m := st.MemberByID("nobody"); m != nil {
		t.Errorf("MemberByID(nobody) = %s, want nil", m.Pod)
	}
	pairs := st.ReplicasAndMasters()
	if len(pairs) != 3 {
		t.Fatalf("%d replica/master pairs, want 3", len(pairs))
	}
	for i, p := range pairs {
		if p.Replica.Pod != fmt.Sprintf("demo-%d", i+3) || p.Master == nil || p.Master.Pod != fmt.Sprintf("demo-%d", i) {
			t.Errorf("pair %d: %+v", i, p)
		}
	}
	st.Members = st.Members[1:] // master demo-0 does not answer
	if p := st.ReplicasAndMasters()[0]; p.Replica.Pod != "demo-3" || p.Master != nil {
		t.Errorf("replica of an absent master: %+v, want no master", p)
	}
}

func TestReplicaLinksUp(t *testing.T) {
	if !sixNodes().ReplicaLinksUp() {
		t.Error("a formed cluster's replica links read as down")
	}
	for name, edit := range map[string]func(n *Node){
		"disconnected": func(n *Node) { n.Connected = false },
		"pfail":        func(n *Node) { n.PFail = true },
		"fail":         func(n *Node) { n.Fail = true },
	} {
		st := sixNodes()
		edit(&st.Members[4].Nodes[1]) // demo-4 sees its master, node 2
		if st.ReplicaLinksUp() {
			t.Errorf("%s master link read as up", name)
		}
	}
}

func TestAllSeeMaster(t *testing.T) {
	st := sixNodes()
	if !st.AllSeeMaster(fmt.Sprintf("%040x", 1)) || st.AllSeeMaster(fmt.Sprintf("%040x", 4)) {
		t.Error("roles misread")
	}
	// One member still sees node 4 as a replica while the others call it master: not yet.
	for i := range st.Members {
		if i == 5 {
			continue
		}
		n := &st.Members[i].Nodes[3]
		n.Replica, n.Master, n.MasterID = false, true, ""
	}
	if st.AllSeeMaster(fmt.Sprintf("%040x", 4)) {
		t.Error("a failover half seen read as done")
	}
	var none *ClusterState
	if none.AllSeeMaster("x") {
		t.Error("no observation read as swapped")
	}
}

func TestKnownSize(t *testing.T) {
	st := sixNodes()
	st.Members[0].Err = fmt.Errorf("timeout")
	st.Members[1].Nodes = append(st.Members[1].Nodes, Node{ID: "h", Handshake: true})
	if n, ok := st.KnownSize(); !ok || n != 6 {
		t.Errorf("KnownSize = %d, %v; want 6 from demo-1's view, the handshake left out", n, ok)
	}
	alone := &ClusterState{Members: []MemberState{{Nodes: []Node{{ID: "a", Myself: true}}}}}
	if n, ok := alone.KnownSize(); !ok || n != 1 {
		t.Errorf("one member alone: %d, %v", n, ok)
	}
	fresh := &ClusterState{Members: []MemberState{{Nodes: []Node{{ID: "a", Myself: true}}}, {Nodes: []Node{{ID: "b", Myself: true}}}}}
	if _, ok := fresh.KnownSize(); ok {
		t.Error("members that know nobody gave a size")
	}
}

func TestSlotsHeldAt(t *testing.T) {
	st := sixNodes()
	for i := range st.Members {
		for j := range st.Members[i].Nodes {
			n := &st.Members[i].Nodes[j]
			n.IP, n.Port = fmt.Sprintf("10.0.0.%d", j+1), 6379
		}
	}
	// demo-1 still sees node 1 with its old, larger range; the largest view counts.
	st.Members[0].Nodes[0].Slots = SlotRanges{{Start: 0, End: 99}}
	st.Members[1].Nodes[0].Slots = SlotRanges{{Start: 0, End: 5460}}
	if got := st.SlotsHeldAt("10.0.0.1", 6379); got.Count() != 5461 {
		t.Errorf("SlotsHeldAt(node 1) = %s, want 0-5460", got)
	}
	if got := st.SlotsHeldAt("10.0.0.4", 6379); got.Count() != 0 {
		t.Errorf("a replica holds %s", got)
	}
	if got := st.SlotsHeldAt("10.0.0.1", 6380); got.Count() != 0 {
		t.Errorf("another port holds %s", got)
	}
}

func TestMastersWithoutReplica(t *testing.T) {
	st := sixNodes()
	for i := range st.Members[:3] {
		st.Members[i].Self().Slots = SlotRanges{{Start: i, End: i}}
	}
	if got := st.MastersWithoutReplica(); len(got) != 0 {
		t.Errorf("formed cluster: masters without replica %v, want none", got)
	}
	st.Members = append(st.Members[:4], st.Members[5:]...) // demo-4, replica of demo-1, gone
	if got := st.MastersWithoutReplica(); len(got) != 1 || got[0] != "demo-1" {
		t.Errorf("replica demo-4 gone: masters without replica %v, want [demo-1]", got)
	}
}

// A master whose pod is going is no member; the others still see it with its slots, and
// its replica among the members is the one to hand over to.
func TestReplicasOfMasterAt(t *testing.T) {
	st := sixNodes()
	for i := range st.Members {
		for j := range st.Members[i].Nodes {
			n := &st.Members[i].Nodes[j]
			n.IP, n.Port = fmt.Sprintf("10.0.0.%d", j+1), 6379
			if j == 0 {
				n.Slots = SlotRanges{{Start: 0, End: 5460}}
			}
		}
	}
	st.Members = st.Members[1:] // demo-0, master of node 4 (demo-3), is terminating
	id, replicas := st.ReplicasOfMasterAt("10.0.0.1", 6379)
	if id != fmt.Sprintf("%040x", 1) || len(replicas) != 1 || replicas[0].Pod != "demo-3" {
		t.Errorf("ReplicasOfMasterAt(node 1) = %q, %v; want node 1 and demo-3", id, replicas)
	}
	// A master without slots (an emptied one) and a replica's address hand nothing over.
	for _, addr := range []string{"10.0.0.2", "10.0.0.4"} {
		if id, replicas := st.ReplicasOfMasterAt(addr, 6379); id != "" || replicas != nil {
			t.Errorf("ReplicasOfMasterAt(%s) = %q, %v; want nothing", addr, id, replicas)
		}
	}
}

// A replica's own markers are not open slots: on Valkey 8 and later a replica can keep a
// copy of an IMPORTING its master has closed (the copy of the STABLE never arrived), and
// counting it held a resize in FinishingOpenSlots for ever. A master's markers are.
func TestOpenSlotsAreMastersOnly(t *testing.T) {
	st := sixNodes()
	if !st.NoOpenSlots() || st.OpenSlots() != 0 {
		t.Fatalf("a formed view: open %d", st.OpenSlots())
	}
	replica := &st.Members[4].Nodes[4] // demo-4's own line: replica of node 2
	replica.Importing = map[int]string{5397: fmt.Sprintf("%040x", 1)}
	if !st.NoOpenSlots() || st.OpenSlots() != 0 {
		t.Errorf("a replica's stale IMPORTING counted: open %d", st.OpenSlots())
	}
	master := &st.Members[1].Nodes[1] // demo-1's own line: master node 2
	master.Importing = map[int]string{5397: fmt.Sprintf("%040x", 1)}
	if st.NoOpenSlots() || st.OpenSlots() != 1 {
		t.Errorf("a master's IMPORTING not counted: open %d", st.OpenSlots())
	}
}

// TestKeySlotMatchesRedis: slots CLUSTER KEYSLOT gives (Redis 7.0), hash tags included,
// and the bytes form agrees with the string form.
func TestKeySlotMatchesRedis(t *testing.T) {
	for key, want := range map[string]int{
		"foo": 12182, "bar": 5061, "hello": 866, "k:0": 14231, "{user1000}.following": 3443,
		"{user1000}.followers": 3443, "{}foo": 9500, "foo{}{bar}": 8363, "foo{{bar}}zap": 4015,
		"foo{bar}{zap}": 5061, "": 0,
	} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
		if got := KeySlotBytes([]byte(key)); got != want {
			t.Errorf("KeySlotBytes(%q) = %d, want %d", key, got, want)
		}
	}
}
