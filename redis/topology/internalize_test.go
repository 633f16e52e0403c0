package topology

import "testing"

// A node announcing its external address (spec.externalAccess, NodePort) is seen at its
// pod address by the planners, with what it showed kept; a stale address is left as shown.
func TestInternalize(t *testing.T) {
	nodes, err := ParseClusterNodes("" +
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 198.18.0.11:31000@31001 myself,master - 0 0 1 connected 0-5460\n" +
		"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb 198.18.0.12:31002@31003 master - 0 0 2 connected 5461-10922\n" +
		"cccccccccccccccccccccccccccccccccccccccc 198.18.0.11:31004@31005 master - 0 0 3 connected 10923-16383\n")
	if err != nil {
		t.Fatal(err)
	}
	members := []Member{
		{Pod: "a-0", Addr: "198.19.1.2:6379", External: "198.18.0.11:31000"},
		{Pod: "a-1", Addr: "198.19.2.2:6379", External: "198.18.0.12:31002"},
		{Pod: "a-2", Addr: "198.19.3.2:6379", External: "198.18.0.13:31004"}, // moved: 0.11 is stale
	}
	st := &ClusterState{Members: []MemberState{{Member: members[0], Nodes: nodes}}}
	st.Internalize(Aliases(members))
	got := st.Members[0].Nodes
	if got[0].Addr() != "198.19.1.2:6379" || got[0].Announced != "198.18.0.11:31000" {
		t.Errorf("self: got %s announced %q", got[0].Addr(), got[0].Announced)
	}
	if got[1].Addr() != "198.19.2.2:6379" {
		t.Errorf("peer: got %s", got[1].Addr())
	}
	if got[2].Addr() != "198.18.0.11:31004" || got[2].Announced != "" {
		t.Errorf("stale: got %s announced %q", got[2].Addr(), got[2].Announced)
	}
	if len(st.SlotsHeldAt("198.19.2.2", 6379)) == 0 {
		t.Error("SlotsHeldAt does not find the master at its pod address")
	}
}
