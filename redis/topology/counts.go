package topology

// Counts of the observed cluster that the operator exports as metrics
// (controller/metrics.go, docs/metrics.md). Each is read from what the reachable members
// say of themselves, like the guards.

// SlotsCovered is how many of the 16384 slots a reachable member claims.
func (s *ClusterState) SlotsCovered() int { return s.ClaimedSlots().Count() }

// OpenSlots is how many slots some reachable master has migrating or importing (a
// replica's markers do not count: NoOpenSlots).
func (s *ClusterState) OpenSlots() int {
	open := map[int]bool{}
	for i := range s.Members {
		self := s.Members[i].Self()
		if self == nil || !self.Master {
			continue
		}
		for slot := range self.Migrating {
			open[slot] = true
		}
		for slot := range self.Importing {
			open[slot] = true
		}
	}
	return len(open)
}

// ReadyReplicas counts the replica members that follow a master holding slots and that
// every other member sees connected and not failing.
func (s *ClusterState) ReadyReplicas() int {
	n := 0
	for _, f := range s.Facts() {
		if f.Role == RoleSlave && f.Connected && !f.Failed && s.holdsSlots(f.MasterNodeID) {
			n++
		}
	}
	return n
}

// holdsSlots reports whether the member with node ID id is a master holding slots.
func (s *ClusterState) holdsSlots(id string) bool {
	m := s.MemberByID(id)
	if m == nil {
		return false
	}
	self := m.Self()
	return self != nil && self.Master && len(self.Slots) > 0
}
