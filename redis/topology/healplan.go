package topology

import (
	"fmt"
	"sort"
	"time"
)

// Healing phases (besides the bootstrap ones it shares: WaitingForPods, MeetingNodes,
// AttachingReplicas, WaitingForAgreement, Formed, Refused).
const PhaseForgetting = "ForgettingLostNodes"

// PlanHeal decides the next writes that bring a cluster that was formed once back to a
// formed cluster of `masters` masters with replicasPerMaster replicas each, without ever
// moving a slot, claiming a node that holds keys, or touching the only copy of a slot. It
// is pure, and a healthy cluster gives no action. overdue names the lost slot owners the
// operator may fail over itself, with how long each has been failing (see HealOptions and
// PlanPromote); nil leaves every failover to Redis.
//
// The first rule is safety: while a master that holds slots is flagged fail or pfail and a
// replica of it is alive (PendingFailovers), its replicas may hold the only copy of those
// slots. Healing then only reconnects members (MEET writes no data) and, once the owner is
// overdue, promotes its most up-to-date replica; it re-points no replica and forgets no
// node until the slots have an owner that answers. What it fixes:
//
//   - a lost master Redis does not fail over within the bound (no majority of masters,
//     cluster-replica-no-failover, a replica Redis deems too stale): CLUSTER FAILOVER FORCE
//     on its replica with the highest offset, TAKEOVER when FORCE cannot win a vote;
//   - members that do not know each other by node ID, know one at an old address (a pod
//     back with a new IP, or all of them at once: every nodes.conf then points at dead
//     addresses and only the operator can reconnect them), or see one as noaddr or fail
//     while it answers: a MEET to its current address. Redis replaces the address of a
//     known node when the handshake reveals a known ID.
//   - lost nodes: an ID in some member's view that no member has, flagged fail or noaddr
//     and holding slots in no member's view, is forgotten on every member that knows it in
//     the same plan, because FORGET bans the ID for only 60 s and a member that still knows
//     it would gossip it back. A lost node holding slots is never forgotten: its slots are
//     lost data, left to the Broken/Failed path.
//   - an empty master (a fresh pod: no slots, no keys) and a replica whose master is no
//     member and holds slots in no view: REPLICATE to a master lacking replicas, preferring
//     one on another Kubernetes node. A replica whose master still holds slots in some view
//     is never re-pointed.
//   - a master holding slots and fewer than replicasPerMaster replicas while another holds
//     more: REPLICATE of one of the surplus replicas to it (PlanSpareMoves), never the only
//     one of its master, and only while its master keeps one in sync.
func PlanHeal(st *ClusterState, masters, replicasPerMaster int, overdue map[string]time.Duration) Plan {
	gone := len(st.Unreachable()) == 0 // every pod answered: an owner none of them is, is gone
	promote, needRepl := PlanPromote(st, overdue, gone)
	if len(needRepl) > 0 {
		return Plan{Phase: PhaseWaitingForFailover, NeedReplication: needRepl}
	}
	if !gone {
		return Plan{Phase: PhaseWaitingForPods, Actions: promote}
	}
	if err := checkShape(st, masters, replicasPerMaster); err != nil {
		return refuse(err)
	}
	p := Plan{Phase: PhaseConverging}
	meets := PlanReconnect(st)
	if pending := st.PendingFailovers(); len(pending) > 0 {
		p.Phase = PhaseWaitingForFailover
		p.Actions = append(meets, promote...)
		return p
	}
	if claimedTwice(st) {
		// A member back with a stale copy (an old nodes.conf) claims slots another owns:
		// Redis gives them to the higher config epoch, and the loser turns replica. Until
		// then which one is the master is not known, so nothing is attached to either.
		p.Actions = meets
		return p
	}
	roles, waitKeys, err := planReattach(st, &p, replicasPerMaster)
	if err != nil {
		return refuse(err)
	}
	if len(waitKeys) > 0 {
		p.NeedKeys = waitKeys
		return p
	}
	forgets := PlanForget(st)
	switch {
	case len(meets) > 0:
		p.Phase = PhaseMeeting
	case len(forgets) > 0:
		p.Phase = PhaseForgetting
	case len(roles) > 0:
		p.Phase = PhaseReplicating
	}
	p.Actions = append(append(meets, roles...), forgets...)
	if len(p.Actions) == 0 && allAtAddr(st) && st.Formed(masters, replicasPerMaster) {
		p.Phase, p.Done = PhaseFormed, true
	}
	return p
}

// claimedTwice reports whether two members claim a slot in common for themselves.
func claimedTwice(st *ClusterState) bool {
	var seen SlotRanges
	for i := range st.Members {
		own := st.Members[i].Self().Slots
		if len(seen.Intersect(own)) > 0 {
			return true
		}
		seen = append(seen, own...).Normalize()
	}
	return false
}

