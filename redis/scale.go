package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// ScaleRequest is what a resize asks: members[:Keep] stay (all of them on scale-out),
// members[Keep:] leave; the kept members end as Masters masters with ReplicasPerMaster
// replicas each.
type ScaleRequest struct {
	Masters, ReplicasPerMaster int
	Keep                       int
	// Pipeline is the number of keys per MIGRATE batch.
	Pipeline int
	// Assign is AssignReceive's entries; nil for AutoReceive. NewFrom is the first
	// ordinal of the pods added by this scale-out: masters from there on are the new ones.
	Assign  []Assignment
	NewFrom int
	// Budget bounds the slots migrated in one step; the next step goes on from Redis' state.
	Budget time.Duration
	// MaxKeysPerSecond caps the keys moved per second by the step's streams together; 0
	// for no cap. A capped step also opens fewer slots at once (groupSize).
	MaxKeysPerSecond int
	// Stop, when set, is asked before each round of slot groups: true ends the step
	// after the slots in flight, every one of them closed (pause, or a new size asked).
	Stop func() bool
}

// Scaling phases.
const (
	PhaseFinishingSlots = "FinishingOpenSlots"
	PhaseMigrating      = "MigratingSlots"
	PhaseRemoving       = "RemovingNodes"
)

// ScaleProgress is where one Scale step left the cluster.
type ScaleProgress struct {
	Phase string
	// MovedSlots and MovedKeys count what this step migrated; Remaining is the moves left.
	MovedSlots, MovedKeys, Remaining int
	Actions                          []Action
	// Done: slots placed, replicas attached, leaving nodes forgotten and reset; on
	// scale-in the StatefulSet may shrink now.
	Done bool
}

