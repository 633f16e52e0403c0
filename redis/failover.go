package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// FailWatch remembers since when the operator has seen each slot owner failing, so healing
// can tell a failover Redis is still running from one it will never run (no majority,
// cluster-replica-no-failover, a replica too stale for Redis' validity check). It is kept
// per cluster in memory: an operator restart only restarts the clock.
type FailWatch struct {
	mu       sync.Mutex
	since    map[string]time.Time
	promoted map[string]time.Time
}

// NewFailWatch returns an empty watch.
func NewFailWatch() *FailWatch {
	return &FailWatch{since: map[string]time.Time{}, promoted: map[string]time.Time{}}
}

// promoteCooldown is how long a FAILOVER just sent is given to finish before it may be sent
// again: Redis' manual failover times out after 5 s (CLUSTER_MF_TIMEOUT).
const promoteCooldown = 6 * time.Second

// Overdue records the failing owners seen now, forgets the ones no longer failing, and
// returns, with how long each has been failing, those failing for longer than after whose
// last promotion (if any) is older than the cooldown.
func (w *FailWatch) Overdue(owners []topology.FailingOwner, now time.Time, after time.Duration) map[string]time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	out := map[string]time.Duration{}
	for _, o := range owners {
		seen[o.ID] = true
		if _, ok := w.since[o.ID]; !ok {
			w.since[o.ID] = now
		}
		if now.Sub(w.since[o.ID]) >= after && now.Sub(w.promoted[o.ID]) >= promoteCooldown {
			out[o.ID] = now.Sub(w.since[o.ID])
		}
	}
	for id := range w.since {
		if !seen[id] {
			delete(w.since, id)
			delete(w.promoted, id)
		}
	}
	return out
}

// promoted records that a FAILOVER was sent for the lost master id.
func (w *FailWatch) markPromoted(id string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.promoted[id] = now
}

// HealOptions tune the healer's own failover.
type HealOptions struct {
	// Watch keeps the failing owners' clocks between calls; nil means the operator never
	// promotes a replica itself and always leaves failover to Redis.
	Watch *FailWatch
	// PromoteAfter is how long a slot owner may stay failing before the operator promotes
	// its best replica itself.
	PromoteAfter time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Pipeline is the number of keys per MIGRATE when an open slot is finished; 100 when 0.
	Pipeline int
	// NodeTimeout is the cluster-node-timeout in force (MoveOptions.NodeTimeout).
	NodeTimeout time.Duration
}

func (o HealOptions) pipeline() int {
	if o.Pipeline > 0 {
		return o.Pipeline
	}
	return 100
}

func (o HealOptions) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// overdue feeds the observation to the watch and returns the owners overdue for a
// failover by the operator.
func (o HealOptions) overdue(st *topology.ClusterState) map[string]time.Duration {
	if o.Watch == nil {
		return nil
	}
	return o.Watch.Overdue(st.FailingOwners(), o.now(), o.PromoteAfter)
}

// readReplication reads INFO replication of the members in idx into their state.
func readReplication(ctx context.Context, f Factory, st *topology.ClusterState, idx []int) error {
	return parallel(idx, func(i int) error {
		m := &st.Members[i]
		r, err := f.For(m.Addr).Replication(ctx)
		if err != nil {
			return err
		}
		m.Repl = &r
		return nil
	})
}

// Promote is the part of healing that may run while pods are missing: for every slot
// owner that is gone and that Redis has not failed over within opts.PromoteAfter, it
// promotes that owner's most up-to-date reachable replica. members may be any subset of
// the pods (the ones that run); nothing else is written.
func Promote(ctx context.Context, f Factory, members []topology.Member, opts HealOptions) (Progress, error) {
	st, err := Observe(ctx, f, members)
	if err != nil {
		return Progress{Phase: topology.PhaseWaitingForFailover}, fmt.Errorf("failed to observe cluster: %w", err)
	}
	overdue := opts.overdue(st)
	acts, need := topology.PlanPromote(st, overdue, false)
	if len(need) > 0 {
		if err := readReplication(ctx, f, st, need); err != nil {
			return Progress{Phase: topology.PhaseWaitingForFailover}, err
		}
		acts, _ = topology.PlanPromote(st, overdue, false)
	}
	prog := Progress{Phase: topology.PhaseWaitingForPods, Actions: acts}
	if len(acts) > 0 {
		prog.Phase = topology.PhaseWaitingForFailover
	}
	return prog, executePromotions(ctx, f, st, acts, opts)
}

// executePromotions sends the failovers and starts their cooldown.
func executePromotions(ctx context.Context, f Factory, st *topology.ClusterState, acts []topology.Action, opts HealOptions) error {
	var errs []string
	for _, a := range acts {
		if err := f.For(st.Members[a.Member].Addr).FailoverMode(ctx, a.Mode); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if opts.Watch != nil {
			opts.Watch.markPromoted(a.NodeID, opts.now())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("failed to promote a replica: %s", strings.Join(errs, "; "))
	}
	return nil
}

// FailoverMode sends CLUSTER FAILOVER FORCE or TAKEOVER to this replica.
func (a *admin) FailoverMode(ctx context.Context, mode string) error {
	if err := a.c.Do(ctx, "cluster", "failover", strings.ToLower(mode)).Err(); err != nil {
		return fmt.Errorf("failed to make %s take over its master with CLUSTER FAILOVER %s: %w", a.addr, mode, err)
	}
	return nil
}
