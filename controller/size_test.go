package controller

import (
	"fmt"
	"testing"

	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// The node a pod deleted with an emptyDir leaves behind is not counted once its pod is
// back as a new node, so healing is not read as a resize; a node some member reaches is.
func TestReachableNodesLeavesOutUnreachableNonMembers(t *testing.T) {
	id := func(i int) string { return fmt.Sprintf("%040x", i) }
	state := func(extra redis.Node) *redis.ClusterState {
		st := &redis.ClusterState{}
		for i := 1; i <= 6; i++ {
			var view []redis.Node
			for j := 1; j <= 6; j++ {
				view = append(view, redis.Node{ID: id(j), Myself: i == j, Master: true, Connected: true})
			}
			view = append(view, extra)
			st.Members = append(st.Members, redis.MemberState{Member: redis.Member{Pod: fmt.Sprintf("demo-%d", i-1)}, Nodes: view})
		}
		return st
	}
	cases := map[string]struct {
		extra redis.Node
		want  int
	}{
		"a lost node just gone":         {redis.Node{ID: id(99), Replica: true}, 6},
		"a lost node flagged fail":      {redis.Node{ID: id(99), Replica: true, Fail: true}, 6},
		"a lost master holding slots":   {redis.Node{ID: id(99), Master: true, PFail: true, Slots: redis.SlotRanges{{Start: 0, End: 10}}}, 6},
		"a node outside the pods, live": {redis.Node{ID: id(99), Master: true, Connected: true}, 7},
		"a handshake":                   {redis.Node{ID: id(99), Handshake: true, Connected: true}, 6},
	}
	for name, c := range cases {
		if got := reachableNodes(state(c.extra)); got != c.want {
			t.Errorf("%s: %d nodes, want %d", name, got, c.want)
		}
	}
}
