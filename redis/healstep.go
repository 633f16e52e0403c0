package redis

import (
	"context"
	"fmt"
)

// Heal observes a cluster that was formed once, plans with PlanHeal and carries out the
// plan's writes: one step, without waiting for gossip, so the caller (a reconcile) calls
// it again later until Done. A healthy cluster costs one CLUSTER NODES and one CLUSTER
// INFO per member and no write. A refusal (an empty master holding keys) wraps ErrRefused
// and writes nothing.
func Heal(ctx context.Context, f Factory, members []Member, masters, replicasPerMaster int) (Progress, error) {
	b := newBootstrapper(f)
	st, err := Observe(ctx, f, members)
	if err != nil {
		return Progress{Phase: PhaseWaitingForPods}, fmt.Errorf("failed to observe cluster: %w", err)
	}
	plan := PlanHeal(st, masters, replicasPerMaster)
	if len(plan.NeedKeys) > 0 {
		if err := b.readKeys(ctx, st, plan.NeedKeys); err != nil {
			return Progress{Phase: plan.Phase}, err
		}
		plan = PlanHeal(st, masters, replicasPerMaster)
	}
	prog := Progress{Phase: plan.Phase, Done: plan.Done}
	for _, m := range plan.Masters {
		prog.Masters = append(prog.Masters, members[m].Pod)
	}
	if plan.Refusal != nil {
		return prog, fmt.Errorf("%w: %w", ErrRefused, plan.Refusal)
	}
	prog.Actions = plan.Actions
	if err := b.execute(ctx, st, plan.Actions); err != nil {
		return prog, fmt.Errorf("failed to heal cluster: %w", err)
	}
	return prog, nil
}
