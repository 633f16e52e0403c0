// Migrating slots with Redis' own protocol: SETSLOT IMPORTING and MIGRATING, the keys
// moved (movekeys.go), SETSLOT NODE on the target first (MigrateSlot, MigrateSlots,
// closeSlots); the options and timeouts that bound a move. Valkey 9's own migration:
// migrate_atomic.go.

package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

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
	s := f.For(src.Addr)
	d := f.For(dst.Addr)
	for _, slot := range slots {
		if err := f.backoff().check(src.Addr, dst.Addr, slot); err != nil {
			return 0, err
		}
	}
	km := keyMover{s: s, src: src.Addr, dst: dst.Addr, timeout: opts.timeout(), quick: opts.quick(), nodeTimeout: opts.nodeTimeout(),
		replaceBusy: true, stuck: f.backoff(), gates: opts.gates.of(src.Addr, dst.Addr),
		hold: func(ctx context.Context, d time.Duration) func() {
			return holdDetection(ctx, f, append([]string{src.Addr, dst.Addr}, others...), d)
		}}
	release := km.shared()
	err := firstErr(d.SetSlots(ctx, slots, "importing", src.ID))
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
		m := f.For(addr)
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
		if m := f.For(addr); addr != "" {
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
