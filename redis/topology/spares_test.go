package topology

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// all is the set of the given replicas, as synced.
func all(idx ...int) map[int]bool {
	out := map[int]bool{}
	for _, i := range idx {
		out[i] = true
	}
	return out
}

// Masters 0, 1, 2 serve slots; the rest are replicas (links). A move goes only from a
// master holding more than the quota (and two at least) to one holding fewer, and only
// while the giver keeps a replica in sync.
func TestPlanSpareMoves(t *testing.T) {
	serving := []int{0, 1, 2}
	tests := []struct {
		name    string
		members []Member
		links   map[int]int
		synced  map[int]bool
		rpm     int
		want    map[int]int
	}{
		{"the new master's replica went to an old master", onNodes("a", "b", "c", "b", "c", "a"),
			map[int]int{3: 0, 4: 1, 5: 0}, all(3, 4, 5), 1, map[int]int{5: 2}},
		{"healthy: nothing", onNodes("a", "b", "c", "b", "c", "a"),
			map[int]int{3: 0, 4: 1, 5: 2}, all(3, 4, 5), 1, nil},
		{"an extra member stays where it is: no master lacks one", onNodes("a", "b", "c", "b", "c", "a", "b"),
			map[int]int{3: 0, 4: 1, 5: 2, 6: 0}, all(3, 4, 5, 6), 1, nil},
		{"the only replica of a master is never taken", onNodes("a", "b", "c", "b", "c"),
			map[int]int{3: 0, 4: 1}, all(3, 4), 1, nil},
		{"no replica wanted: nothing", onNodes("a", "b", "c", "b", "c", "a"),
			map[int]int{3: 0, 5: 0}, all(3, 5), 0, nil},
		{"one on another node than the new master first, then the worst placed", onNodes("a", "b", "c", "c", "b", "a", "c"),
			map[int]int{3: 0, 4: 1, 6: 0, 5: 1}, all(3, 4, 5, 6), 1, map[int]int{4: 2}},
		{"the one not in sync first, among equals", onNodes("a", "b", "c", "b", "c", "b"),
			map[int]int{3: 0, 4: 1, 5: 0}, all(5, 4), 1, map[int]int{3: 2}},
		{"the giver keeps its replica in sync", onNodes("a", "b", "c", "b", "c", "a"),
			map[int]int{3: 0, 4: 1, 5: 0}, all(3, 4), 1, map[int]int{5: 2}},
		{"no replica of the giver in sync: wait", onNodes("a", "b", "c", "b", "c", "a"),
			map[int]int{3: 0, 4: 1, 5: 0}, all(4), 1, nil},
		{"one on its master's node is the worst placed, among equals", onNodes("a", "b", "c", "b", "c", "a"),
			map[int]int{3: 0, 4: 1, 5: 0}, all(3, 4, 5), 1, map[int]int{5: 2}},
		{"one short, a giver with two to spare: its worst placed goes", onNodes("a", "b", "c", "b", "c", "a", "b"),
			map[int]int{3: 0, 4: 0, 5: 0, 6: 2}, all(3, 4, 5, 6), 1, map[int]int{5: 1}},
		{"two short, one giver of three", onNodes("a", "b", "c", "b", "c", "a"),
			map[int]int{3: 0, 4: 0, 5: 0}, all(3, 4, 5), 1, map[int]int{5: 1, 3: 2}},
		{"two replicas each wanted, a giver of three", onNodes("a", "b", "c", "b", "c", "a", "b", "c", "a"),
			map[int]int{3: 0, 4: 0, 5: 0, 6: 1, 7: 1, 8: 2}, all(3, 4, 5, 6, 7, 8), 2, map[int]int{5: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanSpareMoves(tt.members, serving, tt.links, tt.synced, tt.rpm)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// After a move, the masters hold the quota: planning again moves nothing back.
func TestPlanSpareMovesSettles(t *testing.T) {
	members := onNodes("a", "b", "c", "b", "c", "a", "a")
	links := map[int]int{3: 0, 4: 1, 5: 0, 6: 0}
	synced := all(3, 4, 5, 6)
	for round := 0; round < 3; round++ {
		moves := PlanSpareMoves(members, []int{0, 1, 2}, links, synced, 1)
		if round > 0 && len(moves) > 0 {
			t.Fatalf("round %d moved again: %v (links %v)", round, moves, links)
		}
		for r, m := range moves {
			links[r] = m
		}
	}
	if want := map[int]int{3: 0, 4: 1, 5: 0, 6: 2}; !reflect.DeepEqual(links, want) {
		t.Errorf("settled as %v, want %v", links, want)
	}
}

// PlanHeal on a formed cluster whose server moved demo-5 (demo-2's only replica) to demo-0:
// it reads the replication of demo-0's replicas, then moves one back to demo-2. Before
// the spare replicas were planned, healing made nothing and the cluster stayed unformed.
func TestPlanHealMovesASpareReplica(t *testing.T) {
	st := formedState()
	for j := range st.Members {
		st.Members[j].Find(fmt.Sprintf("%040x", 6)).MasterID = fmt.Sprintf("%040x", 1)
	}
	p := PlanHeal(st, 3, 1, nil)
	if len(p.Actions) != 0 || !reflect.DeepEqual(p.NeedReplication, []int{3, 5}) {
		t.Fatalf("want the replication of demo-3 and demo-5 asked first; got %s, need %v", Messages(p.Actions), p.NeedReplication)
	}
	for _, i := range []int{3, 5} {
		st.Members[i].Repl = &Replication{Role: "slave", LinkUp: true}
	}
	p = PlanHeal(st, 3, 1, nil)
	want := "Made demo-5 a replica of demo-2, which has fewer than 1 replicas (from demo-0, which keeps 1)"
	if got := Messages(p.Actions); got != want || p.Phase != PhaseReplicating || p.Done {
		t.Fatalf("got %s (%s, done %v)\nwant %s", got, p.Phase, p.Done, want)
	}
	if a := p.Actions[0]; a.Kind != ActionReplicate || a.Member != 5 || a.Target != 2 || a.MasterID != fmt.Sprintf("%040x", 3) {
		t.Errorf("action %+v", a)
	}
	st.Members[3].Repl.LinkUp = false // its copy is no copy yet: it goes, demo-5 stays
	if p = PlanHeal(st, 3, 1, nil); !strings.HasPrefix(Messages(p.Actions), "Made demo-3 a replica of demo-2") {
		t.Errorf("got %s", Messages(p.Actions))
	}
	st.Members[5].Repl.Syncing = true // demo-0 has no replica in sync: it keeps both
	if p = PlanHeal(st, 3, 1, nil); len(p.Actions) != 0 || p.Done {
		t.Errorf("moved a replica off a master with none in sync: %s", Messages(p.Actions))
	}
}
