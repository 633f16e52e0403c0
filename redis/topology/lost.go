package topology

// LostSlots are the slots no reachable node can serve and nothing heals at once: slots no
// node claims in any reachable member's view, and slots of a master flagged fail that has
// no replica left to take over. A master that is merely down (pfail) or whose replica can
// be promoted is not lost: Redis Cluster's own failover serves its slots again.
//
// A slot is lost only when every member that knows the cluster sees it lost. One view is
// not enough: a node healing has just met learns the other nodes from gossip before their
// slot claims reach it, so for a moment its view (often the widest) claims nothing, and
// reading that as lost slots would fail a healthy cluster. Members that know only
// themselves (an empty pod not yet met) say nothing about the cluster.
func (s *ClusterState) LostSlots() SlotRanges {
	var lost SlotRanges
	seen := false
	for i := range s.Members {
		m := &s.Members[i]
		if !m.Reachable() || (len(m.Nodes) < 2 && len(s.Members) > 1) {
			continue
		}
		if l := lostSlots(m.Nodes); !seen {
			lost, seen = l, true
		} else {
			lost = lost.Intersect(l)
		}
	}
	return lost.Normalize()
}

// lostSlots applies LostSlots' rule to one node's CLUSTER NODES view.
func lostSlots(view []Node) SlotRanges {
	var claimed, lost SlotRanges
	for _, n := range view {
		claimed = append(claimed, n.Slots...)
		if n.Master && n.Fail && len(n.Slots) > 0 && !hasLiveReplica(view, n.ID) {
			lost = append(lost, n.Slots...)
		}
	}
	unclaimed := AllSlots().Subtract(claimed.Normalize())
	return append(lost, unclaimed...).Normalize()
}

func hasLiveReplica(view []Node, masterID string) bool {
	for _, n := range view {
		if n.Replica && n.MasterID == masterID && !n.Fail {
			return true
		}
	}
	return false
}
