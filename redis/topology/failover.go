package topology

import (
	"fmt"
	"sort"
	"time"
)

// PhaseWaitingForFailover: a master holding slots is down and a replica of it can take
// over; healing waits for that failover before it re-points or forgets any node.
const PhaseWaitingForFailover = "WaitingForFailover"

// Failover modes of CLUSTER FAILOVER.
const (
	// FailoverForce skips the handshake with the (dead) master but still wins the
	// election with a majority of masters' votes, so two nodes never own one slot.
	FailoverForce = "FORCE"
	// FailoverTakeover bumps the epoch without any vote. It is sent only when a majority
	// of the slot-holding masters is down, because FORCE cannot win then.
	FailoverTakeover = "TAKEOVER"
)

// FailingOwner is a node that some member flags fail or pfail while, in that member's
// view, it still holds slots: its slots are served again only by a failover (or by the
// node coming back).
type FailingOwner struct {
	ID    string
	Slots SlotRanges
	// Fail is true when some member flags it fail (a majority of masters agreed), not only
	// pfail.
	Fail bool
	// Member is true when the node is a reachable member: a pod that answers but that a
	// view still flags, usually for a moment after it came back at a new address.
	Member bool
	// Replicas are the indexes of reachable members replicating it: the candidates.
	Replicas []int
	// LiveReplica is true when some view shows a replica of it not flagged fail, member
	// or not: Redis may still promote that one.
	LiveReplica bool
}