// Scale takes one bounded step of a resize, planned from Redis' own state each time, so
// it resumes after any interruption: an open slot is finished first, then the members
// meet; then the new masters get their replicas, and slots move to a new master only once
// its replicas are in sync, so losing its pod mid-migration loses nothing (Redis promotes
// the replica). Then slots migrate (PlanRebalance or PlanAssign) until the budget is
// spent, then the other replicas are attached (Heal), and on scale-in the leaving nodes
// are forgotten by every kept member and reset. Before anything is written, a step
// refuses a node holding keys but no slots (*KeysError) and bad AssignReceive entries
// (*AssignError); before slots move, one the kept masters' maxmemory cannot hold
// (*CapacityError). A refusal wraps ErrRefused and writes nothing.
func Scale(ctx context.Context, f Factory, members []Member, req ScaleRequest) (ScaleProgress, error) {
	st, err := Observe(ctx, f, members)
	if err != nil {
		return ScaleProgress{Phase: PhaseWaitingForPods}, fmt.Errorf("failed to observe cluster: %w", err)
	}
	if !st.AllReachable() {
		return ScaleProgress{Phase: PhaseWaitingForPods}, nil
	}
	if !st.NoOpenSlots() {
		p, err := fixOpenSlots(ctx, f, st, req.moveOptions())
		return p, partialStep(err)
	}
	if meets := planReconnect(st); len(meets) > 0 {
		b := newBootstrapper(f)
		return ScaleProgress{Phase: PhaseMeeting, Actions: meets}, b.execute(ctx, st, meets)
	}
	// MIGRATE needs the target's cluster_state ok (a fresh node reports fail for a moment
	// after it learns the slots), and SETSLOT NODE needs every node to know the target.
	if !st.AllMet() || !st.Agreed() || !st.ClusterOK() {
		return ScaleProgress{Phase: PhaseConverging}, nil
	}
	if act, ok := spareReplicaToRelease(st, req); ok {
		return releaseReplica(ctx, f, st, act)
	}
	plan, err := planScale(st, req)
	if err != nil {
		return ScaleProgress{Phase: PhaseRefused}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	// A node holding keys refuses (wrapping ErrRefused); a DBSIZE that failed is retried.
	if err := checkNoKeys(ctx, f, st, plan.empty); err != nil {
		phase := PhaseConverging
		if errors.Is(err, ErrRefused) {
			phase = PhaseRefused
		}
		return ScaleProgress{Phase: phase}, err
	}
	if prog, wait, err := attachFresh(ctx, f, st, plan); wait || err != nil {
		return prog, err
	}
	if len(plan.moves) > 0 {
		if err := checkCapacity(ctx, f, st, plan.moves); err != nil {
			return ScaleProgress{Phase: PhaseRefused}, err
		}
		return migrate(ctx, f, st, plan.moves, req)
	}
	kept := members[:req.Keep]
	p, err := Heal(ctx, f, kept, req.Masters, req.ReplicasPerMaster)
	prog := ScaleProgress{Phase: p.Phase, Actions: p.Actions}
	if err != nil || len(p.Actions) > 0 {
		return prog, err
	}
	if req.Keep == len(members) {
		prog.Done = p.Done
		return prog, nil
	}
	if !p.Done && !keptFormed(st, req) {
		return prog, nil
	}
	return removeLeaving(ctx, f, st, req)
}

// ActionReleaseReplica turns a spare replica into an empty master (CLUSTER RESET).
const ActionReleaseReplica ActionKind = "ReleaseReplica"

// PhaseReleasing: a spare replica is being turned into an empty master.
const PhaseReleasing = "ReleasingReplica"

// spareReplicaToRelease finds, when the kept members have fewer nodes that are no replica
// than masters wanted, a replica to turn into an empty master: one whose master holds
// slots and keeps another replica, so its data stays in two copies. That is the case of a
// scale-in set back after a leaving master gave away its last slot: Redis made it a
// replica, and the larger size needs a master again. The replica of the master with the
// most replicas is taken, the highest member index on a tie. Nothing, when a node is
// flagged fail or pfail: Scale runs on an agreed, healthy cluster only.
func spareReplicaToRelease(st *ClusterState, req ScaleRequest) (Action, bool) {
	if req.Keep > len(st.Members) || !st.NoFailures() {
		return Action{}, false
	}
	kept := st.Members[:req.Keep]
	candidates := 0
	replicasOf := map[string][]int{}
	for i := range kept {
		self := kept[i].Self()
		if self == nil {
			return Action{}, false
		}
		if !self.Replica {
			candidates++
			continue
		}
		replicasOf[self.MasterID] = append(replicasOf[self.MasterID], i)
	}
	if candidates >= req.Masters {
		return Action{}, false
	}
	best, bestCount := -1, 1
	for i := range kept {
		self := kept[i].Self()
		reps := replicasOf[self.ID]
		if self.Replica || len(self.Slots) == 0 || len(reps) <= bestCount {
			continue
		}
		best, bestCount = reps[len(reps)-1], len(reps)
	}
	if best < 0 {
		return Action{}, false
	}
	return Action{Kind: ActionReleaseReplica, Member: best,
		Message: fmt.Sprintf("Made spare replica %s an empty master for the %d masters asked (its master keeps %d other replicas)",
			kept[best].Pod, req.Masters, bestCount-1)}, true
}

// releaseReplica resets the replica (soft: same node ID, its copy of the data dropped,
// every node forgotten); the next step meets it again as an empty master.
func releaseReplica(ctx context.Context, f Factory, st *ClusterState, act Action) (ScaleProgress, error) {
	prog := ScaleProgress{Phase: PhaseReleasing, Actions: []Action{act}}
	m, err := mover(f.For(st.Members[act.Member].Addr))
	if err != nil {
		return prog, err
	}
	return prog, m.ClusterReset(ctx)
}

// PhaseSyncingReplicas: a new master waits for its replicas' initial sync before it
// receives slots.
const PhaseSyncingReplicas = "WaitingForReplicaSync"

// KeysError refuses a node that holds keys but no slots: giving it slots would serve
// those keys as if they belonged there, and making it a replica would drop them.
type KeysError struct {
	Pod, Addr string
	Keys      int64
}

func (e *KeysError) Error() string {
	return fmt.Sprintf("pod %s (%s) holds %d keys but no slots; refusing to give it slots or make it a replica (empty it, or delete its data, first)",
		e.Pod, e.Addr, e.Keys)
}

// checkNoKeys reads DBSIZE of the kept masters holding no slot, as bootstrap does before
// claiming a node. The error wraps ErrRefused and names the first one holding keys.
func checkNoKeys(ctx context.Context, f Factory, st *ClusterState, empty []int) error {
	if len(empty) == 0 {
		return nil
	}
	if err := newBootstrapper(f).readKeys(ctx, st, empty); err != nil {
		return fmt.Errorf("failed to count keys of empty masters: %w", err)
	}
	for _, i := range empty {
		if m := &st.Members[i]; m.Keys > 0 {
			return fmt.Errorf("%w: %w", ErrRefused, &KeysError{Pod: m.Pod, Addr: m.Addr, Keys: m.Keys})
		}
	}
	return nil
}

// attachFresh makes the members AssignReplicas places on a fresh master (empty masters
// only: a replica of another master is never taken away) replicate it, and reports wait
// while a fresh master's replica is not attached or not yet in sync (master_link_status
// up, no full sync in progress). A fresh master with no member to spare for it goes on
// without a replica.
func attachFresh(ctx context.Context, f Factory, st *ClusterState, plan scalePlan) (ScaleProgress, bool, error) {
	prog := ScaleProgress{Phase: PhaseReplicating}
	isFresh, isEmpty := setOf(plan.fresh), setOf(plan.empty)
	var acts []Action
	var linked []int
	for _, r := range sortedKeys(plan.replicaOf) {
		m := plan.replicaOf[r]
		if !isFresh[m] {
			continue
		}
		self, mid := st.Members[r].Self(), st.Members[m].ID()
		switch {
		case self.Replica && self.MasterID == mid:
			linked = append(linked, r)
		case isEmpty[r]:
			acts = append(acts, Action{Kind: ActionReplicate, Member: r, Target: m, MasterID: mid,
				Message: fmt.Sprintf("Made %s a replica of new master %s before it receives slots", st.Members[r].Pod, st.Members[m].Pod)})
		}
	}
	if len(acts) > 0 {
		prog.Actions = acts
		if err := newBootstrapper(f).execute(ctx, st, acts); err != nil {
			return prog, true, fmt.Errorf("failed to attach replicas to new masters: %w", err)
		}
		return prog, true, nil
	}
	for _, r := range linked {
		rep, err := f.For(st.Members[r].Addr).Replication(ctx)
		if err != nil {
			return prog, true, err
		}
		if !rep.InSync() {
			prog.Phase = PhaseSyncingReplicas
			return prog, true, nil
		}
	}
	return prog, false, nil
}

func setOf(idx []int) map[int]bool {
	out := make(map[int]bool, len(idx))
	for _, i := range idx {
		out[i] = true
	}
	return out
}

// keptFormed reports whether the kept members alone hold every slot with their replicas.
func keptFormed(st *ClusterState, req ScaleRequest) bool {
	sub := &ClusterState{Members: st.Members[:req.Keep]}
	return sub.AllSlotsCovered() && sub.Masters() == req.Masters && sub.MastersHaveReplicas(req.ReplicasPerMaster)
}

// removeLeaving forgets the leaving nodes on every kept member that knows them, then
// resets the leaving nodes so they cannot gossip the kept ones back (FORGET bans an ID
// for only 60 s), as `redis-cli --cluster del-node` does.
func removeLeaving(ctx context.Context, f Factory, st *ClusterState, req ScaleRequest) (ScaleProgress, error) {
	prog := ScaleProgress{Phase: PhaseRemoving}
	var acts []Action
	for l := req.Keep; l < len(st.Members); l++ {
		id := st.Members[l].ID()
		for i := 0; i < req.Keep; i++ {
			if st.Members[i].find(id) != nil {
				acts = append(acts, Action{Kind: ActionForget, Member: i, NodeID: id,
					Message: fmt.Sprintf("Made %s forget leaving node %s (%s)", st.Members[i].Pod, st.Members[l].Pod, id)})
			}
		}
	}
	prog.Actions = acts
	if err := newBootstrapper(f).execute(ctx, st, acts); err != nil {
		return prog, err
	}
	for l := req.Keep; l < len(st.Members); l++ {
		m, err := mover(f.For(st.Members[l].Addr))
		if err != nil {
			return prog, err
		}
		if len(st.Members[l].Nodes) > 1 {
			if err := m.ClusterReset(ctx); err != nil {
				return prog, err
			}
		}
	}
	prog.Done = true
	return prog, nil
}

// partialStep turns ErrBudgetSpent into a step that simply did less: the slot it left
// open is finished by the next step.
func partialStep(err error) error {
	if errors.Is(err, ErrBudgetSpent) {
		return nil
	}
	return err
}

// groupSlots is the most slots one MigrateSlots call opens at once between a source and
// a target. Each slot costs a nodes.conf rewrite per SETSLOT round on every node it
// touches, and Redis rewrites once per event-loop turn whatever the number of SETSLOTs in
// it, so opening slots together saves most of the per-slot cost; 32 keeps a group short
// (a few tens of ms at 100 keys a slot) so the budget is checked often.
const groupSlots = 32

// moveOptions are the MoveOptions of the request's MIGRATE batches, with one Limiter for
// the whole step when keys per second are capped.
func (req ScaleRequest) moveOptions() MoveOptions {
	return MoveOptions{Pipeline: req.Pipeline, Limiter: NewKeyLimiter(req.MaxKeysPerSecond, req.Pipeline)}
}

// groupSize is the most slots of one pair opened at once: groupSlots, or with a cap on
// keys per second about one batch a slot for a second's worth of keys, so a capped
// group closes within about a second (at a few keys a slot) and Stop is asked often.
func (req ScaleRequest) groupSize() int {
	if req.MaxKeysPerSecond <= 0 {
		return groupSlots
	}
	return max(1, min(groupSlots, req.MaxKeysPerSecond/max(1, req.Pipeline)))
}

// stopped reports whether the caller asked the step to end (Stop).
func (req ScaleRequest) stopped() bool { return req.Stop != nil && req.Stop() }

// migrate moves planned slots until the budget is spent or Stop says so. Moves of the same source and
// target go in groups (MigrateSlots); groups run at once where disjoint allows: one
// stream per source, so every source's MIGRATE stays as bounded as alone, and up to
// streamsPerTarget streams into one target.
func migrate(ctx context.Context, f Factory, st *ClusterState, moves []SlotMove, req ScaleRequest) (ScaleProgress, error) {
	prog := ScaleProgress{Phase: PhaseMigrating, Remaining: len(moves)}
	addr := addrsByID(st)
	opts := req.moveOptions()
	groups := groupMoves(moves, req.groupSize())
	start := time.Now()
	for len(groups) > 0 {
		if req.Budget > 0 && time.Since(start) > req.Budget || req.stopped() {
			break
		}
		var round []moveGroup
		round, groups = disjoint(groups)
		results := make([]groupResult, len(round))
		var wg sync.WaitGroup
		for i, g := range round {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := MigrateSlots(ctx, f, g.slots, MasterAddr{ID: g.from, Addr: addr[g.from]}, MasterAddr{ID: g.to, Addr: addr[g.to]},
					otherAddrs(st, g.from, g.to), opts)
				results[i] = groupResult{keys: n, err: err}
			}()
		}
		wg.Wait()
		var first error
		for i, r := range results {
			prog.MovedKeys += r.keys
			if r.err != nil {
				if first == nil {
					first = r.err
				}
				continue
			}
			prog.MovedSlots += len(round[i].slots)
			prog.Remaining -= len(round[i].slots)
		}
		if first != nil {
			return prog, partialStep(first)
		}
	}
	return prog, nil
}

