package redis

import (
	"context"
	"errors"
	"fmt"
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
// meet, then slots migrate (PlanRebalance or PlanAssign) until the budget is spent, then
// replicas are attached (Heal), and on scale-in the leaving nodes are forgotten by every
// kept member and reset. A refusal wraps ErrRefused and writes nothing.
func Scale(ctx context.Context, f Factory, members []Member, req ScaleRequest) (ScaleProgress, error) {
	st, err := Observe(ctx, f, members)
	if err != nil {
		return ScaleProgress{Phase: PhaseWaitingForPods}, fmt.Errorf("failed to observe cluster: %w", err)
	}
	if !st.AllReachable() {
		return ScaleProgress{Phase: PhaseWaitingForPods}, nil
	}
	if !st.NoOpenSlots() {
		p, err := fixOpenSlots(ctx, f, st, MoveOptions{Pipeline: req.Pipeline})
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
	moves, err := PlanScale(st, req)
	if err != nil {
		return ScaleProgress{Phase: PhaseRefused}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if len(moves) > 0 {
		return migrate(ctx, f, st, moves, req)
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

// migrate moves planned slots until the budget is spent.
func migrate(ctx context.Context, f Factory, st *ClusterState, moves []SlotMove, req ScaleRequest) (ScaleProgress, error) {
	prog := ScaleProgress{Phase: PhaseMigrating, Remaining: len(moves)}
	addr := addrsByID(st)
	start := time.Now()
	for _, mv := range moves {
		if req.Budget > 0 && time.Since(start) > req.Budget {
			break
		}
		n, err := MigrateSlot(ctx, f, mv.Slot, MasterAddr{ID: mv.From, Addr: addr[mv.From]}, MasterAddr{ID: mv.To, Addr: addr[mv.To]},
			otherAddrs(st, mv.From, mv.To), req.Pipeline)
		prog.MovedKeys += n
		if err != nil {
			return prog, partialStep(err)
		}
		prog.MovedSlots++
		prog.Remaining--
	}
	return prog, nil
}

// PlanScale is the moves left for the request, from one observation: none when the slot
// distribution matches the plan (the SlotsPlaced guard).
func PlanScale(st *ClusterState, req ScaleRequest) ([]SlotMove, error) {
	var keep, leaving []MasterSlots
	var empty []int
	for i := range st.Members {
		self := st.Members[i].Self()
		if self == nil {
			return nil, fmt.Errorf("member %s did not answer", st.Members[i].Pod)
		}
		ms := MasterSlots{ID: self.ID, Name: st.Members[i].Pod, Slots: self.Slots}
		switch {
		case i >= req.Keep:
			if len(self.Slots) > 0 {
				leaving = append(leaving, ms)
			}
		case self.Master && len(self.Slots) > 0:
			keep = append(keep, ms)
		case self.Master:
			empty = append(empty, i)
		}
	}
	if len(keep) > req.Masters {
		return nil, fmt.Errorf("%d kept members hold slots but %d masters are wanted", len(keep), req.Masters)
	}
	var added []string
	for _, i := range empty {
		if len(keep) >= req.Masters {
			break
		}
		self := st.Members[i].Self()
		keep = append(keep, MasterSlots{ID: self.ID, Name: st.Members[i].Pod})
		added = append(added, self.ID)
	}
	if req.Assign == nil || req.Keep < len(st.Members) {
		return PlanRebalance(keep, leaving), nil
	}
	var newMasters []string
	for i := req.NewFrom; i < len(st.Members); i++ {
		if self := st.Members[i].Self(); self.Master && (len(self.Slots) > 0 || hasID(added, self.ID)) {
			newMasters = append(newMasters, self.ID)
		}
	}
	return PlanAssign(keep, newMasters, req.Assign)
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
