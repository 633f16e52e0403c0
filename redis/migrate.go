package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	goredis "github.com/go-redis/redis/v8"
	"golang.org/x/time/rate"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// slotMover is what migrating a slot needs from a node, beyond Admin: the admin of a
// Factory has it; fakes of Admin need not.
type slotMover interface {
	SetSlot(ctx context.Context, slot int, state, nodeID string) error
	SetSlots(ctx context.Context, slots []int, state, nodeID string) []error
	GetKeysInSlot(ctx context.Context, slot, count int) ([]string, error)
	GetKeysInSlots(ctx context.Context, slots []int, count int) ([][]string, error)
	Migrate(ctx context.Context, targetAddr string, keys []string, replace bool, timeout time.Duration) error
	Dump(ctx context.Context, key string) (string, error)
	CountKeysInSlot(ctx context.Context, slot int) (int64, error)
	ClusterReset(ctx context.Context) error
}

// SetSlot sends CLUSTER SETSLOT slot IMPORTING|MIGRATING|NODE nodeID, or STABLE.
func (a *admin) SetSlot(ctx context.Context, slot int, state, nodeID string) error {
	args := []interface{}{"cluster", "setslot", slot, state}
	if nodeID != "" {
		args = append(args, nodeID)
	}
	if err := a.c.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("failed to set slot %d %s %s on %s: %w", slot, state, nodeID, a.addr, err)
	}
	return nil
}

// SetSlots sends CLUSTER SETSLOT slot state [nodeID] for every slot in one pipeline: one
// round trip, and the node rewrites its nodes.conf once for all of them (it saves the
// config before it next sleeps, not per command) instead of once per slot. The errors are
// per slot, nil where it succeeded.
func (a *admin) SetSlots(ctx context.Context, slots []int, state, nodeID string) []error {
	cmds := make([]*goredis.Cmd, len(slots))
	_, _ = a.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, slot := range slots {
			args := []interface{}{"cluster", "setslot", slot, state}
			if nodeID != "" {
				args = append(args, nodeID)
			}
			cmds[i] = p.Do(ctx, args...)
		}
		return nil
	})
	errs := make([]error, len(slots))
	for i, c := range cmds {
		if err := c.Err(); err != nil {
			errs[i] = fmt.Errorf("failed to set slot %d %s %s on %s: %w", slots[i], state, nodeID, a.addr, err)
		}
	}
	return errs
}

