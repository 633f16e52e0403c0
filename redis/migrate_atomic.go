package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Atomic slot migration (ASM): Valkey 9 moves slots itself. CLUSTER MIGRATESLOTS, sent to
// the source, starts one job per target; the source forks, streams the slots' keys to the
// target as commands (a big key in pieces, never one blocking call), then every write to
// those slots, and when the target has caught up the source pauses its writes for the
// moment the target takes the slots (an epoch bump and a broadcast of its own). A job that
// fails or is cancelled leaves the slots with the source, and the target deletes what it
// had received: nothing is ever half moved, so there is no open slot to finish.
//
// The operator uses it when every member says it runs a server with it (INFO server, read
// each step) and no cap on keys per second is asked (ASM has none); the legacy mover
// (MigrateSlots) otherwise. What the operator adds: it plans the moves as before, starts
// one job per source and target, adopts the jobs a source already runs (an operator
// restarted mid-move starts no second one), cancels those the plan no longer wants (an
// abort), and gives up on a pair after atomicAttempts failures the servers report
// (*AtomicMigrationError), which the controller reports.

// migrateAtomic is migrate for servers that move slots themselves: it starts the planned
// pairs' jobs that no source runs yet (jobs: what settleAtomic read), and waits for the
// pairs' jobs until they end or the budget is spent; jobs still running then go on in the
// servers, and the next step adopts them. Stop ends the wait at once (pause: the jobs
// started finish on their own; an abort plans other moves, and the next step cancels the
// jobs it does not want).
func migrateAtomic(ctx context.Context, f Factory, st *topology.ClusterState, moves []topology.SlotMove, req ScaleRequest,
	jobs map[string][]SlotMigration, mem map[string]topology.Memory) (ScaleProgress, error) {
	prog := ScaleProgress{Phase: PhaseMigrating, Remaining: len(moves), Mover: MoverAtomic}
	addr := topology.AddrsByID(st)
	whole, _ := pairsOf(moves)
	loads := sourceLoads(ctx, f, st, moves, mem)
	var pairs []*atomicPair
	for _, p := range whole {
		pairs = append(pairs, p.chunks(loads[p.from])...)
	}
	// Start the pairs no running job covers, unless they failed too often.
	started := time.Now()
	var starts = map[string][]AtomicJob{}
	startedPair := map[*atomicPair]bool{}
	var gaveUp error
	for _, p := range pairs {
		if running(jobs[p.from], p) {
			continue
		}
		if n, msg := recentFailures(jobs[p.from], p, started); n >= atomicAttempts {
			if gaveUp == nil {
				gaveUp = &AtomicMigrationError{Source: addr[p.from], Target: addr[p.to], Failures: n, Message: msg}
			}
			continue
		}
		if req.stopped() {
			continue
		}
		starts[p.from] = append(starts[p.from], AtomicJob{Slots: rangesOf(p.slots), Target: p.to})
		startedPair[p] = true
	}
	var mu sync.Mutex
	var startErr error
	var wg sync.WaitGroup
	for from, js := range starts {
		m := f.For(addr[from])
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.MigrateSlotsAtomic(ctx, js); err != nil {
				mu.Lock()
				startErr = errors.Join(startErr, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if startErr != nil {
		return prog, startErr
	}
	// Wait for the pairs' jobs, started now or adopted: a pair is done when its source's
	// newest job for it has ended.
	sources := map[string]string{}
	var open []*atomicPair
	for _, p := range pairs {
		if running(jobs[p.from], p) || startedPair[p] {
			open = append(open, p)
			sources[p.from] = addr[p.from]
		}
	}
	for len(open) > 0 {
		if req.Budget > 0 && time.Since(started) > req.Budget || req.stopped() {
			break
		}
		if err := sleepCtx(ctx, atomicPoll); err != nil {
			break
		}
		var err error
		if jobs, err = readJobs(ctx, f, sources); err != nil {
			return prog, err
		}
		var still []*atomicPair
		for _, p := range open {
			j, ok := newestJob(jobs[p.from], p)
			switch {
			case !ok || !j.Finished():
				still = append(still, p)
			case j.State == "success":
				prog.MovedSlots += len(p.slots)
				prog.Remaining -= len(p.slots)
				if n, err := f.For(addr[p.to]).CountKeysInSlots(ctx, p.slots); err == nil {
					prog.MovedKeys += int(n)
				}
			default:
				// Failed or cancelled: the slots are still the source's, and the next step
				// starts the pair again, until recentFailures says it failed too often.
				if gaveUp == nil {
					gaveUp = fmt.Errorf("slot migration %s from %s to %s %s: %s", j.Name, addr[p.from], addr[p.to], j.State, j.Message)
				}
			}
		}
		open = still
	}
	var ame *AtomicMigrationError
	if errors.As(gaveUp, &ame) || gaveUp != nil && prog.MovedSlots == 0 {
		return prog, gaveUp
	}
	return prog, nil
}
