package topology

import (
	"fmt"
	"sort"
)

// PhaseReleasing: a spare replica is being turned into an empty master.
const PhaseReleasing = "ReleasingReplica"

// ScaleShape is what a resize asks of the topology: members[:Keep] stay (all of them on
// scale-out), members[Keep:] leave; the kept members end as Masters masters with
// ReplicasPerMaster replicas each. Assign is AssignReceive's entries, nil for AutoReceive;
// NewFrom is the first ordinal of the pods a scale-out adds.
type ScaleShape struct {
	Masters, ReplicasPerMaster int
	Keep                       int
	Assign                     []Assignment
	NewFrom                    int
}

// SpareReplicaToRelease finds, when the kept members have fewer nodes that are no replica
// than masters wanted, a replica to turn into an empty master: one whose master holds
// slots and keeps another replica, so its data stays in two copies. That is the case of a
// scale-in set back after a leaving master gave away its last slot: Redis made it a
// replica, and the larger size needs a master again. The replica of the master with the
// most replicas is taken, the highest member index on a tie. Nothing, when a node is
// flagged fail or pfail: Scale runs on an agreed, healthy cluster only.
func SpareReplicaToRelease(st *ClusterState, req ScaleShape) (Action, bool) {
	if req.Keep > len(st.Members) || !st.NoFailures() {
		return Action{}, false
	}
	kept := st.Members[:req.Keep]
	candidates := 0
	replicasOf := map[string][]int{}
	for i := range kept {
		self := kept[i].Self()
		if self == nil {
			return Action{}, false
		}
		if !self.Replica {
			candidates++
			continue
		}
		replicasOf[self.MasterID] = append(replicasOf[self.MasterID], i)
	}
	if candidates >= req.Masters {
		return Action{}, false
	}
	best, bestCount := -1, 1
	for i := range kept {
		self := kept[i].Self()
		reps := replicasOf[self.ID]
		if self.Replica || len(self.Slots) == 0 || len(reps) <= bestCount {
			continue
		}
		best, bestCount = reps[len(reps)-1], len(reps)
	}
	if best < 0 {
		return Action{}, false
	}
	return Action{Kind: ActionReleaseReplica, Member: best,
		Message: fmt.Sprintf("Made spare replica %s an empty master for the %d masters asked (its master keeps %d other replicas)",
			kept[best].Pod, req.Masters, bestCount-1)}, true
}

// KeptFormed reports whether the kept members alone hold every slot with their replicas.
func KeptFormed(st *ClusterState, req ScaleShape) bool {
	sub := &ClusterState{Members: st.Members[:req.Keep]}
	return sub.AllSlotsCovered() && sub.Masters() == req.Masters && sub.MastersHaveReplicas(req.ReplicasPerMaster)
}

// PlanScale is the moves left for the request, from one observation: none when the slot
// distribution matches the plan (the SlotsPlaced guard).
func PlanScale(st *ClusterState, req ScaleShape) ([]SlotMove, error) {
	p, err := PlanResize(st, req)
	return p.Moves, err
}

// ScalePlan is one observation's plan of a resize.
type ScalePlan struct {
	// Moves are the slot migrations left.
	Moves []SlotMove
	// Fresh are the kept members chosen as masters that hold no slot yet: the new masters
	// still to be filled. They get their replicas, in sync, before any slot moves to them.
	Fresh []int
	// ReplicaOf is replica → master (member indexes) for every kept member that is no
	// master, as AssignReplicas places them (another Kubernetes node where possible).
	ReplicaOf map[int]int
	// Empty are the kept masters holding no slot: the fresh ones and the ones to become
	// replicas. Each must hold no key before it is given slots or a master.
	Empty []int
}

// PlanResize chooses the masters after the resize (members holding slots stay masters;
// the others are picked by ChooseMasters, so every step picks the same ones), places the
// replicas, and plans the moves: PlanRebalance, or PlanAssign for AssignReceive.
func PlanResize(st *ClusterState, req ScaleShape) (ScalePlan, error) {
	var p ScalePlan
	if req.Keep > len(st.Members) || req.Keep < 0 {
		return p, fmt.Errorf("keep %d of %d members", req.Keep, len(st.Members))
	}
	fixed, leaving, replicas, empty, err := classifyMembers(st, req.Keep)
	if err != nil {
		return p, err
	}
	p.Empty = empty
	if len(fixed) > req.Masters {
		return p, fmt.Errorf("%d kept members hold slots but %d masters are wanted", len(fixed), req.Masters)
	}
	kept := memberList(&ClusterState{Members: st.Members[:req.Keep]})
	chosen := ChooseMasters(kept, fixed, replicas, req.Masters)
	if chosen == nil {
		return p, fmt.Errorf("%d kept members cannot make %d masters", req.Keep, req.Masters)
	}
	var keep []MasterSlots
	for _, i := range chosen {
		keep = append(keep, masterSlots(st, i))
		if len(st.Members[i].Self().Slots) == 0 {
			p.Fresh = append(p.Fresh, i)
		}
	}
	existing := map[int]int{}
	for r, m := range replicas {
		if m >= 0 {
			existing[r] = m
		}
	}
	p.ReplicaOf = AssignReplicas(kept, chosen, existing, req.ReplicasPerMaster)
	if req.Assign == nil || req.Keep < len(st.Members) {
		p.Moves = PlanRebalance(keep, leaving)
		return p, nil
	}
	newMasters, err := assignedMasters(st, req, fixed, p.Fresh)
	if err != nil {
		return p, err
	}
	p.Moves, err = PlanAssign(keep, newMasters, req.Assign)
	return p, err
}

