package topology

import (
	"fmt"
	"sort"
	"strings"
)

// Plan is what bootstrap does next, computed from one observation.
type Plan struct {
	// Masters are the member indexes chosen as masters, in ordinal order.
	Masters []int
	// ReplicaOf maps a replica's member index to its master's.
	ReplicaOf map[int]int
	// Actions to run now; empty when waiting or done.
	Actions []Action
	// NeedKeys lists members about to be written whose key count is not known yet; the
	// executor reads DBSIZE for them and plans again.
	NeedKeys []int
	// NeedReplication lists replicas the healer may promote whose INFO replication is not
	// known yet; the executor reads it for them and plans again.
	NeedReplication []int
	// Refusal is set when bootstrap must not proceed (data on a node, conflicting slots).
	Refusal error
	// Phase says where bootstrap stands, in words for the status.
	Phase string
	// Done is true when every guard of a formed cluster holds.
	Done bool
}

// Bootstrap phases, in the order a fresh cluster passes them.
const (
	PhaseWaitingForPods = "WaitingForPods"
	PhaseAssigning      = "AssigningSlots"
	PhaseMeeting        = "MeetingNodes"
	PhaseReplicating    = "AttachingReplicas"
	PhaseConverging     = "WaitingForAgreement"
	PhaseFormed         = "Formed"
	PhaseRefused        = "Refused"
)

// PlanBootstrap decides the next writes that bring the members to a formed cluster of
// `masters` masters with replicasPerMaster replicas each. It is pure: the same observation
// gives the same plan, and an observation of a formed cluster gives no action, which is
// what makes bootstrap idempotent and safe to resume after a crash at any step.
//
// Order of the steps, and why:
//  1. config epochs on fresh nodes and slots on empty masters, before any meet, so the
//     handshakes already carry distinct epochs and the final slot owners;
//  2. masters meet each other and every replica meets its own master;
//  3. a replica replicates as soon as it knows its master;
//  4. a replica meets the rest once it is a replica, so others learn it in its final role;
//  5. a member that others see with an old role or old slots re-announces itself with a
//     MEET to them. Redis skips the header of the packet that completes a handshake, so a
//     freshly met node is known without its slots, master or epoch until its next ping
//     (up to node-timeout/2 later); a MEET to a known node is harmless and makes it send
//     its full header now.
func PlanBootstrap(st *ClusterState, masters, replicasPerMaster int) Plan {
	if down := st.Unreachable(); len(down) > 0 {
		return Plan{Phase: PhaseWaitingForPods}
	}
	if err := checkShape(st, masters, replicasPerMaster); err != nil {
		return refuse(err)
	}
	if err := checkSlotOwners(st); err != nil {
		return refuse(err)
	}
	if formedBefore(st) {
		return planAdopt(st, masters, replicasPerMaster)
	}
	p := Plan{}
	fixed, existing := currentRoles(st)
	if len(fixed) > masters {
		return refuse(fmt.Errorf("%d members already hold slots but only %d masters are wanted: %s",
			len(fixed), masters, podList(st, fixed)))
	}
	p.Masters = ChooseMasters(memberList(st), fixed, existing, masters)
	if p.Masters == nil {
		return refuse(fmt.Errorf("cannot choose %d masters: too many members are replicas already", masters))
	}
	p.ReplicaOf = AssignReplicas(memberList(st), p.Masters, existing, replicasPerMaster)

	slotActs := planSlots(st, p.Masters)
	epochActs := planEpochs(st)
	if len(slotActs)+len(epochActs) > 0 {
		p.Phase = PhaseAssigning
		return p.withWrites(st, append(epochActs, slotActs...))
	}
	if st.Formed(masters, replicasPerMaster) {
		p.Phase, p.Done = PhaseFormed, true
		return p
	}
	acts, phase := planLinks(st, p)
	p.Phase = phase
	return p.withWrites(st, acts)
}

