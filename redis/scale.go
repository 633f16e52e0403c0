package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// ScaleRequest is what a resize asks: members[:Keep] stay (all of them on scale-out),
// members[Keep:] leave; the kept members end as Masters masters with ReplicasPerMaster
// replicas each.
type ScaleRequest struct {
	Masters, ReplicasPerMaster int
	Keep                       int
	// Pipeline is the number of keys per MIGRATE batch.
	Pipeline int
	// NodeTimeout is the cluster-node-timeout in force (MoveOptions.NodeTimeout).
	NodeTimeout time.Duration
	// Assign is AssignReceive's entries; nil for AutoReceive. NewFrom is the first
	// ordinal of the pods added by this scale-out: masters from there on are the new ones.
	Assign  []topology.Assignment
	NewFrom int
	// Budget bounds the slots migrated in one step; the next step goes on from Redis' state.
	Budget time.Duration
	// MaxKeysPerSecond caps the keys moved per second by the step's streams together; 0
	// for no cap. A capped step also opens fewer slots at once (groupSize).
	MaxKeysPerSecond int
	// Stop, when set, is asked before groups of slots start: true ends the step after
	// the slots in flight, every one of them closed (pause, or a new size asked).
	Stop func() bool
	// LegacyMover forces the legacy mover where the servers could move slots themselves
	// (benches comparing the two).
	LegacyMover bool
	// Servers is what each member runs (INFO server) as the caller already learnt it, by
	// pod name: the mover is chosen from it. A member missing, or not known, has every
	// member read again (INFO server) for the step.
	Servers map[string]topology.Server
	// Refused is a refusal the caller already found planning this resize from its own
	// observation (an *topology.AssignError: AssignReceive's entries do not fit the
	// cluster). The step refuses with it where it would plan, without planning again;
	// nil to have the step plan and find it.
	Refused error
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
	Actions                          []topology.Action
	// Mover is the slot mover the step used, when it moved slots: MoverAtomic or MoverLegacy.
	Mover string
	// Done: slots placed, replicas attached, leaving nodes forgotten and reset; on
	// scale-in the StatefulSet may shrink now.
	Done bool
}

// Slot movers (ScaleProgress.Mover).
const (
	// MoverAtomic: the servers move the slots themselves (CLUSTER MIGRATESLOTS,
	// migrate_atomic.go).
	MoverAtomic = "atomic"
	// MoverLegacy: the operator moves keys with MIGRATE between SETSLOT markers (migrate.go).
	MoverLegacy = "legacy"
)

// Scale takes one bounded step of a resize, planned from Redis' own state each time, so
// it resumes after any interruption: an open slot is finished first, then the members
// meet and lost nodes are forgotten; then the new masters get their replicas, and slots move to a new master only once
// its replicas are in sync, so losing its pod mid-migration loses nothing (Redis promotes
// the replica). Then slots migrate (PlanRebalance or PlanAssign) until the budget is
// spent, then the other replicas are attached (Heal), and on scale-in the leaving nodes
// are forgotten by every kept member and reset. Before anything is written, a step
// refuses a node holding keys but no slots (*KeysError) and bad AssignReceive entries
// (*AssignError, or req.Refused); before slots move, one the kept masters' maxmemory cannot hold
// (*CapacityError). A refusal wraps ErrRefused and writes nothing.
func Scale(ctx context.Context, f Factory, members []topology.Member, req ScaleRequest) (ScaleProgress, error) {
	st, prog, acted, err := convergeForResize(ctx, f, members, req)
	if acted {
		return prog, err
	}
	if req.Refused != nil {
		return ScaleProgress{Phase: topology.PhaseRefused}, fmt.Errorf("%w: %w", topology.ErrRefused, req.Refused)
	}
	plan, err := topology.PlanResize(st, req.Shape())
	if err != nil {
		return ScaleProgress{Phase: topology.PhaseRefused}, fmt.Errorf("%w: %w", topology.ErrRefused, err)
	}
	// A node holding keys refuses (wrapping ErrRefused); a DBSIZE that failed is retried.
	if err := checkNoKeys(ctx, f, st, plan.Empty); err != nil {
		phase := topology.PhaseConverging
		if errors.Is(err, topology.ErrRefused) {
			phase = topology.PhaseRefused
		}
		return ScaleProgress{Phase: phase}, err
	}
	if prog, wait, err := attachFresh(ctx, f, st, plan); wait || err != nil {
		return prog, err
	}
	if prog, moved, err := moveSlots(ctx, f, members, st, plan.Moves, req); moved {
		return prog, err
	}
	return finishResize(ctx, f, members, st, req)
}

