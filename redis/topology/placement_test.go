package topology

import (
	"fmt"
	"reflect"
	"testing"
)

func onNodes(nodes ...string) []Member {
	out := make([]Member, len(nodes))
	for i, n := range nodes {
		out[i] = Member{Pod: fmt.Sprintf("demo-%d", i), K8sNode: n}
	}
	return out
}

func TestChooseMasters(t *testing.T) {
	tests := []struct {
		name     string
		members  []Member
		fixed    []int
		replicas map[int]int
		masters  int
		want     []int
	}{
		{"fresh, one per node", onNodes("a", "b", "c", "a", "b", "c"), nil, nil, 3, []int{0, 1, 2}},
		{"fresh, spread over nodes", onNodes("a", "a", "b", "b", "c", "c"), nil, nil, 3, []int{0, 2, 4}},
		{"all on one node", onNodes("a", "a", "a", "a", "a", "a"), nil, nil, 3, []int{0, 1, 2}},
		{"slot holders stay masters", onNodes("a", "b", "c", "a", "b", "c"), []int{4, 5}, nil, 3, []int{0, 4, 5}},
		{"replicas are not candidates", onNodes("a", "b", "c", "a", "b", "c"), nil, map[int]int{0: 3}, 3, []int{1, 2, 3}},
		{"not enough candidates", onNodes("a", "b", "c"), nil, map[int]int{0: 1, 2: 1}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ChooseMasters(tt.members, tt.fixed, tt.replicas, tt.masters)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAssignReplicas(t *testing.T) {
	tests := []struct {
		name     string
		members  []Member
		masters  []int
		existing map[int]int
		rpm      int
		want     map[int]int
	}{
		{"one per node: shifted so none shares a node", onNodes("a", "b", "c", "a", "b", "c"), []int{0, 1, 2}, nil, 1,
			map[int]int{3: 1, 4: 2, 5: 0}},
		{"redis-cli shape on distinct nodes", onNodes("a", "b", "c", "d", "e", "f"), []int{0, 1, 2}, nil, 1,
			map[int]int{3: 0, 4: 1, 5: 2}},
		{"all on one node", onNodes("a", "a", "a", "a", "a", "a"), []int{0, 1, 2}, nil, 1,
			map[int]int{3: 0, 4: 1, 5: 2}},
		{"two nodes", onNodes("a", "b", "a", "b", "a", "b"), []int{0, 1, 2}, nil, 1,
			map[int]int{3: 0, 4: 1, 5: 2}},
		{"existing link kept", onNodes("a", "b", "c", "a", "b", "c"), []int{0, 1, 2}, map[int]int{3: 1}, 1,
			map[int]int{3: 1, 4: 2, 5: 0}},
		{"two replicas each", onNodes("a", "b", "c", "a", "b", "c", "a", "b", "c"), []int{0, 1, 2}, nil, 2,
			map[int]int{3: 1, 4: 2, 5: 0, 6: 1, 7: 2, 8: 0}},
		{"extra member goes to the least served master", onNodes("a", "b", "c", "a", "b", "c", "a"), []int{0, 1, 2}, nil, 1,
			map[int]int{3: 1, 4: 2, 5: 0, 6: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AssignReplicas(tt.members, tt.masters, tt.existing, tt.rpm)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAssignReplicasAvoidsMasterNode checks the property on many layouts: when a layout
// allows every replica off its master's node, the assignment achieves it.
func TestAssignReplicasAvoidsMasterNode(t *testing.T) {
	layouts := [][]string{
		{"a", "b", "c", "a", "b", "c"}, {"a", "a", "b", "b", "c", "c"}, {"a", "b", "a", "b", "a", "b"},
		{"a", "a", "a", "b", "b", "b"}, {"a", "b", "c", "c", "b", "a"},
	}
	for _, l := range layouts {
		members := onNodes(l...)
		masters := ChooseMasters(members, nil, nil, 3)
		for r, m := range AssignReplicas(members, masters, nil, 1) {
			if members[r].K8sNode == members[m].K8sNode {
				t.Errorf("layout %v: masters %v, replica %d on the node of master %d", l, masters, r, m)
			}
		}
	}
}
