// Moving a slot's keys: listed, sized with MEMORY USAGE and sent in MIGRATE batches by
// count and bytes (drainSlots, byBytes), a quick first try for small batches, one key at a
// time when a batch fails, a big key on its own (bigkey.go).

package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// keyMover moves one slot's keys from s to dst with bounded MIGRATE calls.
type keyMover struct {
	s        Admin
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
	owner  Admin
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
			n, err := km.moveSlotKeys(ctx, keys, sizes[at:at+len(keys)], sized, opts)
			at += len(keys)
			moved += n
			if err != nil {
				return moved, err
			}
			next = append(next, slot)
		}
		pending = next
	}
	return moved, nil
}

// moveSlotKeys moves keys listed in one slot (km.slot), with their sizes: a big key on
// its own (moveBig), the others in batches of at most opts.BatchBytes bytes.
func (km *keyMover) moveSlotKeys(ctx context.Context, keys []string, usages []int64, sized bool, opts MoveOptions) (int, error) {
	moved, err := km.moveBig(ctx, &keys, &usages)
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