// knowsAt reports whether m knows node id at addr, with a finished handshake and not
// flagged fail: a member seen that way by another needs no MEET.
func knowsAt(m *MemberState, id, addr string) bool {
	n := m.Find(id)
	return n != nil && !n.Handshake && !n.NoAddr && !n.Fail && n.Addr() == addr
}

// allAtAddr reports whether every member knows every other at its current address.
// Formed compares IDs only, and a view of old addresses is not formed.
func allAtAddr(st *ClusterState) bool {
	ids := st.IDs()
	for i := range st.Members {
		for j := range st.Members {
			if i != j && !knowsAt(&st.Members[i], ids[j], st.Members[j].Addr) {
				return false
			}
		}
	}
	return true
}

// meeting reports whether m has a handshake in flight with addr; a second MEET would only
// start it again.
func meeting(m *MemberState, addr string) bool {
	for _, n := range m.Nodes {
		if n.Handshake && n.Addr() == addr {
			return true
		}
	}
	return false
}

// PlanReconnect sends one MEET per pair of members where one does not know the other
// where it is now: the lower index meets, unless only the higher one is wrong. The other
// side learns from the handshake or, if not, is planned on the next observation. Fresh
// members first get their config epoch (PlanFreshEpochs), alone in the plan: a MEET sent
// beside it could reach the node first, and Redis sets an epoch only on a node that knows
// nobody.
func PlanReconnect(st *ClusterState) []Action {
	if acts := PlanFreshEpochs(st); len(acts) > 0 {
		return acts
	}
	ids := st.IDs()
	var acts []Action
	for i := range st.Members {
		for j := range st.Members {
			if i == j || knowsAt(&st.Members[i], ids[j], st.Members[j].Addr) {
				continue
			}
			if j < i && !knowsAt(&st.Members[j], ids[i], st.Members[i].Addr) {
				continue // the pair is met from j's side
			}
			if meeting(&st.Members[i], st.Members[j].Addr) {
				continue
			}
			acts = append(acts, Action{Kind: ActionMeet, Member: i, Target: j, TargetAddr: st.Members[j].Addr,
				Message: fmt.Sprintf("Made %s meet %s at %s", st.Members[i].Pod, st.Members[j].Pod, st.Members[j].Addr)})
		}
	}
	return acts
}

// PlanFreshEpochs gives every fresh member of a cluster that exists (config epoch 0, knows
// no other node: a pod added by a scale-out, or one back without its data) a distinct config
// epoch above every epoch the members know, before anyone meets it. Left at 0, fresh nodes
// collide once met, and Redis settles a collision by moving the node with the smaller ID to
// its currentEpoch+1, which can be an old master's epoch: that master then moves too
// (clusterHandleConfigEpochCollision). A source whose epoch rises above its target's while
// a slot closes (the target has taken it, the source not yet heard) wins the slot back by
// gossip, and the target deletes the slot's keys: a scale-out in the scale bench lost a
// group of slots so. Sources never bump their epoch otherwise. Bootstrap does the same for a
// new cluster with ordinals (planEpochs); nil while no member knows another.
func PlanFreshEpochs(st *ClusterState) []Action {
	var top uint64
	formed := false
	for i := range st.Members {
		m := &st.Members[i]
		formed = formed || len(m.Nodes) > 1
		top = max(top, m.Info.CurrentEpoch)
		for _, n := range m.Nodes {
			top = max(top, n.ConfigEpoch)
		}
	}
	if !formed {
		return nil
	}
	var out []Action
	for i := range st.Members {
		m := &st.Members[i]
		if self := m.Self(); self != nil && self.ConfigEpoch == 0 && len(m.Nodes) == 1 {
			top++
			out = append(out, Action{Kind: ActionSetConfigEpoch, Member: i, Epoch: top,
				Message: fmt.Sprintf("Set config epoch %d on %s, above every epoch of the cluster, before it meets it", top, m.Pod)})
		}
	}
	return out
}

