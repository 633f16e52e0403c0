package framework

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// clusterNodes is the CLUSTER NODES text of a formed 3-master cluster (ids a…, b…, c…,
// replicas d…, e…, f… of them) as node self sees it; extra is appended to self's line
// (a "[slot-<-id]" marker).
func clusterNodes(self, extra string, slots map[string]string) string {
	masters := map[string]string{"d": "a", "e": "b", "f": "c"}
	var b strings.Builder
	for i, n := range []string{"a", "b", "c", "d", "e", "f"} {
		id, flags, master, own := strings.Repeat(n, 40), "master", "-", ""
		if m, ok := masters[n]; ok {
			flags, master = "slave", strings.Repeat(m, 40)
		} else {
			own = " " + slots[n]
		}
		if n == self {
			flags = "myself," + flags
			own += extra
		}
		fmt.Fprintf(&b, "%s 10.0.0.%d:6379@16379 %s %s 0 0 1 connected%s\n", id, i+1, flags, master, own)
	}
	return b.String()
}

// view parses every node's CLUSTER NODES, with extra on node marked's own line.
func view(t *testing.T, marked, extra string, slots map[string]string) *topology.ClusterState {
	t.Helper()
	st := &topology.ClusterState{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		text := clusterNodes(n, map[bool]string{true: extra}[n == marked], slots)
		nodes, err := topology.ParseClusterNodes(text)
		if err != nil {
			t.Fatalf("%s: %v\n%s", n, err, text)
		}
		st.Members = append(st.Members, topology.MemberState{Member: topology.Member{Pod: "demo-" + n, Addr: "demo-" + n}, Nodes: nodes})
	}
	return st
}

// TestIntegrityCountsMastersMarkersOnly: a replica's stale IMPORTING marker (a copy of
// CLUSTER SETSLOT Valkey 8 sent it, whose closing copy went missing) passes the
// integrity checks, as it does the operator's; a master's fails them, as do a slot
// owned twice or by no one.
func TestIntegrityCountsMastersMarkersOnly(t *testing.T) {
	formed := map[string]string{"a": "0-5460", "b": "5461-10922", "c": "10923-16383"}
	importing := " [5461-<-" + strings.Repeat("a", 40) + "]"
	for _, tc := range []struct {
		name, marked, extra string
		slots               map[string]string
		want                string // "" passes; else in the error
	}{
		{"formed", "", "", formed, ""},
		{"a replica's stale importing", "e", importing, formed, ""},
		{"a replica's stale migrating", "d", " [100->-" + strings.Repeat("b", 40) + "]", formed, ""},
		{"a master's importing", "b", importing, formed, "master demo-b: migrating map[], importing map[5461:" + strings.Repeat("a", 40) + "]"},
		{"a slot owned twice", "", "", map[string]string{"a": "0-5461", "b": "5461-10922", "c": "10923-16383"}, "slot 5461 is claimed by both demo-a and demo-b"},
		{"a slot owned by none", "", "", map[string]string{"a": "0-5459", "b": "5461-10922", "c": "10923-16383"}, "own 16383 of 16384 slots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			masters, err := slotIntegrity(view(t, tc.marked, tc.extra, tc.slots))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want == "" && len(masters) != 3:
				t.Errorf("%d masters, want 3", len(masters))
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