// ClaimSlots gives slots that this node imports to this node (nodeID is its own ID), the
// target's part of closing a group of slots, with one PONG broadcast instead of one a slot.
//
// CLUSTER SETSLOT NODE of a slot the node imports does two things. It bumps the node's
// config epoch above every epoch the node knows, unless it is there already, so its claim
// beats the source's. And it broadcasts a PONG to every node of the cluster, which walks
// all 16384 slots of it. One broadcast a slot was about a seventh of Redis' CPU while keys
// moved (bench/README.md).
//
// So the claim is one transaction: CLUSTER BUMPEPOCH (the same bump), then SETSLOT STABLE
// and NODE for every slot but the last (STABLE clears IMPORTING: the same claim, without a
// bump or a broadcast), then NODE for the last, whose broadcast carries the whole group.
// MULTI/EXEC matters: Redis runs it at once however its bytes arrive, so no cluster-bus
// message can reach the node between its bump and a claim, and a connection lost before
// EXEC leaves every slot as it was (IMPORTING), never one between its STABLE and its NODE.
// Two things are read first on the same connection, so the transaction cannot fail half
// way (EXEC runs every command even if one fails): the node must be the master nodeID
// (CLUSTER NODES), else SETSLOT NODE could fail after its STABLE; and MULTI goes alone,
// since were it refused the commands after it would run one by one. A node that is not
// that master, or refuses the transaction (an operator user whose ACL rules predate it),
// gets SETSLOT NODE a slot, as before, and so does Valkey (below). The errors are per slot.
func (a *admin) ClaimSlots(ctx context.Context, slots []int, nodeID string) []error {
	if len(slots) <= 1 {
		return a.SetSlots(ctx, slots, "node", nodeID)
	}
	all := func(err error) []error {
		errs := make([]error, len(slots))
		for i := range errs {
			errs[i] = fmt.Errorf("failed to set slot %d node %s on %s: %w", slots[i], nodeID, a.addr, err)
		}
		return errs
	}
	conn := a.c.Conn(ctx)
	for _, h := range a.hooks {
		conn.AddHook(h)
	}
	nodes := goredis.NewStringCmd(ctx, "cluster", "nodes")
	if err := conn.Process(ctx, nodes); err != nil {
		conn.Close()
		return all(err)
	}
	if !isMasterNamed(nodes.Val(), nodeID) {
		conn.Close() // before the fallback takes a connection of its own
		return a.SetSlots(ctx, slots, "node", nodeID)
	}
	// Valkey 8 and later make CLUSTER SETSLOT wait for the node's replicas, which inside
	// MULTI trips an assertion and kills the server (Valkey 8.1.1: multi.c:244
	// 'c->flag.blocked == 0', seen in TestServers): there, a slot at a time.
	info := goredis.NewStringCmd(ctx, "info", "server")
	if err := conn.Process(ctx, info); err == nil && topology.ParseServer(info.Val()).SetSlotBlocks() {
		conn.Close()
		return a.SetSlots(ctx, slots, "node", nodeID)
	}
	if err := conn.Process(ctx, goredis.NewStatusCmd(ctx, "multi")); err != nil {
		conn.Close()
		if refusedCommand(err) {
			return a.SetSlots(ctx, slots, "node", nodeID)
		}
		return all(err)
	}
	// Queued, in order: BUMPEPOCH, then each slot's STABLE (all but the last) and NODE.
	owner := []int{-1}
	var exec *goredis.Cmd
	_, _ = conn.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Do(ctx, "cluster", "bumpepoch")
		for i, slot := range slots {
			if i < len(slots)-1 {
				p.Do(ctx, "cluster", "setslot", slot, "stable")
				owner = append(owner, i)
			}
			p.Do(ctx, "cluster", "setslot", slot, "node", nodeID)
			owner = append(owner, i)
		}
		exec = p.Do(ctx, "exec")
		return nil
	})
	conn.Close()
	replies, err := exec.Slice()
	switch {
	case err != nil && refusedCommand(err):
		// EXECABORT: a command was refused when queued, and Redis ran none of them.
		return a.SetSlots(ctx, slots, "node", nodeID)
	case err != nil:
		return all(err)
	case len(replies) != len(owner):
		return all(fmt.Errorf("EXEC answered %d replies for %d commands", len(replies), len(owner)))
	}
	errs := make([]error, len(slots))
	for j, r := range replies {
		e, failed := r.(error)
		switch {
		case !failed:
		case owner[j] < 0:
			return all(fmt.Errorf("CLUSTER BUMPEPOCH: %w", e))
		case errs[owner[j]] == nil:
			errs[owner[j]] = fmt.Errorf("failed to set slot %d node %s on %s: %w", slots[owner[j]], nodeID, a.addr, e)
		}
	}
	return errs
}

// isMasterNamed: the CLUSTER NODES text says this node ("myself") is the master id.
func isMasterNamed(clusterNodes, id string) bool {
	nodes, err := topology.ParseClusterNodes(clusterNodes)
	if err != nil {
		return false
	}
	for _, n := range nodes {
		if n.Myself {
			return n.ID == id && n.Master
		}
	}
	return false
}

// refusedCommand: Redis refused a command itself (NOPERM, unknown or renamed), or
// discarded a transaction because it refused one of its commands when queued (EXECABORT),
// before running anything.
func refusedCommand(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "EXECABORT") || strings.HasPrefix(msg, "NOPERM") || strings.HasPrefix(msg, "ERR unknown")
}

// slotClaimer is ClaimSlots, which the admin of a Factory has.
type slotClaimer interface {
	ClaimSlots(ctx context.Context, slots []int, nodeID string) []error
}

// GetKeysInSlots lists up to count keys of each slot, in one pipeline.
func (a *admin) GetKeysInSlots(ctx context.Context, slots []int, count int) ([][]string, error) {
	cmds := make([]*goredis.StringSliceCmd, len(slots))
	_, _ = a.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, slot := range slots {
			cmds[i] = p.ClusterGetKeysInSlot(ctx, slot, count)
		}
		return nil
	})
	out := make([][]string, len(slots))
	for i, c := range cmds {
		keys, err := c.Result()
		if err != nil {
			return nil, fmt.Errorf("failed to list keys of slot %d on %s: %w", slots[i], a.addr, err)
		}
		out[i] = keys
	}
	return out, nil
}

// firstErr is the first non-nil error of errs.
func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// GetKeysInSlot lists up to count keys of the slot held by this node.
func (a *admin) GetKeysInSlot(ctx context.Context, slot, count int) ([]string, error) {
	keys, err := a.c.ClusterGetKeysInSlot(ctx, slot, count).Result()
	if err != nil {
		return nil, fmt.Errorf("failed to list keys of slot %d on %s: %w", slot, a.addr, err)
	}
	return keys, nil
}

