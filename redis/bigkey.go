package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/failhold"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Big keys: one key whose MIGRATE takes longer than MIGRATE's default timeout (a sorted
// set of millions of members: tens of MB of DUMP, seconds of RESTORE on the target).
//
// Splitting a batch cannot make such a key faster, and reporting it stuck would leave its
// slot open for ever. So each batch's keys are sized first with MEMORY USAGE (a sampled
// estimate, O(1) even for a huge key; one round trip per batch), and each key whose size
// calls for more than the batch's timeout is moved alone with the timeout its size calls
// for (topology.BigKeyTimeout), capped at MaxKeyTimeout. Sizing before the first try matters: a
// batch that times out on a big key does not stop the target's RESTORE, which runs to the
// end (seconds of a blocked target) only for the key to be sent again. A key that times
// out even with its own timeout is a *StuckKeyError as before: then it is the target, not
// the size, that is the problem.
//
// Redis blocks the source for the whole MIGRATE (DUMP, the transfer, and the wait for the
// target's RESTORE) and the target for its RESTORE: that gap in serving the slot's node is
// Redis' and cannot be avoided by the operator; docs/migration.md gives its size.

// MaxKeyTimeout caps the timeout of one key's MIGRATE (topology.MaxKeyTimeout).
const MaxKeyTimeout = topology.MaxKeyTimeout

// BigKeyBudget is how much longer than its own budget a step that may move one big key
// must be allowed to run: one MIGRATE with MaxKeyTimeout, as the client waits for it.
var BigKeyBudget = callTimeout(MaxKeyTimeout)

// MemoryUsages is MEMORY USAGE of each key, in one round trip; 0 for a key that does not
// exist, which a source migrating the slot answers with ASK (the key went since it was
// listed: deleted, expired, evicted). With asking, ASKING goes before each, so a node
// importing the slot answers for its keys; a node that owns the slot needs none (half the
// commands). Any other error fails the whole call: one key sized 0 by mistake could be a
// big key moved without its own timeout.
func (a *admin) MemoryUsages(ctx context.Context, keys []string, asking bool) ([]int64, error) {
	cmds := make([]*goredis.IntCmd, len(keys))
	_, _ = a.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, k := range keys {
			if asking {
				p.Do(ctx, "asking")
			}
			cmds[i] = p.MemoryUsage(ctx, k)
		}
		return nil
	})
	out := make([]int64, len(keys))
	for i, c := range cmds {
		n, err := c.Result()
		switch {
		case err == nil:
			out[i] = n
		case errors.Is(err, goredis.Nil) || strings.HasPrefix(err.Error(), "ASK "):
		default:
			return nil, fmt.Errorf("failed to read the memory usage of key %q on %s: %w", keys[i], a.addr, err)
		}
	}
	return out, nil
}

// sizes is MEMORY USAGE of each key (one round trip), and whether the node could say.
// It cannot when MEMORY is renamed away or not allowed: then every size is 0, and the keys
// go in batches by count, with the full timeout, split on a timeout. Any other failure
// (no answer, a reply naming another owner) is an error: the step ends and the slot stays
// open for the next, because a big key sized 0 would move without its own timeout and hold.
func (km *keyMover) sizes(ctx context.Context, keys []string) ([]int64, bool, error) {
	if len(keys) == 0 {
		return make([]int64, len(keys)), false, nil
	}
	release := km.shared()
	usages, err := km.s.MemoryUsages(ctx, keys, km.asking)
	release()
	switch {
	case err == nil:
		return usages, true, nil
	case cannotSize(err):
		return make([]int64, len(keys)), false, nil
	}
	return nil, false, err
}

// cannotSize: the node refuses MEMORY USAGE itself (renamed away, or not in the user's
// ACL), whatever the key.
func cannotSize(err error) bool {
	var reply goredis.Error
	if !errors.As(err, &reply) {
		return false
	}
	msg := reply.Error()
	return strings.HasPrefix(msg, "ERR unknown command") || strings.HasPrefix(msg, "ERR unknown subcommand") ||
		strings.HasPrefix(msg, "NOPERM")
}

