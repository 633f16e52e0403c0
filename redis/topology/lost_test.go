package topology

import "testing"

func TestLostSlots(t *testing.T) {
	master := func(id, slots string, fail bool) Node {
		rs, err := ParseSlotRanges(slots)
		if err != nil {
			t.Fatal(err)
		}
		return Node{ID: id, Master: true, Fail: fail, Slots: rs}
	}
	replica := func(id, of string, fail bool) Node { return Node{ID: id, Replica: true, MasterID: of, Fail: fail} }
	cases := []struct {
		name string
		view []Node
		want string
	}{
		{"healthy", []Node{master("a", "0-8191", false), master("b", "8192-16383", false)}, ""},
		{"unassigned slots", []Node{master("a", "0-8191", false), master("b", "8192-16000", false)}, "16001-16383"},
		{"failed master with a live replica", []Node{master("a", "0-8191", true), replica("r", "a", false), master("b", "8192-16383", false)}, ""},
		{"failed master whose replica failed too", []Node{master("a", "0-8191", true), replica("r", "a", true), master("b", "8192-16383", false)}, "0-8191"},
		{"failed master without replica", []Node{master("a", "0-8191", true), master("b", "8192-16383", false)}, "0-8191"},
		{"pfail is not lost", []Node{{ID: "a", Master: true, PFail: true, Slots: SlotRanges{{0, 8191}}}, master("b", "8192-16383", false)}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := lostSlots(c.view).String(); got != c.want {
				t.Fatalf("lostSlots = %q, want %q", got, c.want)
			}
		})
	}
	if got := (&ClusterState{}).LostSlots(); len(got) != 0 {
		t.Fatalf("no reachable member: LostSlots = %v, want none", got)
	}
}

// A node healing has just met knows every node from gossip before their slot claims reach
// it. Its view, the widest, claims nothing: that is not lost slots while the members that
// know the cluster see every slot served.
func TestLostSlotsNeedsEveryView(t *testing.T) {
	rs := func(s string) SlotRanges {
		r, err := ParseSlotRanges(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	settled := []Node{
		{ID: "a", Master: true, Myself: true, Slots: rs("0-8191")},
		{ID: "b", Master: true, Slots: rs("8192-16383")},
		{ID: "r", Replica: true, MasterID: "a", Fail: true},
	}
	fresh := []Node{
		{ID: "a", Master: true}, {ID: "b", Master: true},
		{ID: "r", Replica: true, MasterID: "a", Fail: true},
		{ID: "n", Master: true, Myself: true},
	}
	st := &ClusterState{Members: []MemberState{{Nodes: settled}, {Nodes: fresh}}}
	if got := st.LostSlots(); len(got) != 0 {
		t.Fatalf("a just-met node's empty view: LostSlots = %v, want none", got)
	}
	// Every view sees b failed with no replica: lost.
	bFailed := func(self string) []Node {
		return []Node{
			{ID: "a", Master: true, Myself: self == "a", Slots: rs("0-8191")},
			{ID: "b", Master: true, Fail: true, Slots: rs("8192-16383")},
			{ID: "n", Replica: true, MasterID: "a", Myself: self == "n"},
		}
	}
	st = &ClusterState{Members: []MemberState{
		{Nodes: bFailed("a")}, {Nodes: bFailed("n")},
		{Nodes: []Node{{ID: "x", Master: true, Myself: true}}}, // an empty pod not yet met
	}}
	if got := st.LostSlots().String(); got != "8192-16383" {
		t.Fatalf("a master failed in every view: LostSlots = %q, want 8192-16383", got)
	}
}