// Migrate moves keys to the node at targetAddr (MIGRATE host port "" 0 timeout [REPLACE]
// [AUTH2 user password | AUTH password] KEYS ...): the target is asked as the operator's
// own user when the operator has one, as the default user otherwise. The client waits
// callTimeout of timeout, and at least of DefaultMigrateTimeout, for the reply, longer than
// the pool's read timeout, so it does not give up on a MIGRATE that Redis is still running:
// a caller that left would send its next command to a node still busy with the last one. A
// quick try (QuickMigrateTimeout) may queue on the source behind a sibling stream's
// MIGRATE with the full timeout, hence the floor.
func (a *admin) Migrate(ctx context.Context, targetAddr string, keys []string, replace bool, timeout time.Duration) error {
	host, port, err := net.SplitHostPort(targetAddr)
	if err != nil {
		return fmt.Errorf("failed to migrate keys to %s: %w", targetAddr, err)
	}
	ms := timeout.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	args := []interface{}{"migrate", host, port, "", 0, ms}
	if replace {
		args = append(args, "replace")
	}
	switch {
	case a.user != "" && a.password != "":
		args = append(args, "auth2", a.user, a.password)
	case a.password != "":
		args = append(args, "auth", a.password)
	}
	args = append(args, "keys")
	for _, k := range keys {
		args = append(args, k)
	}
	if err := a.c.WithTimeout(callTimeout(max(timeout, DefaultMigrateTimeout))).Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("failed to migrate %d keys from %s to %s: %w", len(keys), a.addr, targetAddr, err)
	}
	return nil
}

// Dump is DUMP key: the serialized value, to compare two copies of a key; "" when the
// key does not exist. ASKING goes first on the same connection, so a node importing the
// slot answers for a key it holds instead of redirecting.
func (a *admin) Dump(ctx context.Context, key string) (string, error) {
	var dump *goredis.StringCmd
	_, _ = a.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Do(ctx, "asking")
		dump = p.Dump(ctx, key)
		return nil
	})
	v, err := dump.Result()
	if errors.Is(err, goredis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("failed to dump key %q on %s: %w", key, a.addr, err)
	}
	return v, nil
}

// CountKeysInSlot is CLUSTER COUNTKEYSINSLOT: the keys of the slot this node holds,
// whether or not it owns the slot.
func (a *admin) CountKeysInSlot(ctx context.Context, slot int) (int64, error) {
	n, err := a.c.ClusterCountKeysInSlot(ctx, slot).Result()
	if err != nil {
		return 0, fmt.Errorf("failed to count keys of slot %d on %s: %w", slot, a.addr, err)
	}
	return n, nil
}

// ClusterReset makes a node that left the cluster forget every other node (soft reset),
// so it cannot gossip them back to the members that forgot it.
func (a *admin) ClusterReset(ctx context.Context) error {
	if err := a.c.Do(ctx, "cluster", "reset", "soft").Err(); err != nil {
		return fmt.Errorf("failed to reset cluster state of %s: %w", a.addr, err)
	}
	return nil
}

func mover(a Admin) (slotMover, error) {
	m, ok := slotMover(a), a != nil
	if !ok {
		return nil, errors.New("failed to migrate slots: this Admin cannot move slots")
	}
	return m, nil
}

// MoveOptions bound the moving of one slot's keys.
type MoveOptions struct {
	// Pipeline is the most keys per MIGRATE batch.
	Pipeline int
	// BatchBytes is the most bytes (MEMORY USAGE) per MIGRATE batch; DefaultBatchBytes
	// when zero. A key bigger than that moves alone.
	BatchBytes int64
	// NodeTimeout is the cluster-node-timeout in force (NodeTimeout, the template's, when
	// zero). MIGRATE's own timeout is half of it, so a source blocked on a stalled target is
	// never flagged failing meanwhile; a hold for a big key is on top of it.
	NodeTimeout time.Duration
	// Timeout overrides MIGRATE's own timeout (tests); half the node timeout when zero.
	Timeout time.Duration
	// Limiter, when set, caps the keys moved per second (every stream sharing it takes
	// its tokens); a MIGRATE batch is then at most its burst (NewKeyLimiter).
	Limiter *rate.Limiter
	// gates, when set, are shared by the streams of one step (gate.go).
	gates *nodeGates
}

