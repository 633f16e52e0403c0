package topology

import "sort"

// The predicates below are the guards of the phase machine. Each is false when any member
// is unreachable, because a guard must never pass on a partial view.

// AllReachable reports whether every member answered.
func (s *ClusterState) AllReachable() bool {
	for i := range s.Members {
		if !s.Members[i].Reachable() || s.Members[i].Self() == nil {
			return false
		}
	}
	return len(s.Members) > 0
}

// Unreachable lists the pods that did not answer.
func (s *ClusterState) Unreachable() []string {
	var out []string
	for i := range s.Members {
		if !s.Members[i].Reachable() || s.Members[i].Self() == nil {
			out = append(out, s.Members[i].Pod)
		}
	}
	return out
}

// IDs are the members' node IDs in member order ("" for an unreachable one).
func (s *ClusterState) IDs() []string {
	out := make([]string, len(s.Members))
	for i := range s.Members {
		out[i] = s.Members[i].ID()
	}
	return out
}

// knows reports whether m sees the node id as a finished handshake with an address.
func knows(m *MemberState, id string) bool {
	n := m.Find(id)
	return n != nil && !n.Handshake && !n.NoAddr
}

// AllMet reports whether every member knows every other member, none of them still in
// handshake or without an address.
func (s *ClusterState) AllMet() bool {
	if !s.AllReachable() {
		return false
	}
	ids := s.IDs()
	for i := range s.Members {
		for _, id := range ids {
			if !knows(&s.Members[i], id) {
				return false
			}
		}
	}
	return true
}

// ClaimedSlots is the union of the slots each reachable member claims for itself.
func (s *ClusterState) ClaimedSlots() SlotRanges {
	var all SlotRanges
	for i := range s.Members {
		if self := s.Members[i].Self(); self != nil {
			all = append(all, self.Slots...)
		}
	}
	return all.Normalize()
}

// AllSlotsCovered reports whether the members together claim all 16384 slots.
func (s *ClusterState) AllSlotsCovered() bool {
	return s.AllReachable() && s.ClaimedSlots().Count() == SlotCount
}

// MastersHaveReplicas reports whether every master that holds slots has at least n
// replicas among the members, going by what each replica says of itself.
func (s *ClusterState) MastersHaveReplicas(n int) bool {
	if !s.AllReachable() {
		return false
	}
	count := map[string]int{}
	for i := range s.Members {
		if self := s.Members[i].Self(); self.Replica {
			count[self.MasterID]++
		}
	}
	for i := range s.Members {
		if self := s.Members[i].Self(); self.Master && len(self.Slots) > 0 && count[self.ID] < n {
			return false
		}
	}
	return true
}

// Masters counts the members that are masters holding slots.
func (s *ClusterState) Masters() int {
	n := 0
	for i := range s.Members {
		if self := s.Members[i].Self(); self != nil && self.Master && len(self.Slots) > 0 {
			n++
		}
	}
	return n
}

// ClusterOK reports cluster_state:ok on every member.
func (s *ClusterState) ClusterOK() bool {
	if !s.AllReachable() {
		return false
	}
	for i := range s.Members {
		if !s.Members[i].Info.OK() {
			return false
		}
	}
	return true
}

// NoOpenSlots reports whether no master has a slot migrating or importing.
//
// A replica's own markers do not count. Redis closes them when a master turns replica;
// Valkey 8 and later copy a master's SETSLOT to its replicas, so there they mirror their
// master's, except when one of those copies never arrived: a Valkey 8.1 scale-out under
// load left a new master's replica with three slots importing that its master had closed.
// No client is routed by a replica's markers, SETSLOT is refused on a replica, and
// FixOpenSlots finishes masters' slots only (a promoted replica's markers become a
// master's and are finished then), so counting them here held a resize in
// FinishingOpenSlots for ever.
func (s *ClusterState) NoOpenSlots() bool {
	if !s.AllReachable() {
		return false
	}
	return s.OpenSlots() == 0
}

// NoFailures reports whether no member flags any node fail or pfail.
func (s *ClusterState) NoFailures() bool {
	if !s.AllReachable() {
		return false
	}
	for i := range s.Members {
		for _, n := range s.Members[i].Nodes {
			if n.Fail || n.PFail {
				return false
			}
		}
	}
	return true
}

// Agreed reports whether every member has the same view: the same node set, the same role
// and master for each node, and the same slot owners.
func (s *ClusterState) Agreed() bool {
	if !s.AllReachable() {
		return false
	}
	first := viewSignature(&s.Members[0])
	for i := 1; i < len(s.Members); i++ {
		if viewSignature(&s.Members[i]) != first {
			return false
		}
	}
	return true
}

// viewSignature renders a member's view in a canonical form, like redis-cli's config
// signature but with roles, so two members agree exactly when their signatures match.
func viewSignature(m *MemberState) string {
	lines := make([]string, 0, len(m.Nodes))
	for _, n := range m.Nodes {
		if n.Handshake {
			return "handshake" // a view with a handshake in flight is not settled
		}
		lines = append(lines, n.ID+" "+n.Role()+" "+n.MasterID+" "+n.Slots.String())
	}
	sort.Strings(lines)
	sig := ""
	for _, l := range lines {
		sig += l + "\n"
	}
	return sig
}

// Formed is every guard of Creating → Running that Redis answers: all members met, all
// slots covered by the wanted number of masters, each master with its replicas, no open
// slot, cluster_state ok everywhere and every member agreeing.
func (s *ClusterState) Formed(masters, replicasPerMaster int) bool {
	return s.AllMet() && s.AllSlotsCovered() && s.Masters() == masters &&
		s.MastersHaveReplicas(replicasPerMaster) && s.NoOpenSlots() && s.ClusterOK() && s.Agreed()
}
