package topology

import (
	"strings"
	"testing"
)

const (
	idA = "07c37dfeb235213a872192d90877d0cd55635b91"
	idB = "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1"
	idC = "292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f"
	idD = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca"
)

// A reply in the shape of Redis 7: myself, replicas, fail, hostname, migration markers.
var sampleNodes = strings.Join([]string{
	idA + " 127.0.0.1:30004@31004,redis-3 slave " + idD + " 0 1426238317239 4 connected",
	idB + " 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922",
	idC + " 127.0.0.1:30003@31003 master,fail? - 1426238316000 1426238316232 3 disconnected 10923-16383 [10924-<-" + idB + "]",
	idD + " 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 [93->-" + idB + "] 5461",
}, "\n") + "\n"

func TestParseClusterNodes(t *testing.T) {
	nodes, err := ParseClusterNodes(sampleNodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 4 {
		t.Fatalf("got %d nodes", len(nodes))
	}
	a, b, c, d := nodes[0], nodes[1], nodes[2], nodes[3]
	checks := []struct {
		name string
		ok   bool
	}{
		{"replica flags", a.Replica && !a.Master && a.MasterID == idD && a.Role() == RoleSlave},
		{"hostname", a.Hostname == "redis-3" && a.Addr() == "127.0.0.1:30004" && a.BusPort == 31004},
		{"replica epoch", a.ConfigEpoch == 4 && a.PongRecv == 1426238317239 && len(a.Slots) == 0},
		{"master slots", b.Master && b.MasterID == "" && b.Slots.String() == "5461-10922"},
		{"pfail", c.PFail && !c.Fail && !c.Connected && c.PingSent == 1426238316000},
		{"importing", c.Importing[10924] == idB && c.Slots.String() == "10923-16383"},
		{"myself", d.Myself && d.Master && d.Connected && d.Role() == RoleMaster},
		{"migrating", d.Migrating[93] == idB && d.Slots.String() == "0-5461"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: wrong parse", c.name)
		}
	}
}

func TestParseClusterNodesForms(t *testing.T) {
	tests := []struct {
		name  string
		line  string
		check func(Node) bool
	}{
		{"fresh node without ip", idA + " :6379@16379 myself,master - 0 0 0 connected",
			func(n Node) bool { return n.IP == "" && n.Port == 6379 && n.Myself }},
		{"handshake", idA + " 127.0.0.1:7000@17000 handshake - 0 0 0 disconnected",
			func(n Node) bool { return n.Handshake && !n.Connected }},
		{"noaddr fail", idA + " :0@0 master,fail,noaddr - 1 2 3 disconnected",
			func(n Node) bool { return n.Fail && n.NoAddr && n.IP == "" }},
		{"nofailover", idA + " 10.0.0.1:6379@16379 slave,nofailover " + idB + " 0 1 2 connected",
			func(n Node) bool { return n.NoFailover && n.Replica }},
		{"noflags", idA + " 10.0.0.1:6379@16379 noflags - 0 0 0 connected",
			func(n Node) bool { return !n.Master && !n.Replica }},
		{"pre redis 4 address", idA + " 10.0.0.1:6379 master - 0 0 0 connected 0",
			func(n Node) bool { return n.BusPort == 0 && n.Slots.String() == "0" }},
		{"ipv6", idA + " ::1:6379@16379 master - 0 0 0 connected",
			func(n Node) bool { return n.IP == "::1" && n.Addr() == "[::1]:6379" }},
	}
	for _, tt := range tests {
		nodes, err := ParseClusterNodes(tt.line)
		if err != nil || len(nodes) != 1 || !tt.check(nodes[0]) {
			t.Errorf("%s: got %+v, %v", tt.name, nodes, err)
		}
	}
}

func TestParseClusterNodesRejects(t *testing.T) {
	bad := []string{
		"short line",
		"xyz 127.0.0.1:1@2 master - 0 0 0 connected",
		idA + " 127.0.0.1@2 master - 0 0 0 connected",
		idA + " 127.0.0.1:1@2 wizard - 0 0 0 connected",
		idA + " 127.0.0.1:1@2 master nope 0 0 0 connected",
		idA + " 127.0.0.1:1@2 master - x 0 0 connected",
		idA + " 127.0.0.1:1@2 master - 0 0 0 maybe",
		idA + " 127.0.0.1:1@2 master - 0 0 0 connected 16384",
		idA + " 127.0.0.1:1@2 master - 0 0 0 connected [5->-zz]",
		idA + " 127.0.0.1:1@2 master - 0 0 0 connected [5=" + idB + "]",
	}
	for _, line := range bad {
		if _, err := ParseClusterNodes(line); err == nil {
			t.Errorf("accepted %q", line)
		}
	}
}

// FuzzParseClusterNodes: no input panics, and whatever parses has slots in range and
// normalized ranges.
func FuzzParseClusterNodes(f *testing.F) {
	f.Add(sampleNodes)
	f.Add(idA + " :6379@16379 myself,master - 0 0 0 connected")
	f.Add(idA + " ::1:6379@16379,host master - 0 0 0 connected 0-1 [2-<-" + idB + "]")
	f.Fuzz(func(t *testing.T, text string) {
		nodes, err := ParseClusterNodes(text)
		if err != nil {
			return
		}
		for _, n := range nodes {
			if !n.Slots.Equal(n.Slots.Normalize()) || n.Slots.Count() > SlotCount {
				t.Fatalf("bad slots %v", n.Slots)
			}
			for _, r := range n.Slots {
				if r.Start < 0 || r.End >= SlotCount || r.Start > r.End {
					t.Fatalf("slot range out of bounds: %v", r)
				}
			}
			if !validNodeID(n.ID) {
				t.Fatalf("accepted bad id %q", n.ID)
			}
		}
	})
}
