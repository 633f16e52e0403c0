package topology

import (
	"fmt"
)

// What bootstrap checks before it claims anything (PlanBootstrap refuses when one fails):
// the shape asked for, slot owners that are not members, a cluster formed before.

// checkShape refuses a shape the members cannot form.
func checkShape(st *ClusterState, masters, replicasPerMaster int) error {
	if masters < 1 || replicasPerMaster < 0 {
		return fmt.Errorf("want at least 1 master and 0 replicas per master, got %d and %d", masters, replicasPerMaster)
	}
	if need := masters * (1 + replicasPerMaster); len(st.Members) < need {
		return fmt.Errorf("%d masters with %d replicas each need %d members, have %d",
			masters, replicasPerMaster, need, len(st.Members))
	}
	return nil
}

// checkSlotOwners refuses when a member's view has a node outside the members holding
// slots: those slots' keys are on no pod of this cluster (the member belongs to another
// cluster, or the pod that held them came back without its data), and claiming the member
// would serve or drop them wrongly. Two members claiming the same slot are refused too,
// unless they were in one cluster before (one knows the other's node ID): that is a member
// back with an old copy of its data, and Redis gives the slot to the higher config epoch,
// the current owner, once they talk.
func checkSlotOwners(st *ClusterState) error {
	isMember := map[string]bool{}
	for _, id := range st.IDs() {
		isMember[id] = true
	}
	for i := range st.Members {
		m := &st.Members[i]
		self := m.Self()
		for j := 0; j < i; j++ {
			if both := st.Members[j].Self().Slots.Intersect(self.Slots); len(both) > 0 && !related(st, i, j) {
				return fmt.Errorf("slots %s are claimed by both %s and %s, which were never in one cluster", both, st.Members[j].Pod, m.Pod)
			}
		}
		for _, n := range m.Nodes {
			if !isMember[n.ID] && !n.Handshake && len(n.Slots) > 0 {
				return fmt.Errorf("pod %s knows node %s (%s) outside this cluster holding slots %s: no pod of this cluster is that node "+
					"(another cluster's data, or a pod back without its data), so its keys are not here to serve",
					m.Pod, n.ID, n.Addr(), n.Slots)
			}
		}
	}
	return nil
}

// related reports whether members i and j were in one cluster: either knows the other's
// node ID. Node IDs are random 160-bit names, so two clusters never share one.
func related(st *ClusterState, i, j int) bool {
	ids := st.IDs()
	known := func(a, b int) bool {
		n := st.Members[a].Find(ids[b])
		return n != nil && !n.Handshake
	}
	return known(i, j) || known(j, i)
}

// formedBefore reports whether the members' own nodes.conf describe a cluster they formed
// before (a CR deleted and applied again over kept data, say): between them they claim
// every slot, and some member sees another where it is not now (an old address, flagged
// fail or noaddr while it answers), sees a node no member is (a member's earlier life,
// whose data did not come back), or two members claim one slot. A fresh bootstrap, even
// interrupted, never looks like that: its nodes learn each other only at their current
// addresses, and its slots go out once, to distinct members.
func formedBefore(st *ClusterState) bool {
	if st.ClaimedSlots().Count() != SlotCount {
		return false
	}
	if len(conflicts(st)) > 0 {
		return true
	}
	isMember := map[string]bool{}
	for _, id := range st.IDs() {
		isMember[id] = true
	}
	addr := map[string]string{}
	for i := range st.Members {
		addr[st.Members[i].ID()] = st.Members[i].Addr
	}
	for i := range st.Members {
		for _, n := range st.Members[i].Nodes {
			switch {
			case n.Myself || n.Handshake:
			case !isMember[n.ID], n.Addr() != addr[n.ID], n.Fail, n.NoAddr:
				return true
			}
		}
	}
	return false
}

// conflicts lists the pairs of members claiming a slot in common.
func conflicts(st *ClusterState) [][2]int {
	var out [][2]int
	for i := range st.Members {
		for j := 0; j < i; j++ {
			if len(st.Members[j].Self().Slots.Intersect(st.Members[i].Self().Slots)) > 0 {
				out = append(out, [2]int{j, i})
			}
		}
	}
	return out
}