// withWrites sets the actions once no member bootstrap will claim holds keys of its own.
// A member is claimed when it holds no slots and is not a replica of another member: it
// is about to get slots or become a replica, and either would hide or drop its data. The
// check covers every such member before the first write, so a refusal leaves the nodes
// untouched.
func (p Plan) withWrites(st *ClusterState, acts []Action) Plan {
	_, replicaOf := currentRoles(st)
	for i := range st.Members {
		m := &st.Members[i]
		if len(m.Self().Slots) > 0 || isKey(replicaOf, i) {
			continue
		}
		if !m.KeysKnown {
			p.NeedKeys = append(p.NeedKeys, i)
			continue
		}
		if m.Keys > 0 {
			return refuse(fmt.Errorf("pod %s (%s) holds %d keys but no slots; refusing to make it part of a new cluster",
				m.Pod, m.Addr, m.Keys))
		}
	}
	if len(p.NeedKeys) > 0 {
		return p
	}
	p.Actions = acts
	return p
}

func refuse(err error) Plan { return Plan{Refusal: err, Phase: PhaseRefused} }

// planAdopt brings back a cluster the members formed before, keeping its slot layout and
// roles: it assigns no slot and sets no epoch, it re-meets members at their current
// addresses, forgets earlier lives of members that hold no slots and joins members that
// came back empty as replicas, which is what healing does (PlanHeal), with the same
// checks (a member with keys is never claimed). While two members claim one slot, it only
// re-meets: Redis settles the claim by config epoch (the stale copy loses the slot and
// becomes a replica, dropping its old keys), and the operator must not pick a side first,
// say by attaching a replica to the stale claimant.
func planAdopt(st *ClusterState, masters, replicasPerMaster int) Plan {
	if pairs := conflicts(st); len(pairs) > 0 {
		p := Plan{Phase: PhaseConverging, Actions: PlanReconnect(st)}
		if len(p.Actions) > 0 {
			p.Phase = PhaseMeeting
		}
		return p
	}
	// No overdue owners: bootstrap never promotes a replica itself; a kept cluster's slot
	// owners are all members (checkSlotOwners), so Redis has nothing to fail over either.
	return PlanHeal(st, masters, replicasPerMaster, nil)
}

// currentRoles reads which members hold slots (fixed masters) and which are replicas of
// another member already.
func currentRoles(st *ClusterState) (fixed []int, replicaOf map[int]int) {
	index := map[string]int{}
	for i, id := range st.IDs() {
		index[id] = i
	}
	replicaOf = map[int]int{}
	for i := range st.Members {
		self := st.Members[i].Self()
		if len(self.Slots) > 0 {
			fixed = append(fixed, i)
		}
		if m, ok := index[self.MasterID]; self.Replica && ok {
			replicaOf[i] = m
		}
	}
	return fixed, replicaOf
}

// planEpochs gives every fresh member (epoch 0, knows nobody) a distinct config epoch,
// ordinal+1 as redis-cli does, so masters never start with colliding epochs. Ordinals make
// the epochs distinct across re-runs too.
func planEpochs(st *ClusterState) []Action {
	var out []Action
	for i := range st.Members {
		m := &st.Members[i]
		if self := m.Self(); self.ConfigEpoch == 0 && len(m.Nodes) == 1 {
			out = append(out, Action{Kind: ActionSetConfigEpoch, Member: i, Epoch: uint64(i + 1),
				Message: fmt.Sprintf("Set config epoch %d on %s", i+1, m.Pod)})
		}
	}
	return out
}

// planSlots assigns the slots nobody claims. The split is redis-cli's; range k goes to the
// master already holding part of it (finishing an interrupted bootstrap) or else to the
// next master holding nothing, in ordinal order, so master k gets range k on a fresh cluster.
func planSlots(st *ClusterState, masters []int) []Action {
	free := AllSlots().Subtract(st.ClaimedSlots())
	if len(free) == 0 {
		return nil
	}
	used := map[int]bool{}
	var out []Action
	for _, r := range SplitSlots(len(masters)) {
		missing := free.Intersect(SlotRanges{r})
		owner := -1
		for _, m := range masters {
			if len(st.Members[m].Self().Slots.Intersect(SlotRanges{r})) > 0 {
				owner = m
				break
			}
		}
		if owner < 0 {
			for _, m := range masters {
				if !used[m] && len(st.Members[m].Self().Slots) == 0 {
					owner = m
					break
				}
			}
		}
		if owner < 0 {
			owner = leastSlots(st, masters)
		}
		used[owner] = true
		for _, sr := range missing {
			out = append(out, Action{Kind: ActionAddSlots, Member: owner, Slots: sr,
				Message: fmt.Sprintf("Assigned slots %s to %s", sr, st.Members[owner].Pod)})
		}
	}
	return out
}

