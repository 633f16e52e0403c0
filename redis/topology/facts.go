package topology

// MemberFacts is what the status shows for one instance.
type MemberFacts struct {
	Pod  string
	Addr string
	// Reachable is false when the member did not answer; Error says why.
	Reachable    bool
	Error        string
	NodeID       string
	Role         string // "master" or "slave"
	MasterNodeID string
	Slots        SlotRanges
	// Connected is true when every other reachable member has a connected link to it.
	Connected bool
	// Failed is true when some member flags it fail or pfail.
	Failed bool
	// Server is what the member says it runs, e.g. "valkey 9.1.2"; "" when unknown.
	Server string
}

// Facts lists per-member facts in member order, for the status conditions.
func (s *ClusterState) Facts() []MemberFacts {
	out := make([]MemberFacts, len(s.Members))
	for i := range s.Members {
		m := &s.Members[i]
		f := MemberFacts{Pod: m.Pod, Addr: m.Addr, Reachable: m.Reachable(), Server: m.Server.String()}
		if m.Err != nil {
			f.Error = m.Err.Error()
		}
		self := m.Self()
		if self == nil {
			out[i] = f
			continue
		}
		f.NodeID, f.Role, f.MasterNodeID, f.Slots = self.ID, self.Role(), self.MasterID, self.Slots
		f.Connected = true
		for j := range s.Members {
			if j == i || !s.Members[j].Reachable() {
				continue
			}
			n := s.Members[j].Find(self.ID)
			if n == nil || !n.Connected {
				f.Connected = false
			}
			if n != nil && (n.Fail || n.PFail) {
				f.Failed = true
			}
		}
		out[i] = f
	}
	return out
}
