package redis

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
