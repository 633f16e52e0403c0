package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrRefused wraps every refusal of bootstrap (data on a node, conflicting slots): the
// caller should warn the user and not retry until something changes.
var ErrRefused = errors.New("bootstrap refused")

// PollInterval is how often Bootstrap re-reads the cluster while waiting for gossip. Redis
// settles a handshake in about 100 ms, so a fine poll turns into a faster bootstrap.
var PollInterval = 25 * time.Millisecond

// meetCooldown keeps Bootstrap from re-sending a MEET whose handshake is still in flight;
// a handshake on loopback or a pod network takes one or two cluster cron ticks (100 ms).
const meetCooldown = 300 * time.Millisecond

// Progress is what a bootstrap call did and where the cluster stands.
type Progress struct {
	// Phase is one of the Phase* constants.
	Phase string
	// Done is true when the cluster is formed (every guard of Formed holds).
	Done bool
	// Actions are the writes made by this call, in the order they were planned; their
	// Message is meant for events.
	Actions []Action
	// Masters are the pods chosen as masters.
	Masters []string
}

// BootstrapStep observes once, plans, and carries out the plan's writes. It does not wait
// for gossip: call it again (or call Bootstrap) until Done. A formed cluster costs one
// CLUSTER NODES and one CLUSTER INFO per member and no write.
func BootstrapStep(ctx context.Context, f Factory, members []Member, masters, replicasPerMaster int) (Progress, error) {
	return newBootstrapper(f).step(ctx, members, masters, replicasPerMaster)
}

// Bootstrap forms the cluster: it repeats BootstrapStep every PollInterval until the
// cluster is formed, bootstrap is refused (the error wraps ErrRefused), a write fails, or
// ctx ends (the error wraps ctx.Err(); call again later, progress is kept in Redis).
func Bootstrap(ctx context.Context, f Factory, members []Member, masters, replicasPerMaster int) (Progress, error) {
	b := newBootstrapper(f)
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

type bootstrapper struct {
	f        Factory
	lastMeet map[[2]int]time.Time
}

func newBootstrapper(f Factory) *bootstrapper {
	return &bootstrapper{f: f, lastMeet: map[[2]int]time.Time{}}
}

func (b *bootstrapper) step(ctx context.Context, members []Member, masters, replicasPerMaster int) (Progress, error) {
	st, err := Observe(ctx, b.f, members)
	if err != nil {
		return Progress{Phase: PhaseWaitingForPods}, fmt.Errorf("failed to observe cluster: %w", err)
	}
	plan := PlanBootstrap(st, masters, replicasPerMaster)
	if len(plan.NeedKeys) > 0 {
		if err := b.readKeys(ctx, st, plan.NeedKeys); err != nil {
			return Progress{Phase: plan.Phase}, err
		}
		plan = PlanBootstrap(st, masters, replicasPerMaster)
	}
	prog := Progress{Phase: plan.Phase, Done: plan.Done}
	for _, m := range plan.Masters {
		prog.Masters = append(prog.Masters, members[m].Pod)
	}
	if plan.Refusal != nil {
		return prog, fmt.Errorf("%w: %w", ErrRefused, plan.Refusal)
	}
	acts := b.dropRecentMeets(plan.Actions)
	prog.Actions = acts
	return prog, b.execute(ctx, st, acts)
}

// dropRecentMeets skips a MEET sent less than meetCooldown ago, and duplicates in one plan.
func (b *bootstrapper) dropRecentMeets(acts []Action) []Action {
	now := time.Now()
	var out []Action
	for _, a := range acts {
		if a.Kind == ActionMeet {
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

func (b *bootstrapper) readKeys(ctx context.Context, st *ClusterState, idx []int) error {
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
func (b *bootstrapper) execute(ctx context.Context, st *ClusterState, acts []Action) error {
	byMember := map[int][]Action{}
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

func run(ctx context.Context, a Admin, act Action) error {
	switch act.Kind {
	case ActionSetConfigEpoch:
		return a.SetConfigEpoch(ctx, act.Epoch)
	case ActionAddSlots:
		return a.AddSlotsRange(ctx, act.Slots)
	case ActionMeet:
		return a.Meet(ctx, act.TargetAddr)
	case ActionReplicate:
		return a.Replicate(ctx, act.MasterID)
	case ActionForget:
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