// moveSlots takes the step's slot moves, with the servers' own migration where every
// member runs it (migrateAtomic), else the legacy mover (migrate); moved is false when
// nothing is left to move or wait for. With the servers' migration, jobs of another plan
// (an abort, an operator restarted) are cancelled and waited for before anything else,
// and running ones of this plan are adopted, not started twice. Before slots move, the
// kept masters' maxmemory must hold them (checkCapacity).
func moveSlots(ctx context.Context, f Factory, members []topology.Member, st *topology.ClusterState, moves []topology.SlotMove, req ScaleRequest) (ScaleProgress, bool, error) {
	var jobs map[string][]SlotMigration
	servers := req.servers(ctx, f, st)
	atomic := req.atomic(servers)
	if atomic {
		var busy bool
		var err error
		if jobs, busy, err = settleAtomic(ctx, f, st, moves); err != nil || busy {
			return ScaleProgress{Phase: PhaseMigrating, Remaining: len(moves), Mover: MoverAtomic}, true, err
		}
	}
	if len(moves) == 0 {
		return ScaleProgress{}, false, nil
	}
	mem, err := checkCapacity(ctx, f, st, moves)
	if err != nil {
		return ScaleProgress{Phase: topology.PhaseRefused}, true, err
	}
	keepLeavingApart(ctx, f, members, req)
	keepReceiversReplicasHome(ctx, f, st, servers, req.Keep, moves)
	var prog ScaleProgress
	if atomic {
		prog, err = migrateAtomic(ctx, f, st, moves, req, jobs, mem)
	} else {
		prog, err = migrate(ctx, f, st, moves, req, mem)
	}
	return prog, true, err
}

// finishResize, once every slot is placed, attaches the other replicas (Heal over the
// kept members) and, on scale-in, once the kept members are formed, removes the leaving
// nodes (removeLeaving).
func finishResize(ctx context.Context, f Factory, members []topology.Member, st *topology.ClusterState, req ScaleRequest) (ScaleProgress, error) {
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
	if !p.Done && !topology.KeptFormed(st, req.Shape()) {
		return prog, nil
	}
	return removeLeaving(ctx, f, st, req)
}

// partialStep turns ErrBudgetSpent into a step that simply did less: the slot it left
// open is finished by the next step.
func partialStep(err error) error {
	if errors.Is(err, ErrBudgetSpent) {
		return nil
	}
	return err
}

// Shape is the part of the request the planners read.
func (req ScaleRequest) Shape() topology.ScaleShape {
	return topology.ScaleShape{Masters: req.Masters, ReplicasPerMaster: req.ReplicasPerMaster, Keep: req.Keep,
		Assign: req.Assign, NewFrom: req.NewFrom}
}

// atomic: the step moves slots with the servers' own migration (migrateAtomic): every
// member says it runs a server with it (INFO server, as the caller learnt it or read now,
// not the CR's version), no cap on keys per second is asked (ASM has none) and the
// request does not forbid it.
func (req ScaleRequest) atomic(servers []topology.Server) bool {
	return !req.LegacyMover && req.MaxKeysPerSecond == 0 && UsesAtomicMigration(servers)
}

// servers is what each member runs: what the caller learnt (Servers) when it knows every
// member, else read from every member now (membersServers).
func (req ScaleRequest) servers(ctx context.Context, f Factory, st *topology.ClusterState) []topology.Server {
	out := make([]topology.Server, len(st.Members))
	for i := range st.Members {
		srv, ok := req.Servers[st.Members[i].Pod]
		if !ok || !srv.Known() {
			return membersServers(ctx, f, st)
		}
		out[i] = srv
	}
	return out
}

// stopped reports whether the caller asked the step to end (Stop).
func (req ScaleRequest) stopped() bool { return req.Stop != nil && req.Stop() }
