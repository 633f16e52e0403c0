package topology

// Questions about the observed cluster's topology that the controller's guards and the
// rolling upgrade ask. Pure: they read only the views in the ClusterState.

// MemberByID is the member whose own node ID is id, nil when no reachable member is it.
func (s *ClusterState) MemberByID(id string) *MemberState {
	for i := range s.Members {
		if s.Members[i].ID() == id {
			return &s.Members[i]
		}
	}
	return nil
}

// AllSeeMaster reports whether every member agrees on the views and they call node id a
// master: the roles of a CLUSTER FAILOVER have swapped everywhere.
func (s *ClusterState) AllSeeMaster(id string) bool {
	if s == nil || !s.Agreed() {
		return false
	}
	for _, f := range s.Facts() {
		if f.NodeID == id {
			return f.Role == RoleMaster
		}
	}
	return false
}

// ReplicaLinksUp reports whether every replica member sees its master's link connected
// and not failing.
func (s *ClusterState) ReplicaLinksUp() bool {
	for i := range s.Members {
		m := &s.Members[i]
		self := m.Self()
		if self == nil || !self.Replica {
			continue
		}
		master := m.Find(self.MasterID)
		if master == nil || !master.Connected || master.Fail || master.PFail {
			return false
		}
	}
	return true
}

// ReachableNodes counts the members plus every stranger (a node no member is) that reads
// live in every view and accepted a connection from the operator itself (Answered). A node no member reaches
// (the node a pod deleted with an emptyDir leaves behind, until healing forgets it) is not
// part of the cluster's size: counting it would read a pod coming back empty as a resize.
func (s *ClusterState) ReachableNodes() int {
	ids := map[string]bool{}
	for _, id := range s.IDs() {
		ids[id] = true
	}
	n := len(ids)
	for _, st := range s.LiveStrangers() {
		if s.Answered[st.ID] {
			n++
		}
	}
	return n
}

// LiveStrangers are the nodes that are no member yet read connected and not failing in
// every view that knows them. One view is not enough: Redis shows a node "connected" from
// the moment it starts a reconnect, so a dead node can read connected in one view while
// Redis retries it. Every view is not enough either: for the first seconds after a pod's
// graceful stop, its node still reads connected everywhere with no ping outstanding
// (Redis reconnects at once and pings only later), which is why ReachableNodes also asks
// that the operator could connect to the node.
func (s *ClusterState) LiveStrangers() []Node {
	ids := map[string]bool{}
	for _, id := range s.IDs() {
		ids[id] = true
	}
	live := map[string]bool{} // stranger ID -> live in every view so far
	var order []Node
	for i := range s.Members {
		latest := latestPong(s.Members[i].Nodes)
		for _, n := range s.Members[i].Nodes {
			if ids[n.ID] || n.Handshake {
				continue
			}
			// A ping to it still unanswered after another node's pong came back: on a real
			// network a node whose pod is gone answers nothing, not even a reset, and its link
			// reads connected (Redis reconnecting) until it is flagged failing, node-timeout
			// later. A live node answers within a round trip.
			unanswered := n.PingSent != 0 && n.PingSent < latest
			ok := n.Connected && !n.Fail && !n.PFail && !n.NoAddr && !unanswered
			prev, seen := live[n.ID]
			if !seen {
				order = append(order, n)
			}
			live[n.ID] = ok && (!seen || prev)
		}
	}
	var out []Node
	for _, n := range order {
		if live[n.ID] {
			out = append(out, n)
		}
	}
	return out
}

// latestPong is the time of the last pong any node of a view answered: the view's "now", as
// near as a view tells it.
func latestPong(nodes []Node) int64 {
	var latest int64
	for _, n := range nodes {
		latest = max(latest, n.PongRecv)
	}
	return latest
}

// KnownSize is the number of nodes (handshakes aside) in the view of the first reachable
// member that knows another node, or of the only member; false when no member qualifies.
// It is the cluster's size while some members do not answer.
func (s *ClusterState) KnownSize() (int, bool) {
	for i := range s.Members {
		m := &s.Members[i]
		if !m.Reachable() {
			continue
		}
		n := 0
		for _, node := range m.Nodes {
			if !node.Handshake {
				n++
			}
		}
		if n > 1 || len(s.Members) == 1 {
			return n, true
		}
	}
	return 0, false
}

// ReplicaOfMember is a replica member and its master's member, nil when the master is
// not a reachable member.
type ReplicaOfMember struct {
	Replica, Master *MemberState
}

// ReplicasAndMasters lists every replica member with its master, in member order.
func (s *ClusterState) ReplicasAndMasters() []ReplicaOfMember {
	var out []ReplicaOfMember
	for i := range s.Members {
		m := &s.Members[i]
		self := m.Self()
		if self == nil || !self.Replica {
			continue
		}
		out = append(out, ReplicaOfMember{Replica: m, Master: s.MemberByID(self.MasterID)})
	}
	return out
}

// SlotsHeldAt is the largest set of slots any member that answers sees the master at
// ip:port own: what could be lost with the node at that address.
func (s *ClusterState) SlotsHeldAt(ip string, port int) SlotRanges {
	var out SlotRanges
	for i := range s.Members {
		for _, n := range s.Members[i].Nodes {
			if n.IP == ip && n.Port == port && n.Master && n.Slots.Count() > out.Count() {
				out = n.Slots
			}
		}
	}
	return out
}

// MastersWithoutReplica lists the pods of the masters holding slots that no reachable
// member replicates, in member order: shards one failure away from losing their slots.
func (s *ClusterState) MastersWithoutReplica() []string {
	replicated := map[string]bool{}
	for _, rm := range s.ReplicasAndMasters() {
		replicated[rm.Replica.Self().MasterID] = true
	}
	var out []string
	for i := range s.Members {
		if self := s.Members[i].Self(); self != nil && self.Master && len(self.Slots) > 0 && !replicated[self.ID] {
			out = append(out, s.Members[i].Pod)
		}
	}
	return out
}

// ReplicasOfMasterAt is the node ID of the master that the members see holding slots at
// ip:port, and its replicas among the members, in member order; "" when no member sees a
// master with slots there. A master whose pod is going is no member, but the others still
// see it: this is what a planned hand-over before it stops asks.
func (s *ClusterState) ReplicasOfMasterAt(ip string, port int) (string, []*MemberState) {
	id := ""
	for i := range s.Members {
		for _, n := range s.Members[i].Nodes {
			if n.IP == ip && n.Port == port && n.Master && n.Slots.Count() > 0 {
				id = n.ID
			}
		}
	}
	if id == "" {
		return "", nil
	}
	var replicas []*MemberState
	for _, rm := range s.ReplicasAndMasters() {
		if rm.Replica.Self().MasterID == id {
			replicas = append(replicas, rm.Replica)
		}
	}
	return id, replicas
}