// moveBig moves each key whose size (usages, MEMORY USAGE) calls for more than the
// batch's timeout alone, with that timeout; the other keys and their sizes are left in
// *keys and *usages for the batches. A big key alone that still times out is a
// *StuckKeyError: then the target, not the size, is the problem.
func (km *keyMover) moveBig(ctx context.Context, keys *[]string, usages *[]int64) (int, error) {
	moved := 0
	var rest []string
	var restUsages []int64
	for i, k := range *keys {
		t := topology.BigKeyTimeout((*usages)[i], km.timeout)
		if t <= km.timeout {
			rest = append(rest, k)
			restUsages = append(restUsages, (*usages)[i])
			continue
		}
		one := *km
		// No gates on the copy: km.alone() holds them, and a shared() inside would wait
		// for itself.
		one.timeout, one.quick, one.gates = t, 0, nil
		restore := func() {}
		if km.hold != nil {
			restore = km.hold(ctx, callTimeout(t)+max(km.nodeTimeout, NodeTimeout))
		}
		// The source and the target to itself (gate.go): a sibling stream's command
		// would wait behind this MIGRATE on the wire, longer than its timeout.
		alone := km.alone()
		n, err := one.move(ctx, []string{k}, false)
		alone()
		restore()
		moved += n
		if err != nil {
			return moved, err
		}
	}
	*keys, *usages = rest, restUsages
	return moved, nil
}

// Holding failure detection. A big key's MIGRATE can block its source for longer than
// cluster-node-timeout (12 s seen on a loaded 2-core machine). The other masters would
// then flag the source failing and its replica would take over while the source is still
// busy; the source, once free, first answers the writes its clients queued meanwhile and
// only then hears it was replaced, so those acknowledged writes are lost with its data
// when it turns replica. A block the operator chose is not a failure: for the length of
// one big key's MIGRATE, every master's cluster-node-timeout (only masters' reports make
// a node fail, and only a failed master is replaced) is raised to cover it, and set back
// to what it was afterwards. Were the operator to die in between, the masters keep the
// longer timeout (failures are detected later, nothing is lost) until the next operator
// process sets it back (ReleaseStaleHolds) on its first look at the cluster in Running.

// holdMu makes holds of failure detection one at a time.
var holdMu sync.Mutex

// NodeTimeout reads cluster-node-timeout.
func (a *admin) NodeTimeout(ctx context.Context) (time.Duration, error) {
	d, err := failhold.Read(ctx, a.c)
	if err != nil {
		return 0, fmt.Errorf("failed to read cluster-node-timeout on %s: %w", a.addr, err)
	}
	return d, nil
}

// SetNodeTimeout sets cluster-node-timeout (CONFIG SET: not written to the config file).
func (a *admin) SetNodeTimeout(ctx context.Context, d time.Duration) error {
	if err := failhold.Set(ctx, a.c, d); err != nil {
		return fmt.Errorf("failed to set cluster-node-timeout on %s: %w", a.addr, err)
	}
	return nil
}

// holdDetection raises cluster-node-timeout to at least hold on the masters at addrs
// (failhold) and returns what sets each back, a second after the move.
func holdDetection(ctx context.Context, f Factory, addrs []string, hold time.Duration) func() {
	// Streams of disjoint pairs move at once (migrate): one hold at a time, or a second
	// would read the first's raised timeout as the one to set back, and leave it.
	holdMu.Lock()
	var nodes []failhold.Node
	for _, addr := range addrs {
		if addr != "" {
			nodes = append(nodes, f.For(addr))
		}
	}
	h := failhold.New(nodes)
	h.Raise(ctx, hold)
	return func() {
		defer holdMu.Unlock()
		h.Release(true)
	}
}

// ReleaseStaleHolds sets cluster-node-timeout back to configured on every node at addrs
// that has a longer one: what a hold leaves behind when the operator that raised it died
// before setting it back. Nothing is done while this process holds failure detection
// itself. It returns how many nodes were set back; a node that cannot be read or set is
// an error, the others are still set.
func ReleaseStaleHolds(ctx context.Context, f Factory, addrs []string, configured time.Duration) (int, error) {
	if !holdMu.TryLock() {
		return 0, nil
	}
	defer holdMu.Unlock()
	released := 0
	var errs []error
	for _, addr := range addrs {
		n := f.For(addr)
		cur, err := n.NodeTimeout(ctx)
		if err == nil && cur > configured {
			if err = n.SetNodeTimeout(ctx, configured); err == nil {
				released++
			}
		}
		errs = append(errs, err)
	}
	return released, errors.Join(errs...)
}