// FailingOwners lists, sorted by ID, every node flagged fail or pfail by a reachable member
// while holding slots in that member's view.
func (s *ClusterState) FailingOwners() []FailingOwner {
	isMember := map[string]bool{}
	for _, id := range s.IDs() {
		if id != "" {
			isMember[id] = true
		}
	}
	byID := map[string]*FailingOwner{}
	for i := range s.Members {
		if !s.Members[i].Reachable() {
			continue
		}
		view := s.Members[i].Nodes
		for _, n := range view {
			if n.Myself || !(n.Fail || n.PFail) || len(n.Slots) == 0 {
				continue
			}
			o := byID[n.ID]
			if o == nil {
				o = &FailingOwner{ID: n.ID, Member: isMember[n.ID]}
				byID[n.ID] = o
			}
			o.Slots = append(o.Slots, n.Slots...).Normalize()
			o.Fail = o.Fail || n.Fail
			o.LiveReplica = o.LiveReplica || hasConnectedReplica(view, n.ID)
		}
	}
	out := make([]FailingOwner, 0, len(byID))
	for _, o := range byID {
		for i := range s.Members {
			if self := s.Members[i].Self(); self != nil && self.Replica && self.MasterID == o.ID {
				o.Replicas = append(o.Replicas, i)
				o.LiveReplica = true
			}
		}
		out = append(out, *o)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// hasConnectedReplica reports whether the view shows a replica of masterID that is
// connected and flagged neither fail nor pfail: one that may still win an election. A
// replica only pfail in some view may be as gone as its master, and waiting on it could
// last forever.
func hasConnectedReplica(view []Node, masterID string) bool {
	for _, n := range view {
		if n.Replica && n.MasterID == masterID && n.Connected && !n.Fail && !n.PFail {
			return true
		}
	}
	return false
}

// PendingFailovers are the failing owners whose slots a failover can still save: a replica
// of theirs is alive, or the node itself answers. While one exists no replica may be
// re-pointed and no node forgotten: the replica may hold the only copy of those slots.
// An owner with no replica left is not pending: its slots are lost (LostSlots) and
// waiting changes nothing.
func (s *ClusterState) PendingFailovers() []FailingOwner {
	var out []FailingOwner
	for _, o := range s.FailingOwners() {
		if o.Member || o.LiveReplica {
			out = append(out, o)
		}
	}
	return out
}

// OwnsSlotsAnywhere reports whether some reachable member's view shows node id holding
// slots. A replica of such a node holds data nobody else may have.
func (s *ClusterState) OwnsSlotsAnywhere(id string) bool {
	for i := range s.Members {
		if n := s.Members[i].Find(id); n != nil && len(n.Slots) > 0 {
			return true
		}
	}
	return false
}

// PlanPromote sends, for each lost owner in overdue, a CLUSTER FAILOVER to its reachable
// replica with the highest replication offset, and returns the replicas whose INFO
// replication must be read first. overdue maps a failing slot owner that is no reachable
// member, and that Redis has not failed over within the caller's bound, to how long it has
// been seen failing.
//
// gone says whether every desired pod answered: an owner that is none of them has lost its
// process and its data for good (its pod answers with another ID), so a replica with any
// data beats losing the shard, and TAKEOVER may be used when too few masters are left to
// vote. Otherwise the operator may only be cut off from a master that lives, so it is
// strict: the owner must be flagged fail (a majority of masters agreed it is down), the
// mode is always FORCE (it still needs that majority's votes, so it cannot split the
// cluster), and the replica's link must have gone down no earlier than its master failed
// (it was in sync until the failure; Redis' own validity check is not overridden blindly).
func PlanPromote(st *ClusterState, overdue map[string]time.Duration, gone bool) (acts []Action, needRepl []int) {
	total, alive := slotMasters(st)
	mode := FailoverForce
	if gone && alive*2 <= total {
		mode = FailoverTakeover
	}
	for _, o := range st.FailingOwners() {
		failingFor, ok := overdue[o.ID]
		if o.Member || !ok || len(o.Replicas) == 0 || !gone && !o.Fail {
			continue
		}
		best := -1
		for _, r := range o.Replicas {
			m := &st.Members[r]
			if m.Repl == nil {
				needRepl = append(needRepl, r)
				continue
			}
			if promotable(*m.Repl, failingFor, gone) && (best < 0 || m.Repl.Offset > st.Members[best].Repl.Offset) {
				best = r
			}
		}
		if best < 0 || len(needRepl) > 0 {
			continue
		}
		acts = append(acts, Action{Kind: ActionFailover, Member: best, NodeID: o.ID, Mode: mode,
			Message: fmt.Sprintf("Promoted %s (offset %d) with CLUSTER FAILOVER %s: its master %s, holding slots %s, is down and Redis did not fail it over",
				st.Members[best].Pod, st.Members[best].Repl.Offset, mode, o.ID, o.Slots)})
	}
	if len(needRepl) > 0 {
		return nil, needRepl
	}
	return acts, nil
}

// linkSlack is how much earlier than the operator first saw its master failing a replica's
// link may have gone down and still count as in sync at the failure: Redis flags a master
// pfail one node timeout (5 s) after it stops answering, and the operator looks every 2 s.
const linkSlack = 10 * time.Second

// promotable reports whether a replica may be promoted: no full sync in flight, some
// data (offset 1 is a replica that never finished its first sync), its link down (an up
// link means the master lives). When the master is not provably gone, the link must also
// have gone down about when the master failed, not long before.
func promotable(r Replication, failingFor time.Duration, gone bool) bool {
	if r.Role != "slave" || r.Syncing || r.LinkUp || r.Offset <= 1 {
		return false
	}
	if gone {
		return true
	}
	return r.LinkDownSeconds >= 0 && time.Duration(r.LinkDownSeconds)*time.Second <= failingFor+linkSlack
}

// slotMasters counts the masters holding slots in any reachable view (total) and those of
// them not flagged fail by anyone (alive): a failover election needs votes from a
// majority of total. pfail alone does not count a master out: one flaky link must not
// turn FORCE into TAKEOVER while Redis' own election can still run.
func slotMasters(st *ClusterState) (total, alive int) {
	owners, failed := map[string]bool{}, map[string]bool{}
	for i := range st.Members {
		for _, n := range st.Members[i].Nodes {
			if n.Master && len(n.Slots) > 0 {
				owners[n.ID] = true
				if n.Fail {
					failed[n.ID] = true
				}
			}
		}
	}
	for id := range owners {
		if !failed[id] {
			alive++
		}
	}
	return len(owners), alive
}
