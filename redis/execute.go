package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// meetCooldown keeps Bootstrap from re-sending a MEET whose handshake is still in flight;
// a handshake on loopback or a pod network takes one or two cluster cron ticks (100 ms).
const meetCooldown = 300 * time.Millisecond

// executor carries out the actions of every plan: bootstrap's, healing's and a resize's
// (meets, config epochs, slots, replicas, forgets). It keeps only when it last sent each
// MEET, so a plan re-made every poll does not restart a handshake still in flight.
type executor struct {
	f        Factory
	lastMeet map[[2]int]time.Time
}

func newExecutor(f Factory) *executor {
	return &executor{f: f, lastMeet: map[[2]int]time.Time{}}
}

// dropRecentMeets skips a MEET sent less than meetCooldown ago, and duplicates in one plan.
func (b *executor) dropRecentMeets(acts []topology.Action) []topology.Action {
	now := time.Now()
	var out []topology.Action
	for _, a := range acts {
		if a.Kind == topology.ActionMeet {
			key := [2]int{a.Member, a.Target}
			if t, ok := b.lastMeet[key]; ok && now.Sub(t) < meetCooldown {
				continue
			}
			b.lastMeet[key] = now
		}
		out = append(out, a)
	}
	return out
}

// observeStep is the first read of a bootstrap or healing step: every member's view.
func observeStep(ctx context.Context, f Factory, members []topology.Member) (*topology.ClusterState, error) {
	st, err := Observe(ctx, f, members)
	if err != nil {
		return nil, fmt.Errorf("failed to observe cluster: %w", err)
	}
	return st, nil
}

// plan is the step bootstrap and healing share between observing and writing: plan from
// the observation; read what the plan asks to know first (INFO replication of replicas it
// may promote, DBSIZE of nodes it is about to claim) into st and plan again after each;
// then refuse (the error wraps topology.ErrRefused, named by op, and nothing is written)
// or return the plan to carry out, with the step's progress (phase, done, masters).
func (b *executor) plan(ctx context.Context, st *topology.ClusterState, members []topology.Member, op string, planFn func() topology.Plan) (topology.Plan, Progress, error) {
	plan := planFn()
	// Twice at most: a plan that had the key counts it asked for may ask next for the
	// replication of replicas it would move (healing's spare replicas).
	for round := 0; round < 2 && len(plan.NeedReplication)+len(plan.NeedKeys) > 0; round++ {
		if len(plan.NeedReplication) > 0 {
			if err := readReplication(ctx, b.f, st, plan.NeedReplication); err != nil {
				return plan, Progress{Phase: plan.Phase}, err
			}
			plan = planFn()
		}
		if len(plan.NeedKeys) > 0 {
			if err := b.readKeys(ctx, st, plan.NeedKeys); err != nil {
				return plan, Progress{Phase: plan.Phase}, err
			}
			plan = planFn()
		}
	}
	prog := Progress{Phase: plan.Phase, Done: plan.Done}
	for _, m := range plan.Masters {
		prog.Masters = append(prog.Masters, members[m].Pod)
	}
	if plan.Refusal != nil {
		return plan, prog, topology.Refused(op, plan.Refusal)
	}
	return plan, prog, nil
}

// readKeys reads DBSIZE of the members idx into st.
func (b *executor) readKeys(ctx context.Context, st *topology.ClusterState, idx []int) error {
	return parallel(idx, func(i int) error {
		m := &st.Members[i]
		n, err := b.f.For(m.Addr).DBSize(ctx)
		if err != nil {
			return err
		}
		m.Keys, m.KeysKnown = n, true
		return nil
	})
}

// execute runs the actions of each member in order, members in parallel.
func (b *executor) execute(ctx context.Context, st *topology.ClusterState, acts []topology.Action) error {
	byMember := map[int][]topology.Action{}
	var order []int
	for _, a := range acts {
		if _, ok := byMember[a.Member]; !ok {
			order = append(order, a.Member)
		}
		byMember[a.Member] = append(byMember[a.Member], a)
	}
	return parallel(order, func(i int) error {
		admin := b.f.For(st.Members[i].Addr)
		for _, a := range byMember[i] {
			if err := run(ctx, admin, a); err != nil {
				return err
			}
		}
		return nil
	})
}

func run(ctx context.Context, a Admin, act topology.Action) error {
	switch act.Kind {
	case topology.ActionSetConfigEpoch:
		return a.SetConfigEpoch(ctx, act.Epoch)
	case topology.ActionAddSlots:
		return a.AddSlotsRange(ctx, act.Slots)
	case topology.ActionMeet:
		return a.Meet(ctx, act.TargetAddr)
	case topology.ActionReplicate:
		return a.Replicate(ctx, act.MasterID)
	case topology.ActionForget:
		return a.Forget(ctx, act.NodeID)
	}
	return fmt.Errorf("failed to run action %q: unknown kind", act.Kind)
}

// parallel calls fn for every index at once and returns the first error.
func parallel(idx []int, fn func(int) error) error {
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for k, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
