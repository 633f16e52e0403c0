package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Before a resize plans: the cluster observed until its views agree, an open slot
// finished, the members met, lost nodes forgotten, stale views re-announced and a spare
// replica released.

// convergeForResize observes the members and takes the first step the cluster needs
// before a resize can be planned from it; acted is true when it took one (or found a
// member unreachable), and prog and err are then the step's. Otherwise st is the state
// to plan from.
func convergeForResize(ctx context.Context, f Factory, members []topology.Member, req ScaleRequest) (st *topology.ClusterState, prog ScaleProgress, acted bool, err error) {
	st, err = Observe(ctx, f, members)
	if err == nil {
		st, err = awaitAgreement(ctx, f, members, st)
	}
	if err != nil {
		return st, ScaleProgress{Phase: topology.PhaseWaitingForPods}, true, fmt.Errorf("failed to observe cluster: %w", err)
	}
	if !st.AllReachable() {
		return st, ScaleProgress{Phase: topology.PhaseWaitingForPods}, true, nil
	}
	if !st.NoOpenSlots() {
		keepLeavingApart(ctx, f, members, req)
		keepReceiversReplicasHome(ctx, f, st, req.servers(ctx, f, st), req.Keep, nil)
		p, err := fixOpenSlots(ctx, f, st, req.moveOptions())
		return st, p, true, partialStep(err)
	}
	if meets := topology.PlanReconnect(st); len(meets) > 0 {
		return st, ScaleProgress{Phase: topology.PhaseMeeting, Actions: meets}, true, newExecutor(f).execute(ctx, st, meets)
	}
	// A lost node (a pod that came back empty, its old identity flagged fail and holding no
	// slots) keeps the views from agreeing until it is forgotten, as healing does.
	if len(st.PendingFailovers()) == 0 {
		if forgets := topology.PlanForget(st); len(forgets) > 0 {
			return st, ScaleProgress{Phase: topology.PhaseForgetting, Actions: forgets}, true, newExecutor(f).execute(ctx, st, forgets)
		}
	}
	// MIGRATE needs the target's cluster_state ok, and SETSLOT NODE needs every node to
	// know the target. A new master reports fail for 2 s after it starts and, if by then it
	// knows no slot owner, for the rejoin delay (min(node timeout, 5 s)) after it learns
	// one: so a member seen stale re-announces itself at once rather than at its next ping.
	if !st.AllMet() || !st.Agreed() || !st.ClusterOK() {
		acts := topology.PlanReannounce(st, nil)
		return st, ScaleProgress{Phase: topology.PhaseConverging, Actions: acts}, true, newExecutor(f).execute(ctx, st, acts)
	}
	if act, ok := topology.SpareReplicaToRelease(st, req.Shape()); ok {
		prog, err := releaseReplica(ctx, f, st, act)
		return st, prog, true, err
	}
	return st, ScaleProgress{}, false, nil
}

// agreementGrace is how long a step looks again at views that differ before it makes
// members re-announce themselves (PlanReannounce), and agreementPoll how often.
const (
	agreementGrace = 300 * time.Millisecond
	agreementPoll  = 20 * time.Millisecond
)

// awaitAgreement re-observes, for up to agreementGrace, a cluster whose members are all met
// and ok and agree on every node's role but not on who owns some slots, and returns the
// first state that agrees, or the last one. Between two steps of a migration that is gossip
// in flight: a replica learns a slot's new owner from the owner's PONG, sent when the slot
// closed, and on a busy machine reads it tens of milliseconds later. Re-announcing at once
// would not be sooner: each MEET leaves a handshake in its sender's view until the next
// cluster cron, and the step after that comes a requeue later. A role not yet known
// everywhere (a node just made a replica) is not waited for: only the node's own pings,
// seconds apart, would spread it, so it is re-announced at once as before, and so is what
// does not settle within the grace.
func awaitAgreement(ctx context.Context, f Factory, members []topology.Member, st *topology.ClusterState) (*topology.ClusterState, error) {
	deadline := time.Now().Add(agreementGrace)
	for st.AllMet() && st.ClusterOK() && !st.Agreed() && rolesAgree(st) && time.Now().Before(deadline) {
		if err := sleepCtx(ctx, agreementPoll); err != nil {
			return st, err
		}
		next, err := Observe(ctx, f, members)
		if err != nil {
			return next, err
		}
		st = next
	}
	return st, nil
}

// rolesAgree reports whether every member sees every member in the role, and with the
// master, that the member gives itself.
func rolesAgree(st *topology.ClusterState) bool {
	for i := range st.Members {
		self := st.Members[i].Self()
		for j := range st.Members {
			n := st.Members[j].Find(self.ID)
			if n == nil || !n.SameRole(*self) {
				return false
			}
		}
	}
	return true
}

// releaseReplica resets the replica (soft: same node ID, its copy of the data dropped,
// every node forgotten); the next step meets it again as an empty master.
func releaseReplica(ctx context.Context, f Factory, st *topology.ClusterState, act topology.Action) (ScaleProgress, error) {
	prog := ScaleProgress{Phase: topology.PhaseReleasing, Actions: []topology.Action{act}}
	m := f.For(st.Members[act.Member].Addr)
	return prog, m.ClusterReset(ctx)
}