// moveGroup is slots to move from one master to another together.
type moveGroup struct {
	from, to string
	slots    []int
}

type groupResult struct {
	keys int
	err  error
}

// groupMoves cuts the moves into groups of at most size slots of one source and target,
// in plan order.
func groupMoves(moves []SlotMove, size int) []moveGroup {
	var out []moveGroup
	open := map[[2]string]int{} // pair -> index in out of its group being filled
	for _, mv := range moves {
		pair := [2]string{mv.From, mv.To}
		i, ok := open[pair]
		if !ok || len(out[i].slots) >= size {
			out = append(out, moveGroup{from: mv.From, to: mv.To})
			i = len(out) - 1
			open[pair] = i
		}
		out[i].slots = append(out[i].slots, mv.Slot)
	}
	return out
}

// streamsPerTarget is how many sources stream into one target at once. Scale-out has
// one new master and every old one a source, so one stream per target would move one
// source at a time. A target's side of MIGRATE is RESTORE, which its event loop
// interleaves between the streams; a source's MIGRATE blocks the source for its batch,
// so a source still serves one stream.
const streamsPerTarget = 3

// disjoint takes, in order, the groups that can run together: a node is the source of
// one group, or the target of up to streamsPerTarget groups, never both. It returns them
// and the rest in their order.
func disjoint(groups []moveGroup) (taken, rest []moveGroup) {
	sources := map[string]bool{}
	targets := map[string]int{}
	for _, g := range groups {
		if sources[g.from] || targets[g.from] > 0 || sources[g.to] || targets[g.to] >= streamsPerTarget {
			rest = append(rest, g)
			continue
		}
		sources[g.from] = true
		targets[g.to]++
		taken = append(taken, g)
	}
	return taken, rest
}