// NewKeyLimiter caps migration at perSecond keys per second, in batches of at most
// pipeline keys; nil (no cap) when perSecond is 0.
func NewKeyLimiter(perSecond, pipeline int) *rate.Limiter {
	if perSecond <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(perSecond), max(1, min(pipeline, perSecond)))
}

// throttle waits until n more keys may move under the Limiter. A wait that would leave
// too little of the caller's time for the MIGRATE after it is ErrBudgetSpent, as fits.
func (o MoveOptions) throttle(ctx context.Context, n int) error {
	if o.Limiter == nil {
		return nil
	}
	r := o.Limiter.ReserveN(time.Now(), min(n, o.Limiter.Burst()))
	if !r.OK() {
		return fmt.Errorf("failed to reserve %d keys of the migration rate limit", n)
	}
	wait := r.Delay()
	if d, ok := ctx.Deadline(); ok && time.Until(d) < wait+callTimeout(o.timeout()) {
		r.Cancel()
		return ErrBudgetSpent
	}
	return sleepCtx(ctx, wait)
}

// DefaultBatchBytes bounds a MIGRATE batch by size as well as by key count: the source
// serves nobody while it serializes and sends a batch, so 100 keys of 1 MiB each must not
// go in one call. 1 MiB goes over loopback or a pod network in a few milliseconds.
const DefaultBatchBytes = 1 << 20

// MigrateSlot moves one slot and its keys from src to dst (node IDs srcID, dstID) the way
// redis-cli does: IMPORTING on the target, MIGRATING on the source, batches of `pipeline`
// keys with MIGRATE until the source has none left, then SETSLOT NODE on the target, the
// source and every other master (others). It is idempotent: markers already set are set
// again, keys already moved are not listed any more, and a key left on both sides by an
// interrupted MIGRATE is replaced on the target, so a half-done slot is finished, not
// restarted. A slot the target already owns only has its markers closed.
//
// MIGRATE is bounded (see moveKeys): a key that cannot move alone within the timeout is a
// *StuckKeyError, and the step budget running out mid-slot is ErrBudgetSpent with the
// slot left open for the next step (FixOpenSlots resumes it).
func MigrateSlot(ctx context.Context, f Factory, slot int, src, dst MasterAddr, others []string, pipeline int) (int, error) {
	return MigrateSlotWith(ctx, f, slot, src, dst, others, MoveOptions{Pipeline: pipeline})
}

// MigrateSlotWith is MigrateSlot with explicit MoveOptions.
func MigrateSlotWith(ctx context.Context, f Factory, slot int, src, dst MasterAddr, others []string, opts MoveOptions) (int, error) {
	return MigrateSlots(ctx, f, []int{slot}, src, dst, others, opts)
}

// MigrateSlots is MigrateSlot for several slots of the same source and target, with each
// step pipelined over all of them: IMPORTING for every slot on the target (one round trip,
// one nodes.conf rewrite), MIGRATING on the source, the keys listed for every slot at once
// and moved slot by slot with bounded MIGRATE (MIGRATE takes keys of one slot only), the
// listing repeated until every slot is empty on the source, then SETSLOT NODE for every
// slot on the target, the source, and the other masters in parallel. Each slot still goes
// through the same steps in the same order as alone: keys move before any marker closes,
// and the target learns first. A step cut off anywhere leaves markers for FixOpenSlots.
func MigrateSlots(ctx context.Context, f Factory, slots []int, src, dst MasterAddr, others []string, opts MoveOptions) (int, error) {
	s, err := mover(f.For(src.Addr))
	if err != nil {
		return 0, err
	}
	d, err := mover(f.For(dst.Addr))
	if err != nil {
		return 0, err
	}
	for _, slot := range slots {
		if err := backoffOf(f).check(src.Addr, dst.Addr, slot); err != nil {
			return 0, err
		}
	}
	km := keyMover{s: s, src: src.Addr, dst: dst.Addr, timeout: opts.timeout(), quick: opts.quick(), nodeTimeout: opts.nodeTimeout(),
		replaceBusy: true, stuck: backoffOf(f), gates: opts.gates.of(src.Addr, dst.Addr),
		hold: func(ctx context.Context, d time.Duration) func() {
			return holdDetection(ctx, f, append([]string{src.Addr, dst.Addr}, others...), d)
		}}
	release := km.shared()
	err = firstErr(d.SetSlots(ctx, slots, "importing", src.ID))
	if err == nil {
		err = firstErr(s.SetSlots(ctx, slots, "migrating", dst.ID))
	}
	release()
	if err != nil {
		return 0, err
	}
	moved, err := km.drainSlots(ctx, slots, opts)
	if err != nil {
		return moved, err
	}
	release = km.shared()
	defer release()
	return moved, closeSlots(ctx, f, slots, dst, src.Addr, others)
}

