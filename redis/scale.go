package redis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
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
// (*AssignError); before slots move, one the kept masters' maxmemory cannot hold
// (*CapacityError). A refusal wraps ErrRefused and writes nothing.
func Scale(ctx context.Context, f Factory, members []topology.Member, req ScaleRequest) (ScaleProgress, error) {
	st, err := Observe(ctx, f, members)
	if err == nil {
		st, err = awaitAgreement(ctx, f, members, st)
	}
	if err != nil {
		return ScaleProgress{Phase: topology.PhaseWaitingForPods}, fmt.Errorf("failed to observe cluster: %w", err)
	}
	if !st.AllReachable() {
		return ScaleProgress{Phase: topology.PhaseWaitingForPods}, nil
	}
	if !st.NoOpenSlots() {
		keepLeavingApart(ctx, f, members, req)
		p, err := fixOpenSlots(ctx, f, st, req.moveOptions())
		return p, partialStep(err)
	}
	if meets := topology.PlanReconnect(st); len(meets) > 0 {
		b := newExecutor(f)
		return ScaleProgress{Phase: topology.PhaseMeeting, Actions: meets}, b.execute(ctx, st, meets)
	}
	// A lost node (a pod that came back empty, its old identity flagged fail and holding no
	// slots) keeps the views from agreeing until it is forgotten, as healing does.
	if len(st.PendingFailovers()) == 0 {
		if forgets := topology.PlanForget(st); len(forgets) > 0 {
			return ScaleProgress{Phase: topology.PhaseForgetting, Actions: forgets}, newExecutor(f).execute(ctx, st, forgets)
		}
	}
	// MIGRATE needs the target's cluster_state ok, and SETSLOT NODE needs every node to
	// know the target. A new master reports fail for 2 s after it starts and, if by then it
	// knows no slot owner, for the rejoin delay (min(node timeout, 5 s)) after it learns
	// one: so a member seen stale re-announces itself at once rather than at its next ping.
	if !st.AllMet() || !st.Agreed() || !st.ClusterOK() {
		acts := topology.PlanReannounce(st, nil)
		return ScaleProgress{Phase: topology.PhaseConverging, Actions: acts}, newExecutor(f).execute(ctx, st, acts)
	}
	if act, ok := topology.SpareReplicaToRelease(st, req.Shape()); ok {
		return releaseReplica(ctx, f, st, act)
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
	// With servers that move slots themselves, jobs of another plan (an abort, an operator
	// restarted) are cancelled and waited for before anything else, and running ones of
	// this plan are adopted, not started twice.
	var jobs map[string][]SlotMigration
	atomic := req.atomic(ctx, f, st)
	if atomic {
		var busy bool
		if jobs, busy, err = settleAtomic(ctx, f, st, plan.Moves); err != nil || busy {
			return ScaleProgress{Phase: PhaseMigrating, Remaining: len(plan.Moves), Mover: MoverAtomic}, err
		}
	}
	if len(plan.Moves) > 0 {
		mem, err := checkCapacity(ctx, f, st, plan.Moves)
		if err != nil {
			return ScaleProgress{Phase: topology.PhaseRefused}, err
		}
		keepLeavingApart(ctx, f, members, req)
		if atomic {
			return migrateAtomic(ctx, f, st, plan.Moves, req, jobs, mem)
		}
		return migrate(ctx, f, st, plan.Moves, req, mem)
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
	if !p.Done && !topology.KeptFormed(st, req.Shape()) {
		return prog, nil
	}
	return removeLeaving(ctx, f, st, req)
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
func checkNoKeys(ctx context.Context, f Factory, st *topology.ClusterState, empty []int) error {
	if len(empty) == 0 {
		return nil
	}
	if err := newExecutor(f).readKeys(ctx, st, empty); err != nil {
		return fmt.Errorf("failed to count keys of empty masters: %w", err)
	}
	for _, i := range empty {
		if m := &st.Members[i]; m.Keys > 0 {
			return fmt.Errorf("%w: %w", topology.ErrRefused, &KeysError{Pod: m.Pod, Addr: m.Addr, Keys: m.Keys})
		}
	}
	return nil
}

// attachFresh makes the members AssignReplicas places on a fresh master (empty masters
// only: a replica of another master is never taken away) replicate it, and reports wait
// while a fresh master's replica is not attached or not yet in sync (master_link_status
// up, no full sync in progress). A fresh master with no member to spare for it goes on
// without a replica.
func attachFresh(ctx context.Context, f Factory, st *topology.ClusterState, plan topology.ScalePlan) (ScaleProgress, bool, error) {
	prog := ScaleProgress{Phase: topology.PhaseReplicating}
	isFresh, isEmpty := setOf(plan.Fresh), setOf(plan.Empty)
	var acts []topology.Action
	var linked []int
	for _, r := range slices.Sorted(maps.Keys(plan.ReplicaOf)) {
		m := plan.ReplicaOf[r]
		if !isFresh[m] {
			continue
		}
		self, mid := st.Members[r].Self(), st.Members[m].ID()
		switch {
		case self.Replica && self.MasterID == mid:
			linked = append(linked, r)
		case isEmpty[r]:
			acts = append(acts, topology.Action{Kind: topology.ActionReplicate, Member: r, Target: m, MasterID: mid,
				Message: fmt.Sprintf("Made %s a replica of new master %s before it receives slots", st.Members[r].Pod, st.Members[m].Pod)})
		}
	}
	if len(acts) > 0 {
		prog.Actions = acts
		if err := newExecutor(f).execute(ctx, st, acts); err != nil {
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

// removeLeaving forgets the leaving nodes on every kept member that knows them, then
// resets the leaving nodes so they cannot gossip the kept ones back (FORGET bans an ID
// for only 60 s), as `redis-cli --cluster del-node` does: once they have redirected no
// client for a moment (awaitNoRedirects). A leaving node that knows only itself is
// already reset.
func removeLeaving(ctx context.Context, f Factory, st *topology.ClusterState, req ScaleRequest) (ScaleProgress, error) {
	prog := ScaleProgress{Phase: PhaseRemoving}
	var acts []topology.Action
	for l := req.Keep; l < len(st.Members); l++ {
		id := st.Members[l].ID()
		for i := 0; i < req.Keep; i++ {
			if st.Members[i].Find(id) != nil {
				acts = append(acts, topology.Action{Kind: topology.ActionForget, Member: i, NodeID: id,
					Message: fmt.Sprintf("Made %s forget leaving node %s (%s)", st.Members[i].Pod, st.Members[l].Pod, id)})
			}
		}
	}
	prog.Actions = acts
	if err := newExecutor(f).execute(ctx, st, acts); err != nil {
		return prog, err
	}
	var leaving []string
	for l := req.Keep; l < len(st.Members); l++ {
		if len(st.Members[l].Nodes) > 1 {
			leaving = append(leaving, st.Members[l].Addr)
		}
	}
	awaitNoRedirects(ctx, f, leaving)
	for _, addr := range leaving {
		m := f.For(addr)
		if err := m.ClusterReset(ctx); err != nil {
			return prog, err
		}
	}
	prog.Done = true
	return prog, nil
}

// keepLeavingApart stops the leaving members from following their slots. By default
// (cluster-allow-replica-migration yes) a master that gives away its last slot turns
// replica of the node that took it, and its replicas follow. Each then copies that node's
// whole data set (a full sync, a fork on the taker) just before it is reset, and a
// replica that has just synced rewrites its AOF, during which Redis refuses SIGTERM
// ("Writing initial AOF, can't exit"): the pod then waits out its whole grace period
// when the StatefulSet shrinks. With the directive off on the leaving members they stay
// an empty master and its replicas until removeLeaving resets them. It is set in the steps
// that can move a slot (migrating, finishing an open slot), not in those that wait. CONFIG
// SET only, not the config file: the pods go. Best effort: a Redis before 6.2 has no such
// directive and turns replica as before, which costs time, not data.
func keepLeavingApart(ctx context.Context, f Factory, members []topology.Member, req ScaleRequest) {
	for _, m := range members[min(req.Keep, len(members)):] {
		if c := f.For(m.Addr); c != nil {
			_ = c.ConfigSet(ctx, ReplicaMigration, "no")
		}
	}
}

// ReplicaMigration is the directive keepLeavingApart turns off on the leaving members.
const ReplicaMigration = "cluster-allow-replica-migration"

// RestoreReplicaMigration sets cluster-allow-replica-migration to want on the nodes at
// addrs that have another value, and counts them. keepLeavingApart turns it off on the
// members leaving at the time; when the resize is set back (an abort) some of them stay,
// and would keep it off until they restart: their replicas would not move to a master left
// without one, and an emptied master would not turn replica. Values compare without case.
// A node that cannot be read or refuses is the error (the others are still set).
func RestoreReplicaMigration(ctx context.Context, f Factory, addrs []string, want string) (int, error) {
	n := 0
	var errs []error
	for _, addr := range addrs {
		c := f.For(addr)
		v, err := c.ConfigGet(ctx, ReplicaMigration)
		if errors.Is(err, errUnknownParameter) {
			continue // before Redis 6.2: nothing was turned off
		}
		if err == nil && !strings.EqualFold(v, want) {
			if err = c.ConfigSet(ctx, ReplicaMigration, want); err == nil {
				n++
			}
		}
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// partialStep turns ErrBudgetSpent into a step that simply did less: the slot it left
// open is finished by the next step.
func partialStep(err error) error {
	if errors.Is(err, ErrBudgetSpent) {
		return nil
	}
	return err
}

// A group is the slots of one source and target that move together (MigrateSlots). Its
// cost on the nodes is per group, not per slot: each SETSLOT round is one pipeline and
// one nodes.conf rewrite on every node it touches, and its claim one epoch bump, one
// PONG broadcast and one nodes.conf fsync on every node of the cluster. So big groups
// move faster: 128 slots rather than 32 moved a quarter of 1,000,000 keys about 9% faster
// out and in (bench/README.md, 2026-11-26). But Stop and the budget are asked only
// between groups, so a group also holds, on its source's average a slot, at most about
// groupKeys keys and groupBytes of data (a tenth of a second or two of one stream here);
// and unknownGroupSlots, the size groups had before, when the source's figures could not
// be read.
const (
	groupSlots        = 128
	groupKeys         = 8192
	groupBytes        = 16 << 20
	unknownGroupSlots = 32
)

// moveOptions are the MoveOptions of the request's MIGRATE batches, with one Limiter for
// the whole step when keys per second are capped.
func (req ScaleRequest) moveOptions() MoveOptions {
	return MoveOptions{Pipeline: req.Pipeline, NodeTimeout: req.NodeTimeout, Limiter: NewKeyLimiter(req.MaxKeysPerSecond, req.Pipeline)}
}

// slotLoad is a source's keys and data (used_memory_dataset) a slot, on average.
type slotLoad struct {
	keys, bytes float64
}

// groupSize is the most slots of one pair opened at once, from its source's load
// (known false when it could not be read): groupSlots, fewer where that many slots would
// hold more than groupKeys keys or groupBytes of data, unknownGroupSlots when unknown;
// and with a cap on keys per second about a second's worth of keys (a slot's keys, or
// one batch a slot when slots hold fewer), so a capped group closes within about a
// second and Stop is asked often.
func (req ScaleRequest) groupSize(load slotLoad, known bool) int {
	n := unknownGroupSlots
	if known {
		n = groupSlots
		if load.keys > 0 {
			n = min(n, max(1, int(groupKeys/load.keys)))
		}
		if load.bytes > 0 {
			n = min(n, max(1, int(groupBytes/load.bytes)))
		}
	}
	if req.MaxKeysPerSecond > 0 {
		perSlot := max(1, req.Pipeline, int(math.Ceil(load.keys)))
		n = min(n, max(1, req.MaxKeysPerSecond/perSlot))
	}
	return n
}

// sourceLoads is each source's keys (DBSIZE, read in parallel) and data (mem, the INFO
// memory checkCapacity read, when it has the source) over the slots it owns; a source
// whose DBSIZE cannot be read is left out.
func sourceLoads(ctx context.Context, f Factory, st *topology.ClusterState, moves []topology.SlotMove, mem map[string]topology.Memory) map[string]slotLoad {
	from := map[string]bool{}
	for _, mv := range moves {
		from[mv.From] = true
	}
	var sources []int
	for i := range st.Members {
		if self := st.Members[i].Self(); self != nil && from[self.ID] && self.Slots.Count() > 0 {
			sources = append(sources, i)
		}
	}
	loads := make([]*slotLoad, len(st.Members))
	_ = parallel(sources, func(i int) error {
		keys, err := f.For(st.Members[i].Addr).DBSize(ctx)
		if err == nil {
			slots := float64(st.Members[i].Self().Slots.Count())
			loads[i] = &slotLoad{keys: float64(keys) / slots, bytes: float64(mem[st.Members[i].ID()].Dataset) / slots}
		}
		return err
	})
	out := map[string]slotLoad{}
	for _, i := range sources {
		if loads[i] != nil {
			out[st.Members[i].ID()] = *loads[i]
		}
	}
	return out
}

// Shape is the part of the request the planners read.
func (req ScaleRequest) Shape() topology.ScaleShape {
	return topology.ScaleShape{Masters: req.Masters, ReplicasPerMaster: req.ReplicasPerMaster, Keep: req.Keep,
		Assign: req.Assign, NewFrom: req.NewFrom}
}

// atomic: the step moves slots with the servers' own migration (migrateAtomic): every
// member says it runs a server with it (INFO server, read now, not the CR's version), no
// cap on keys per second is asked (ASM has none) and the request does not forbid it.
func (req ScaleRequest) atomic(ctx context.Context, f Factory, st *topology.ClusterState) bool {
	return !req.LegacyMover && req.MaxKeysPerSecond == 0 && UsesAtomicMigration(membersServers(ctx, f, st))
}

// stopped reports whether the caller asked the step to end (Stop).
func (req ScaleRequest) stopped() bool { return req.Stop != nil && req.Stop() }

// migrate moves planned slots until the budget is spent or Stop says so. Moves of the same
// source and target go in groups (MigrateSlots), and groups run at once where the streams
// allow: up to streamsPerSource from one source, up to streamsPerTarget into one target.
// A stream takes its next group as soon as its last one is done, without waiting for the
// others', so streams fall out of step: while one is between MIGRATEs (its SETSLOT rounds,
// its listings) another's MIGRATEs keep the source busy.
func migrate(ctx context.Context, f Factory, st *topology.ClusterState, moves []topology.SlotMove, req ScaleRequest, mem map[string]topology.Memory) (ScaleProgress, error) {
	prog := ScaleProgress{Phase: PhaseMigrating, Remaining: len(moves), Mover: MoverLegacy}
	addr := topology.AddrsByID(st)
	opts := req.moveOptions()
	opts.gates = newNodeGates()
	loads := sourceLoads(ctx, f, st, moves, mem)
	pending := groupMoves(moves, func(from string) int {
		load, known := loads[from]
		return req.groupSize(load, known)
	})
	busy := newStreams()
	done := make(chan groupResult)
	inFlight := 0
	start := time.Now()
	var first error
	for {
		if first == nil && !(req.Budget > 0 && time.Since(start) > req.Budget) && !req.stopped() {
			var taken []moveGroup
			taken, pending = busy.take(pending)
			for _, g := range taken {
				inFlight++
				go func() {
					n, err := MigrateSlots(ctx, f, g.slots, MasterAddr{ID: g.from, Addr: addr[g.from]}, MasterAddr{ID: g.to, Addr: addr[g.to]},
						topology.OtherAddrs(st, g.from, g.to), opts)
					done <- groupResult{group: g, keys: n, err: err}
				}()
			}
		}
		if inFlight == 0 {
			break
		}
		r := <-done
		inFlight--
		busy.release(r.group)
		prog.MovedKeys += r.keys
		if r.err != nil {
			if first == nil {
				first = r.err
			}
			continue
		}
		prog.MovedSlots += len(r.group.slots)
		prog.Remaining -= len(r.group.slots)
	}
	if first != nil {
		return prog, partialStep(first)
	}
	return prog, nil
}

// moveGroup is slots to move from one master to another together.
type moveGroup struct {
	from, to string
	slots    []int
}

type groupResult struct {
	group moveGroup
	keys  int
	err   error
}

// groupMoves cuts the moves into groups of at most size(source) slots of one source and
// target, in plan order.
func groupMoves(moves []topology.SlotMove, size func(from string) int) []moveGroup {
	var out []moveGroup
	open := map[[2]string]int{} // pair -> index in out of its group being filled
	for _, mv := range moves {
		pair := [2]string{mv.From, mv.To}
		i, ok := open[pair]
		if !ok || len(out[i].slots) >= size(mv.From) {
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
// interleaves between the streams.
const streamsPerTarget = 3

// streamsPerSource is how many groups one source moves at once. A
// source's MIGRATE blocks it for its batch, so two MIGRATEs of one source never overlap:
// the second waits for the first, as a client's command does, and no command waits
// behind more than that. A big key's MIGRATE, seconds long, takes its source and target
// to itself (gate.go): the other streams wait for it at the gate, not on the wire, where
// their timeouts would cut them off. What the second stream buys is the rest of a group's time: its
// SETSLOT rounds, key listings and sizes on the other nodes and in the operator, during
// which one stream leaves the source idle. It matters where a single master is emptied
// (scale-in), the one case with one source.
const streamsPerSource = 2

// streams are the groups moving now: a node is the source of up to streamsPerSource
// groups, or the target of up to streamsPerTarget groups, never both.
type streams struct {
	sources map[string]int
	targets map[string]int
	pairs   map[[2]string]int
}

func newStreams() *streams {
	return &streams{sources: map[string]int{}, targets: map[string]int{}, pairs: map[[2]string]int{}}
}

// take takes, in order, the groups that can start beside those moving, and returns them
// and the rest in their order. A source's first stream comes before any source's second,
// so several sources into one target (scale-out) each get a stream before one gets two.
// A source's second stream goes to another target than its first when one is left
// (scale-in plans each target's slots as one run): two targets restore at once.
func (s *streams) take(groups []moveGroup) (taken, rest []moveGroup) {
	for perSource := 1; perSource <= streamsPerSource; perSource++ {
		for _, samePair := range []bool{false, true} {
			rest = nil
			for _, g := range groups {
				pair := [2]string{g.from, g.to}
				if s.sources[g.from] >= perSource || s.targets[g.from] > 0 || s.sources[g.to] > 0 ||
					s.targets[g.to] >= streamsPerTarget || !samePair && s.pairs[pair] > 0 {
					rest = append(rest, g)
					continue
				}
				s.sources[g.from]++
				s.targets[g.to]++
				s.pairs[pair]++
				taken = append(taken, g)
			}
			groups = rest
		}
	}
	return taken, rest
}

// release ends g's stream.
func (s *streams) release(g moveGroup) {
	if s.sources[g.from]--; s.sources[g.from] <= 0 {
		delete(s.sources, g.from)
	}
	pair := [2]string{g.from, g.to}
	if s.pairs[pair]--; s.pairs[pair] <= 0 {
		delete(s.pairs, pair)
	}
	if s.targets[g.to]--; s.targets[g.to] <= 0 {
		delete(s.targets, g.to)
	}
}