// PlanScale is the moves left for the request, from one observation: none when the slot
// distribution matches the plan (the SlotsPlaced guard).
func PlanScale(st *ClusterState, req ScaleRequest) ([]SlotMove, error) {
	p, err := planScale(st, req)
	return p.moves, err
}

// scalePlan is one observation's plan of a resize.
type scalePlan struct {
	moves []SlotMove
	// fresh are the kept members chosen as masters that hold no slot yet: the new masters
	// still to be filled. They get their replicas, in sync, before any slot moves to them.
	fresh []int
	// replicaOf is replica → master (member indexes) for every kept member that is no
	// master, as AssignReplicas places them (another Kubernetes node where possible).
	replicaOf map[int]int
	// empty are the kept masters holding no slot: the fresh ones and the ones to become
	// replicas. Each must hold no key before it is given slots or a master.
	empty []int
}

// planScale chooses the masters after the resize (members holding slots stay masters;
// the others are picked by ChooseMasters, so every step picks the same ones), places the
// replicas, and plans the moves: PlanRebalance, or PlanAssign for AssignReceive.
func planScale(st *ClusterState, req ScaleRequest) (scalePlan, error) {
	var p scalePlan
	if req.Keep > len(st.Members) || req.Keep < 0 {
		return p, fmt.Errorf("keep %d of %d members", req.Keep, len(st.Members))
	}
	var fixed []int
	var leaving []MasterSlots
	replicas := map[int]int{}
	index := map[string]int{}
	for i := range st.Members {
		self := st.Members[i].Self()
		if self == nil {
			return p, fmt.Errorf("member %s did not answer", st.Members[i].Pod)
		}
		index[self.ID] = i
	}
	for i := range st.Members {
		self := st.Members[i].Self()
		switch {
		case i >= req.Keep:
			if len(self.Slots) > 0 {
				leaving = append(leaving, masterSlots(st, i))
			}
		case self.Replica:
			m, ok := index[self.MasterID]
			if !ok || m >= req.Keep {
				m = -1 // a replica of no kept member: not a candidate master either
			}
			replicas[i] = m
		case len(self.Slots) > 0:
			fixed = append(fixed, i)
		default:
			p.empty = append(p.empty, i)
		}
	}
	if len(fixed) > req.Masters {
		return p, fmt.Errorf("%d kept members hold slots but %d masters are wanted", len(fixed), req.Masters)
	}
	kept := memberList(&ClusterState{Members: st.Members[:req.Keep]})
	chosen := ChooseMasters(kept, fixed, replicas, req.Masters)
	if chosen == nil {
		return p, fmt.Errorf("%d kept members cannot make %d masters", req.Keep, req.Masters)
	}
	var keep []MasterSlots
	for _, i := range chosen {
		keep = append(keep, masterSlots(st, i))
		if len(st.Members[i].Self().Slots) == 0 {
			p.fresh = append(p.fresh, i)
		}
	}
	existing := map[int]int{}
	for r, m := range replicas {
		if m >= 0 {
			existing[r] = m
		}
	}
	p.replicaOf = AssignReplicas(kept, chosen, existing, req.ReplicasPerMaster)
	if req.Assign == nil || req.Keep < len(st.Members) {
		p.moves = PlanRebalance(keep, leaving)
		return p, nil
	}
	newMasters, err := assignedMasters(st, req, fixed, p.fresh)
	if err != nil {
		return p, err
	}
	p.moves, err = PlanAssign(keep, newMasters, req.Assign)
	return p, err
}