// planReattach makes members without a place replicas of the masters lacking them: empty
// masters (after checking they hold no keys) and replicas of a lost node or of a member
// that is no master holding slots. Then, while a serving master still lacks replicas, a
// surplus replica of another moves to it (PlanSpareMoves). It returns the members whose
// key count must be read first.
func planReattach(st *ClusterState, p *Plan, replicasPerMaster int) ([]Action, []int, error) {
	serving, existing, homeless, needKeys, err := classifyForHeal(st)
	if err != nil || len(needKeys) > 0 || len(serving) == 0 {
		return nil, needKeys, err
	}
	ids := st.IDs()
	members := memberList(st)
	links := map[int]int{}
	for r, m := range existing {
		links[r] = m
	}
	var acts []Action
	if len(homeless) > 0 {
		p.Masters = serving
		p.ReplicaOf = AssignReplicas(members, serving, existing, replicasPerMaster)
		for _, r := range homeless {
			target, ok := p.ReplicaOf[r]
			if !ok {
				continue
			}
			links[r] = target // counted even while it waits for a MEET: its seat is taken
			if knows(&st.Members[r], ids[target]) {
				acts = append(acts, Action{Kind: ActionReplicate, Member: r, Target: target, MasterID: ids[target],
					Message: fmt.Sprintf("Made %s a replica of %s", st.Members[r].Pod, st.Members[target].Pod)})
			}
		}
	}
	_, candidates := SpareCandidates(serving, links, replicasPerMaster)
	synced := map[int]bool{}
	for _, r := range candidates {
		if repl := st.Members[r].Repl; repl == nil {
			p.NeedReplication = append(p.NeedReplication, r)
		} else {
			synced[r] = repl.InSync()
		}
	}
	if len(p.NeedReplication) > 0 {
		return acts, nil, nil // the executor reads them and plans again
	}
	moves := PlanSpareMoves(members, serving, links, synced, replicasPerMaster)
	for _, r := range sortedKeys(moves) {
		target, from := moves[r], existing[r]
		if !knows(&st.Members[r], ids[target]) {
			continue // met first; moved on a later observation
		}
		acts = append(acts, Action{Kind: ActionReplicate, Member: r, Target: target, MasterID: ids[target],
			Message: fmt.Sprintf("Made %s a replica of %s, which has fewer than %d replicas (from %s, which keeps %d)",
				st.Members[r].Pod, st.Members[target].Pod, replicasPerMaster, st.Members[from].Pod, replicasLeft(existing, moves, from))})
	}
	return acts, nil, nil
}

// replicasLeft counts the replicas master m keeps once moves are made.
func replicasLeft(links, moves map[int]int, m int) int {
	n := 0
	for r, to := range links {
		if _, moved := moves[r]; to == m && !moved {
			n++
		}
	}
	return n
}

// classifyForHeal sorts the members for planReattach: the masters holding slots
// (serving), the replicas of one (existing, replica → master), the members without a
// place (homeless: empty masters, replicas of a lost node or of a member serving no slot
// in any view) and the empty masters whose key count is not known yet. An empty master
// holding keys is refused.
func classifyForHeal(st *ClusterState) (serving []int, existing map[int]int, homeless, needKeys []int, err error) {
	index := map[string]int{}
	for i, id := range st.IDs() {
		index[id] = i
	}
	isServing := map[int]bool{}
	for i := range st.Members {
		if self := st.Members[i].Self(); self.Master && len(self.Slots) > 0 {
			serving = append(serving, i)
			isServing[i] = true
		}
	}
	existing = map[int]int{}
	for i := range st.Members {
		m := &st.Members[i]
		self := m.Self()
		switch {
		case self.Replica:
			if mi, ok := index[self.MasterID]; ok && isServing[mi] {
				existing[i] = mi
			} else if !st.OwnsSlotsAnywhere(self.MasterID) {
				homeless = append(homeless, i)
			}
			// else: its master holds slots in some view and this replica may hold their
			// only copy; it is left alone until a failover settles who owns them.
		case len(self.Slots) == 0:
			// An empty master: a fresh pod, or one whose data dir was lost.
			if !m.KeysKnown {
				needKeys = append(needKeys, i)
			} else if m.Keys > 0 {
				return nil, nil, nil, nil, fmt.Errorf("pod %s (%s) holds %d keys but no slots; refusing to make it a replica, which would drop them",
					m.Pod, m.Addr, m.Keys)
			}
			homeless = append(homeless, i)
		}
	}
	return serving, existing, homeless, needKeys, nil
}

// PlanForget forgets every lost node on every member that knows it. A lost node is one no
// member is, flagged fail or noaddr by some member, holding slots in no member's view. A
// member that still replicates it is skipped (Redis refuses to forget one's master); it is
// re-attached in the same plan and forgets on the next one.
func PlanForget(st *ClusterState) []Action {
	isMember := map[string]bool{}
	for _, id := range st.IDs() {
		isMember[id] = true
	}
	flagged, holds := map[string]bool{}, map[string]bool{}
	for i := range st.Members {
		for _, n := range st.Members[i].Nodes {
			if isMember[n.ID] || n.Handshake {
				continue
			}
			if n.Fail || n.NoAddr {
				flagged[n.ID] = true
			}
			if len(n.Slots) > 0 {
				holds[n.ID] = true
			}
		}
	}
	var lost []string
	for id := range flagged {
		if !holds[id] {
			lost = append(lost, id)
		}
	}
	sort.Strings(lost)
	var acts []Action
	for _, id := range lost {
		for i := range st.Members {
			m := &st.Members[i]
			if m.Find(id) == nil || m.Self().MasterID == id {
				continue
			}
			acts = append(acts, Action{Kind: ActionForget, Member: i, NodeID: id,
				Message: fmt.Sprintf("Made %s forget lost node %s", m.Pod, id)})
		}
	}
	return acts
}