func (o MoveOptions) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return MigrateTimeout(o.nodeTimeout())
}

func (o MoveOptions) nodeTimeout() time.Duration {
	if o.NodeTimeout > 0 {
		return o.NodeTimeout
	}
	return NodeTimeout
}

// quick is the timeout of a small batch's first try: QuickMigrateTimeout, or the full
// timeout when that is shorter (a low node timeout).
func (o MoveOptions) quick() time.Duration {
	return min(QuickMigrateTimeout, o.timeout())
}

func (o MoveOptions) pipeline() int {
	n := 10
	if o.Pipeline > 0 {
		n = o.Pipeline
	}
	if o.Limiter != nil {
		n = min(n, o.Limiter.Burst())
	}
	return n
}

func (o MoveOptions) batchBytes() int64 {
	if o.BatchBytes > 0 {
		return o.BatchBytes
	}
	return DefaultBatchBytes
}

// closeSlots gives the slots to dst on dst first (ClaimSlots: its epoch bumped, its
// IMPORTING cleared), then on the source, then on the other masters (in parallel: they
// only learn the owner sooner than by gossip), so no node keeps an open marker.
func closeSlots(ctx context.Context, f Factory, slots []int, dst MasterAddr, src string, others []string) error {
	for _, addr := range []string{dst.Addr, src} {
		if addr == "" {
			continue
		}
		m, err := mover(f.For(addr))
		if err != nil {
			return err
		}
		var errs []error
		if c := f.For(addr); addr == dst.Addr {
			errs = c.ClaimSlots(ctx, slots, dst.ID)
		} else {
			errs = m.SetSlots(ctx, slots, "node", dst.ID)
		}
		for _, err := range errs {
			switch {
			case err == nil:
			case addr == src && strings.Contains(err.Error(), "only with masters"):
				// The source gave away its last slot and, hearing dst's newer epoch, already
				// turned itself into dst's replica (cluster-allow-replica-migration): the slot
				// is closed on it.
			default:
				return err
			}
		}
	}
	var wg sync.WaitGroup
	for _, addr := range others {
		if m, err := mover(f.For(addr)); err == nil && addr != "" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Another master that does not know dst yet learns the owner by gossip.
				_ = m.SetSlots(ctx, slots, "node", dst.ID)
			}()
		}
	}
	wg.Wait()
	return nil
}

// MasterAddr names a master by node ID and address.
type MasterAddr struct {
	ID, Addr string
}

// NodeTimeout is the cluster-node-timeout the operator renders by default
// (templates/configmap.cue); a user ConfigMap may set another, which the caller passes in
// MoveOptions.NodeTimeout.
const NodeTimeout = 5 * time.Second

// MigrateTimeout is MIGRATE's own timeout for a cluster-node-timeout: half of it. Redis runs
// MIGRATE synchronously, so the source answers nothing, not even the cluster bus, while it
// waits on the target; a key given up on after half the node timeout cannot get its
// source flagged as failing and failed over.
func MigrateTimeout(nodeTimeout time.Duration) time.Duration { return nodeTimeout / 2 }

// DefaultMigrateTimeout is MIGRATE's timeout under the default node timeout.
const DefaultMigrateTimeout = NodeTimeout / 2

// QuickMigrateTimeout is the timeout of a batch's first try while no MIGRATE of the
// stream's group has timed out, for a batch known to hold at most DefaultBatchBytes: it
// is answered in milliseconds, and a target that does not answer within this is paused or
// stalled, not slow. The case that matters: CLUSTER FAILOVER on the target's replica pauses the
// target's writes, RESTORE-ASKING among them, until the replica has won the election, and
// a source blocked in MIGRATE cannot vote. When the sources are half the masters, the
// election then waits for their MIGRATE to time out, and every source's clients with it.
// After one timeout the group goes on with the full timeout.
const QuickMigrateTimeout = 500 * time.Millisecond

// StuckBackoff is how long a key that could not move is left alone before the next try,
// whatever triggers the next reconcile: each try blocks its source for up to the timeout.
const StuckBackoff = 10 * time.Second

// breathe is the pause after a MIGRATE that timed out, so the source serves its clients
// and the cluster bus before the next, smaller batch.
const breathe = 100 * time.Millisecond