// assignedMasters lists the node IDs of the masters AssignReceive's entries are for, in
// order. Before the first slot moves, the fresh masters are exactly the added ones, and
// the entries must match them one to one. Once slots moved, a new master holds slots like
// an old one, and the new ones are the masters from ordinal NewFrom on.
func assignedMasters(st *ClusterState, req ScaleRequest, fixed, fresh []int) ([]string, error) {
	if len(req.Assign) == 0 {
		return nil, checkAssignCount(0, nil)
	}
	var ids []string
	if len(fresh) > 0 && (len(fixed) == 0 || fixed[len(fixed)-1] < fresh[0]) {
		if len(req.Assign) != len(fresh) {
			return nil, assignErr(-1, "", "%d entries, but this scale-out adds %d masters (%s): give exactly one entry per master added",
				len(req.Assign), len(fresh), podList(st, fresh))
		}
		for _, i := range fresh {
			ids = append(ids, st.Members[i].ID())
		}
		return ids, nil
	}
	if req.NewFrom < 0 || req.NewFrom >= len(st.Members) {
		return nil, assignErr(-1, "", "%d entries do not fit a cluster of %d masters: give exactly one entry per master added",
			len(req.Assign), req.Masters)
	}
	all := append(append([]int{}, fixed...), fresh...)
	sort.Ints(all) // entry i is for the i-th master added, in ordinal order
	for _, i := range all {
		if i >= req.NewFrom {
			ids = append(ids, st.Members[i].ID())
		}
	}
	return ids, nil
}