func leastSlots(st *ClusterState, masters []int) int {
	best := masters[0]
	for _, m := range masters[1:] {
		if st.Members[m].Self().Slots.Count() < st.Members[best].Self().Slots.Count() {
			best = m
		}
	}
	return best
}

// planLinks plans meets, replication and re-announcements (steps 2-5 of PlanBootstrap).
func planLinks(st *ClusterState, p Plan) ([]Action, string) {
	var acts []Action
	meet := func(i, j int) {
		acts = append(acts, Action{Kind: ActionMeet, Member: i, Target: j, TargetAddr: st.Members[j].Addr,
			Message: fmt.Sprintf("Made %s meet %s", st.Members[i].Pod, st.Members[j].Pod)})
	}
	ids := st.IDs()
	isMaster := map[int]bool{}
	for _, m := range p.Masters {
		isMaster[m] = true
	}
	settled := map[int]bool{} // members in their final role
	for i := range st.Members {
		self := st.Members[i].Self()
		m, isReplica := p.ReplicaOf[i]
		settled[i] = isMaster[i] || isReplica && self.Replica && self.MasterID == ids[m]
	}
	phase := PhaseConverging
	// Step 2 and 4: whoever is settled meets every settled member it does not know; an
	// unsettled replica meets only its master.
	for i := range st.Members {
		for j := range st.Members {
			if i == j || knows(&st.Members[i], ids[j]) {
				continue
			}
			if m, ok := p.ReplicaOf[i]; ok && !settled[i] {
				if j == m {
					meet(i, j)
					phase = PhaseMeeting
				}
				continue
			}
			// Meet once per pair: the lower index, unless only the higher one is ignorant.
			if settled[i] && settled[j] && (i < j || knows(&st.Members[j], ids[i])) {
				meet(i, j)
				phase = PhaseMeeting
			}
		}
	}
	// Step 3: replicate as soon as the replica knows its master.
	for _, r := range sortedKeys(p.ReplicaOf) {
		m := p.ReplicaOf[r]
		if !settled[r] && knows(&st.Members[r], ids[m]) {
			acts = append(acts, Action{Kind: ActionReplicate, Member: r, Target: m, MasterID: ids[m],
				Message: fmt.Sprintf("Made %s a replica of %s", st.Members[r].Pod, st.Members[m].Pod)})
			if phase == PhaseConverging {
				phase = PhaseReplicating
			}
		}
	}
	// Step 5: a settled member seen stale by a member that knows it re-announces itself.
	acts = append(acts, PlanReannounce(st, func(i int) bool { return settled[i] })...)
	return acts, phase
}

// PlanReannounce has each member i (for which announce(i) holds; nil: every member) that
// another member j knows, but sees with another role, master or slots than i's own view,
// re-announce itself to j with a MEET. Redis skips the header of the packet that completes
// a handshake, so a freshly met node learns a member's role and slots only from that
// member's next ping, up to node-timeout/2 later; a MEET from a node j already knows is
// processed like a ping and carries them at once. It changes no one's configuration: a
// claim older than j's view loses to j's config epoch as any ping's would.
func PlanReannounce(st *ClusterState, announce func(int) bool) []Action {
	ids := st.IDs()
	var acts []Action
	for i := range st.Members {
		if announce != nil && !announce(i) {
			continue
		}
		self := st.Members[i].Self()
		for j := range st.Members {
			if i == j {
				continue
			}
			n := st.Members[j].Find(ids[i])
			if n == nil || n.Handshake || n.NoAddr {
				continue
			}
			if !n.SameRole(*self) || !n.Slots.Equal(self.Slots) {
				acts = append(acts, Action{Kind: ActionMeet, Member: i, Target: j, TargetAddr: st.Members[j].Addr, Refresh: true,
					Message: fmt.Sprintf("Made %s re-announce itself to %s", st.Members[i].Pod, st.Members[j].Pod)})
			}
		}
	}
	return acts
}

func memberList(st *ClusterState) []Member {
	out := make([]Member, len(st.Members))
	for i := range st.Members {
		out[i] = st.Members[i].Member
	}
	return out
}

func podList(st *ClusterState, idx []int) string {
	names := make([]string, len(idx))
	for k, i := range idx {
		names[k] = st.Members[i].Pod
	}
	return strings.Join(names, ", ")
}

func sortedKeys(m map[int]int) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