// callTimeout is how long the client waits for a MIGRATE given Redis timeout t. Redis
// applies t to each wait on the target (connect, each 64 KiB written, each reply read),
// not to the whole call, so the client waits for two of them plus a second for DUMP and
// the network: a batch still running past that is one the client would not wait for.
func callTimeout(t time.Duration) time.Duration { return 2*t + time.Second }

// ErrBudgetSpent is returned when the caller's context has less time left than one
// MIGRATE may take: the batch is not sent (it would outlive the caller), the slot stays
// open, and the next step finishes it.
var ErrBudgetSpent = errors.New("step budget spent before the slot was finished")

// ErrTargetGone: a MIGRATE timed out and its target accepts no connection (its pod is gone).
var ErrTargetGone = errors.New("migration target gone")

// StuckKeyError is a key that could not move alone within MIGRATE's timeout. It is not
// tried again before RetryAfter.
type StuckKeyError struct {
	Slot int
	Key  string
	// Source and Target are the nodes' addresses.
	Source, Target string
	Timeout        time.Duration
	RetryAfter     time.Time
	Err            error
}

func (e *StuckKeyError) Error() string {
	return fmt.Sprintf("key %q of slot %d cannot move from %s to %s within %v (next try after %s): %v",
		e.Key, e.Slot, e.Source, e.Target, e.Timeout, e.RetryAfter.Format(time.TimeOnly), e.Err)
}

func (e *StuckKeyError) Unwrap() error { return e.Err }

// KeyConflictError is a key held, with different values, by both a node that does not
// own its slot and the owner. Neither copy is dropped: a person decides.
type KeyConflictError struct {
	Slot           int
	Key            string
	Source, Target string
}

func (e *KeyConflictError) Error() string {
	return fmt.Sprintf("key %q of slot %d has different values on %s (not the owner) and on its owner %s; "+
		"keep one with DEL on the other, then the slot is finished", e.Key, e.Slot, e.Source, e.Target)
}

// stuckKeys remembers stuck keys per source, target and slot, so a reconcile that comes
// early does not try them again and starve the source.
type stuckKeys struct {
	mu sync.Mutex
	m  map[string]*StuckKeyError
}

func stuckID(src, dst string, slot int) string { return fmt.Sprintf("%s>%s#%d", src, dst, slot) }

// check returns the remembered error while its backoff runs.
func (b *stuckKeys) check(src, dst string, slot int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.m[stuckID(src, dst, slot)]
	if e == nil || time.Now().After(e.RetryAfter) {
		return nil
	}
	return e
}

func (b *stuckKeys) remember(e *StuckKeyError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]*StuckKeyError{}
	}
	b.m[stuckID(e.Source, e.Target, e.Slot)] = e
}

// sharedStuck serves Factories other than this package's own.
var sharedStuck = &stuckKeys{}

func backoffOf(f Factory) *stuckKeys {
	if ff, ok := f.(*factory); ok {
		return &ff.stuck
	}
	return sharedStuck
}

// keyMover moves one slot's keys from s to dst with bounded MIGRATE calls.
type keyMover struct {
	s        slotMover
	src, dst string
	slot     int
	timeout  time.Duration
	// quick, when set, is the timeout of each MIGRATE of a batch known to hold at most
	// DefaultBatchBytes, until one times out (QuickMigrateTimeout); then it is cleared and
	// timeout applies for the rest of the group.
	quick time.Duration
	// nodeTimeout is the cluster-node-timeout in force: a big key's hold of failure
	// detection covers its MIGRATE plus this (bigkey.go).
	nodeTimeout time.Duration
	// gates, when set, are the source's and the target's among the streams of a step
	// (gate.go): each command of the stream shares them, a big key's MIGRATE takes them
	// alone.
	gates []*sync.RWMutex
	// replaceBusy: a key on both sides is replaced on the target, because the source's
	// copy is the one clients were served (the slot is the source's). When false, the
	// copies are compared with owner (DUMP) and only an identical one is replaced.
	replaceBusy bool
	// asking: the source imports the slot rather than owns it (finishing an open slot
	// whose keys sit on the importing side), so reading its keys needs ASKING first.
	asking bool
	owner  slotMover
	stuck  *stuckKeys
	// hold, when set, holds the masters' failure detection while a big key moves and
	// returns what releases it (bigkey.go).
	hold func(ctx context.Context, d time.Duration) func()
}