func masterSlots(st *ClusterState, i int) MasterSlots {
	self := st.Members[i].Self()
	return MasterSlots{ID: self.ID, Name: st.Members[i].Pod, Slots: self.Slots}
}

func hasID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func addrsByID(st *ClusterState) map[string]string {
	out := map[string]string{}
	for i := range st.Members {
		out[st.Members[i].ID()] = st.Members[i].Addr
	}
	return out
}

// otherAddrs are the masters holding slots but the named ones: told the new owner at once.
func otherAddrs(st *ClusterState, except ...string) []string {
	var out []string
	for i := range st.Members {
		self := st.Members[i].Self()
		if self.Master && len(self.Slots) > 0 && !hasID(except, self.ID) {
			out = append(out, st.Members[i].Addr)
		}
	}
	return out
}

func ownerOf(st *ClusterState, slot int) string {
	for i := range st.Members {
		if self := st.Members[i].Self(); self.Slots.Contains(slot) {
			return self.ID
		}
	}
	return ""
}

// KnowsOnly reports whether no member knows a node that is not one of the members: the
// RemovedNodesForgotten guard.
func (s *ClusterState) KnowsOnly() bool {
	if !s.AllReachable() {
		return false
	}
	ids := map[string]bool{}
	for _, id := range s.IDs() {
		ids[id] = true
	}
	for i := range s.Members {
		for _, n := range s.Members[i].Nodes {
			if !ids[n.ID] {
				return false
			}
		}
	}
	return true
}
