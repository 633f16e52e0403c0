package topology

// SlotReceivers are the node IDs that take slots: the targets of moves, and the nodes a
// slot is open towards (a master's IMPORTING marker, or the target of its MIGRATING one).
func SlotReceivers(st *ClusterState, moves []SlotMove) map[string]bool {
	out := map[string]bool{}
	for _, m := range moves {
		out[m.To] = true
	}
	for i := range st.Members {
		self := st.Members[i].Self()
		if self == nil || !self.Master {
			continue
		}
		if len(self.Importing) > 0 {
			out[self.ID] = true
		}
		for _, to := range self.Migrating {
			out[to] = true
		}
	}
	return out
}

// ReplicasOf are the indexes of members[:keep] that replicate one of the nodes ids.
func ReplicasOf(st *ClusterState, keep int, ids map[string]bool) []int {
	var out []int
	for i := range st.Members[:min(keep, len(st.Members))] {
		if self := st.Members[i].Self(); self != nil && self.Replica && ids[self.MasterID] {
			out = append(out, i)
		}
	}
	return out
}