// drain moves the keys of km.slot until the source has none left in it.
func (km *keyMover) drain(ctx context.Context, opts MoveOptions) (int, error) {
	return km.drainSlots(ctx, []int{km.slot}, opts)
}

// drainSlots moves the keys of every slot until the source has none left in any: each
// round lists up to opts.Pipeline keys of every slot still holding some (one pipeline),
// reads their sizes (one pipeline), and moves each slot's keys in batches of at most
// opts.Pipeline keys and opts.BatchBytes bytes. The round after the last keys moved finds
// every slot empty: that listing is what lets the markers close.
func (km keyMover) drainSlots(ctx context.Context, slots []int, opts MoveOptions) (int, error) {
	moved := 0
	pending := slots
	for len(pending) > 0 {
		km.slot = pending[0] // what errors name until a slot's keys move
		if err := km.fits(ctx); err != nil {
			return moved, err
		}
		release := km.shared()
		lists, err := km.s.GetKeysInSlots(ctx, pending, opts.pipeline())
		release()
		if err != nil {
			return moved, km.spent(ctx, err)
		}
		var all []string
		for _, keys := range lists {
			all = append(all, keys...)
		}
		if len(all) == 0 {
			return moved, nil
		}
		sizes, sized, err := km.sizes(ctx, all)
		if err != nil {
			return moved, km.spent(ctx, err)
		}
		var next []int
		at := 0
		for i, slot := range pending {
			keys := lists[i]
			if len(keys) == 0 {
				continue
			}
			km.slot = slot
			usages := sizes[at : at+len(keys)]
			at += len(keys)
			n, err := km.moveBig(ctx, &keys, &usages)
			moved += n
			if err != nil {
				return moved, err
			}
			off := 0
			for _, batch := range byBytes(keys, usages, opts.batchBytes()) {
				// The quick first try only for a batch known to be small: a bigger one the
				// target is still restoring when the quick try gives up.
				small := sized && sum(usages[off:off+len(batch)]) <= DefaultBatchBytes
				off += len(batch)
				if err := opts.throttle(ctx, len(batch)); err != nil {
					return moved, err
				}
				n, err := km.move(ctx, batch, small)
				moved += n
				if err != nil {
					return moved, err
				}
			}
			next = append(next, slot)
		}
		pending = next
	}
	return moved, nil
}

