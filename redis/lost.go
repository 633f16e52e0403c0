package redis

// LostSlots are the slots no reachable node can serve and nothing heals at once: slots no
// node claims in any reachable member's view, and slots of a master flagged fail that has
// no replica left to take over. A master that is merely down (pfail) or whose replica can
// be promoted is not lost: Redis Cluster's own failover serves its slots again.
func (s *ClusterState) LostSlots() SlotRanges {
	var view []Node
	for i := range s.Members {
		if s.Members[i].Reachable() && len(s.Members[i].Nodes) > len(view) {
			view = s.Members[i].Nodes // the widest view: the member that knows the most nodes
		}
	}
	if view == nil {
		return nil
	}
	return lostSlots(view)
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
