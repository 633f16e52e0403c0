package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// PollInterval is how often Bootstrap re-reads the cluster while waiting for gossip. Redis
// settles a handshake in about 100 ms, so a fine poll turns into a faster bootstrap.
var PollInterval = 25 * time.Millisecond

// Progress is what a bootstrap call did and where the cluster stands.
type Progress struct {
	// Phase is one of the Phase* constants.
	Phase string
	// Done is true when the cluster is formed (every guard of Formed holds).
	Done bool
	// Actions are the writes made by this call, in the order they were planned; their
	// Message is meant for events.
	Actions []topology.Action
	// Masters are the pods chosen as masters.
	Masters []string
}

// BootstrapStep observes once, plans, and carries out the plan's writes. It does not wait
// for gossip: call it again (or call Bootstrap) until Done. A formed cluster costs one
// CLUSTER NODES and one CLUSTER INFO per member and no write.
func BootstrapStep(ctx context.Context, f Factory, members []topology.Member, masters, replicasPerMaster int) (Progress, error) {
	return newExecutor(f).step(ctx, members, masters, replicasPerMaster)
}

// Bootstrap forms the cluster: it repeats BootstrapStep every PollInterval until the
// cluster is formed, bootstrap is refused (the error wraps ErrRefused), a write fails, or
// ctx ends (the error wraps ctx.Err(); call again later, progress is kept in Redis).
func Bootstrap(ctx context.Context, f Factory, members []topology.Member, masters, replicasPerMaster int) (Progress, error) {
	b := newExecutor(f)
	var total Progress
	for {
		p, err := b.step(ctx, members, masters, replicasPerMaster)
		total.Phase, total.Done, total.Masters = p.Phase, p.Done, p.Masters
		total.Actions = append(total.Actions, p.Actions...)
		if err != nil || p.Done {
			return total, err
		}
		select {
		case <-ctx.Done():
			return total, fmt.Errorf("failed to finish bootstrap in phase %s: %w", total.Phase, ctx.Err())
		case <-time.After(PollInterval):
		}
	}
}

func (b *executor) step(ctx context.Context, members []topology.Member, masters, replicasPerMaster int) (Progress, error) {
	st, err := observeStep(ctx, b.f, members)
	if err != nil {
		return Progress{Phase: topology.PhaseWaitingForPods}, err
	}
	plan, prog, err := b.plan(ctx, st, members, "bootstrap", func() topology.Plan {
		return topology.PlanBootstrap(st, masters, replicasPerMaster)
	})
	if err != nil {
		return prog, err
	}
	acts := b.dropRecentMeets(plan.Actions)
	prog.Actions = acts
	return prog, b.execute(ctx, st, acts)
}