// byBytes cuts keys into runs of at most limit bytes; a key bigger than limit goes alone.
func byBytes(keys []string, sizes []int64, limit int64) [][]string {
	if len(keys) == 0 {
		return nil
	}
	var out [][]string
	start, bytes := 0, int64(0)
	for i := range keys {
		if i > start && bytes+sizes[i] > limit {
			out = append(out, keys[start:i])
			start, bytes = i, 0
		}
		bytes += sizes[i]
	}
	return append(out, keys[start:])
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// move migrates keys; a batch that times out is split in halves, down to one key, and a
// single key that times out is a *StuckKeyError. The halves are tried left first and the
// first stuck key ends the step, so a target that stalls costs log2(batch)+1 calls, not
// one per key. A small batch (at most DefaultBatchBytes) goes with the quick timeout while
// the stream has it.
func (km *keyMover) move(ctx context.Context, keys []string, small bool) (int, error) {
	timeout := km.timeout
	if small && km.quick > 0 && km.quick < timeout {
		timeout = km.quick
	}
	err := km.migrate(ctx, keys, false, timeout)
	if isBusyKey(err) {
		switch {
		case km.replaceBusy:
			// An earlier MIGRATE copied the key and was cut off before deleting it here.
			err = km.migrate(ctx, keys, true, timeout)
		case len(keys) > 1:
			return km.oneByOne(ctx, keys)
		default:
			return km.replaceIfSame(ctx, keys[0])
		}
	}
	switch {
	case err == nil:
		return len(keys), nil
	case !isMigrateTimeout(err):
		return 0, err
	case km.targetGone():
		return 0, km.goneErr(err)
	case timeout < km.timeout:
		// The quick try: the source has served its clients and the bus again; the stream
		// goes on with the full timeout, this batch first.
		km.quick = 0
		if err := sleepCtx(ctx, breathe); err != nil {
			return 0, err
		}
		return km.move(ctx, keys, false)
	case len(keys) == 1:
		return 0, km.stuckKey(keys[0], err)
	}
	if err := sleepCtx(ctx, breathe); err != nil {
		return 0, err
	}
	half := len(keys) / 2
	n, err := km.move(ctx, keys[:half], false)
	if err != nil {
		return n, err
	}
	m, err := km.move(ctx, keys[half:], false)
	return n + m, err
}

func (km *keyMover) oneByOne(ctx context.Context, keys []string) (int, error) {
	moved := 0
	for _, k := range keys {
		n, err := km.move(ctx, []string{k}, false)
		moved += n
		if err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// replaceIfSame replaces the owner's copy only when it is the same value (redis-cli's
// rule for fix): nothing differing is ever dropped.
func (km *keyMover) replaceIfSame(ctx context.Context, key string) (int, error) {
	release := km.shared()
	here, err := km.s.Dump(ctx, key)
	release()
	if err != nil {
		return 0, err
	}
	there, err := km.owner.Dump(ctx, key)
	if err != nil {
		return 0, err
	}
	if here != there {
		return 0, &KeyConflictError{Slot: km.slot, Key: key, Source: km.src, Target: km.dst}
	}
	err = km.migrate(ctx, []string{key}, true, km.timeout)
	if isMigrateTimeout(err) && km.targetGone() {
		return 0, km.goneErr(err)
	}
	if isMigrateTimeout(err) {
		return 0, km.stuckKey(key, err)
	}
	if err != nil {
		return 0, err
	}
	return 1, nil
}

// migrate is one MIGRATE of keys from the source, sharing the source's and the target's
// gates (gate.go) with the step's other streams.
func (km *keyMover) migrate(ctx context.Context, keys []string, replace bool, timeout time.Duration) error {
	release := km.shared()
	defer release()
	// After the gate, which may have waited for a big key: a MIGRATE the caller would
	// not wait for to the end is not sent.
	if err := km.fits(ctx); err != nil {
		return err
	}
	return km.s.Migrate(ctx, km.dst, keys, replace, timeout)
}

func (km *keyMover) stuckKey(key string, err error) error {
	e := &StuckKeyError{Slot: km.slot, Key: key, Source: km.src, Target: km.dst, Timeout: km.timeout,
		RetryAfter: time.Now().Add(StuckBackoff), Err: err}
	km.stuck.remember(e)
	return e
}

// targetGone reports whether the target accepts no TCP connection within targetProbe. A
// MIGRATE times out, rather than failing at once, against a target whose pod is gone: on a
// real network nothing answers for a deleted pod's address, not even a reset, and the
// source's cached connection to it waits for a reply. That is no stuck key (smaller batches
// would not help): the step ends with an error, and the next one finds the target gone and
// closes its markers (FixOpenSlots).
func (km *keyMover) targetGone() bool {
	c, err := net.DialTimeout("tcp", km.dst, targetProbe)
	if err != nil {
		return true
	}
	_ = c.Close()
	return false
}

// targetProbe is how long targetGone waits for the target to accept a connection.
const targetProbe = time.Second

func (km *keyMover) goneErr(err error) error {
	return fmt.Errorf("slot %d: MIGRATE from %s to %s: %v, and the target accepts no connection: %w", km.slot, km.src, km.dst, err, ErrTargetGone)
}

// fits refuses a MIGRATE the caller would not wait for to the end.
func (km *keyMover) fits(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) < callTimeout(km.timeout) {
		return fmt.Errorf("slot %d from %s to %s: %w", km.slot, km.src, km.dst, ErrBudgetSpent)
	}
	return nil
}

// spent is err, or ErrBudgetSpent when err is a timeout and the caller's time ran out
// meanwhile: a listing or sizing cut off by the step's deadline (after waiting at a gate,
// say) ends the step as a spent budget does, leaving the slot open for the next.
func (km *keyMover) spent(ctx context.Context, err error) error {
	timedOut := errors.Is(err, context.DeadlineExceeded) || isNetTimeout(err)
	if d, ok := ctx.Deadline(); ok && timedOut && time.Until(d) < callTimeout(km.timeout) {
		return fmt.Errorf("slot %d from %s to %s: %v: %w", km.slot, km.src, km.dst, err, ErrBudgetSpent)
	}
	return err
}

func isBusyKey(err error) bool { return err != nil && strings.Contains(err.Error(), "BUSYKEY") }

// isMigrateTimeout: MIGRATE gave up on the target ("IOERR error or timeout reading to
// target instance", "... writing ..."), or the client gave up on MIGRATE. A target that
// cannot be connected to is not a timeout: smaller batches would not help.
func isMigrateTimeout(err error) bool {
	if err == nil {
		return false
	}
	if isNetTimeout(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "IOERR") && !strings.Contains(msg, "connecting")
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// isNetTimeout: the client gave up waiting for the reply.
func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