// classifyMembers sorts the members of a resize keeping members[:keep]: the kept ones
// holding slots (fixed), the leaving ones holding slots (leaving), the kept replicas
// with their kept master (-1 for none), and the kept masters holding nothing (empty).
func classifyMembers(st *ClusterState, keep int) (fixed []int, leaving []MasterSlots, replicas map[int]int, empty []int, err error) {
	replicas = map[int]int{}
	index := map[string]int{}
	for i := range st.Members {
		self := st.Members[i].Self()
		if self == nil {
			return nil, nil, nil, nil, fmt.Errorf("member %s did not answer", st.Members[i].Pod)
		}
		index[self.ID] = i
	}
	for i := range st.Members {
		self := st.Members[i].Self()
		switch {
		case i >= keep:
			if len(self.Slots) > 0 {
				leaving = append(leaving, masterSlots(st, i))
			}
		case self.Replica:
			m, ok := index[self.MasterID]
			if !ok || m >= keep {
				m = -1 // a replica of no kept member: not a candidate master either
			}
			replicas[i] = m
		case len(self.Slots) > 0:
			fixed = append(fixed, i)
		default:
			empty = append(empty, i)
		}
	}
	return fixed, leaving, replicas, empty, nil
}

// assignedMasters lists the node IDs of the masters AssignReceive's entries are for, in
// order. Before the first slot moves, the fresh masters are exactly the added ones, and
// the entries must match them one to one. Once slots moved, a new master holds slots like
// an old one, and the new ones are the masters from ordinal NewFrom on.
func assignedMasters(st *ClusterState, req ScaleShape, fixed, fresh []int) ([]string, error) {
	if len(req.Assign) == 0 {
		return nil, checkAssignCount(0, nil)
	}
	var ids []string
	if len(fresh) > 0 && (len(fixed) == 0 || fixed[len(fixed)-1] < fresh[0]) {
		if len(req.Assign) != len(fresh) {
			return nil, assignErr(-1, "", "%d entries, but this scale-out adds %d masters (%s): give exactly one entry per master added",
				len(req.Assign), len(fresh), podList(st, fresh))
		}
		for _, i := range fresh {
			ids = append(ids, st.Members[i].ID())
		}
		return ids, nil
	}
	if req.NewFrom < 0 || req.NewFrom >= len(st.Members) {
		return nil, assignErr(-1, "", "%d entries do not fit a cluster of %d masters: give exactly one entry per master added",
			len(req.Assign), req.Masters)
	}
	all := append(append([]int{}, fixed...), fresh...)
	sort.Ints(all) // entry i is for the i-th master added, in ordinal order
	for _, i := range all {
		if i >= req.NewFrom {
			ids = append(ids, st.Members[i].ID())
		}
	}
	return ids, nil
}

func masterSlots(st *ClusterState, i int) MasterSlots {
	self := st.Members[i].Self()
	return MasterSlots{ID: self.ID, Name: st.Members[i].Pod, Slots: self.Slots}
}

func hasID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func AddrsByID(st *ClusterState) map[string]string {
	out := map[string]string{}
	for i := range st.Members {
		out[st.Members[i].ID()] = st.Members[i].Addr
	}
	return out
}

// OtherAddrs are the masters holding slots but the named ones: told the new owner at once.
func OtherAddrs(st *ClusterState, except ...string) []string {
	var out []string
	for i := range st.Members {
		self := st.Members[i].Self()
		if self.Master && len(self.Slots) > 0 && !hasID(except, self.ID) {
			out = append(out, st.Members[i].Addr)
		}
	}
	return out
}

// KnowsOnly reports whether no member knows a node that is not one of the members: the
// RemovedNodesForgotten guard.
func (s *ClusterState) KnowsOnly() bool {
	if !s.AllReachable() {
		return false
	}
	ids := map[string]bool{}
	for _, id := range s.IDs() {
		ids[id] = true
	}
	for i := range s.Members {
		for _, n := range s.Members[i].Nodes {
			if !ids[n.ID] {
				return false
			}
		}
	}
	return true
}
