package redis

import (
	"context"
	"fmt"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Heal observes a cluster that was formed once, plans with PlanHeal and carries out the
// plan's writes: one step, without waiting for gossip, so the caller (a reconcile) calls
// it again later until Done. A healthy cluster costs one CLUSTER NODES and one CLUSTER
// INFO per member and no write. A refusal (an empty master holding keys) wraps ErrRefused
// and writes nothing.
func Heal(ctx context.Context, f Factory, members []topology.Member, masters, replicasPerMaster int) (Progress, error) {
	return HealWith(ctx, f, members, masters, replicasPerMaster, HealOptions{})
}

// HealWith is Heal with the operator's own failover of lost masters (opts.Watch) enabled.
func HealWith(ctx context.Context, f Factory, members []topology.Member, masters, replicasPerMaster int, opts HealOptions) (Progress, error) {
	b := newExecutor(f)
	st, err := observeStep(ctx, f, members)
	if err != nil {
		return Progress{Phase: topology.PhaseWaitingForPods}, err
	}
	if len(markedSlots(st)) > 0 && st.AllReachable() && len(st.PendingFailovers()) == 0 {
		// A slot left MIGRATING/IMPORTING (a failover mid-move, a foreign reshard) is
		// finished first, as redis-cli --cluster fix does: the views cannot agree while a
		// marker is open, so nothing else would ever heal.
		fp, err := FixOpenSlotsWith(ctx, f, st, MoveOptions{Pipeline: opts.pipeline(), NodeTimeout: opts.NodeTimeout})
		return Progress{Phase: fp.Phase, Actions: fp.Actions}, err
	}
	overdue := opts.overdue(st)
	plan, prog, err := b.plan(ctx, st, members, "healing", func() topology.Plan {
		return topology.PlanHeal(st, masters, replicasPerMaster, overdue)
	})
	if err != nil {
		return prog, err
	}
	prog.Actions = plan.Actions
	var promote, rest []topology.Action
	for _, a := range plan.Actions {
		if a.Kind == topology.ActionFailover {
			promote = append(promote, a)
		} else {
			rest = append(rest, a)
		}
	}
	if err := b.execute(ctx, st, rest); err != nil {
		return prog, fmt.Errorf("failed to heal cluster: %w", err)
	}
	if err := executePromotions(ctx, f, st, promote, opts); err != nil {
		return prog, fmt.Errorf("failed to heal cluster: %w", err)
	}
	return prog, nil
}
