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

// migrateAtomic is migrate for servers that move slots themselves: it adopts the planned
// jobs the sources already run (jobs: what settleAtomic read), starts the others as the
// limits below allow, and waits for them until they end or the budget is spent, starting
// more as jobs end; jobs still running then go on in the servers, and the next step adopts
// them. Stop ends the wait at once (pause: the jobs started finish on their own; an abort
// plans other moves, and the next step cancels the jobs it does not want).
func migrateAtomic(ctx context.Context, f Factory, st *topology.ClusterState, moves []topology.SlotMove, req ScaleRequest,
	jobs map[string][]SlotMigration, mem map[string]topology.Memory) (ScaleProgress, error) {
	r := newAtomicRun(ctx, f, st, moves, req, jobs, mem)
	for {
		if err := r.start(ctx); err != nil {
			return r.prog, err
		}
		if len(r.open) == 0 || r.spent() {
			break
		}
		if err := sleepCtx(ctx, atomicPoll); err != nil {
			break
		}
		if err := r.collect(ctx); err != nil {
			return r.prog, err
		}
	}
	var ame *AtomicMigrationError
	if errors.As(r.gaveUp, &ame) || r.gaveUp != nil && r.prog.MovedSlots == 0 {
		return r.prog, r.gaveUp
	}
	return r.prog, nil
}

// AtomicSourcesPerTarget is how many sources export to one target at once (0: every
// source at once, as before 2026-11-28; bench/scale's operator-asm-all). A source
// pauses its writes at the end of each job until the target has caught up with it and
// claimed the slots, then deletes the job's keys, so the target's pace is every source's
// write pause: with every old master exporting at once (a scale-out), the target applied
// three streams while it was to answer each source's hand-off, and the sources' forks
// and streams took the cores the hand-offs and deletions needed. One source at a time
// keeps that stall short (bench/README.md); the servers still move keys far faster than
// MIGRATE. A variable for the tests and the bench.
var AtomicSourcesPerTarget = 1

// AtomicJobsPerSource is how many jobs one source runs at once (0: every chunk of a pair
// in one CLUSTER MIGRATESLOTS, as before 2026-11-28 02:00). A source snapshots its next
// job while the last waits for its hand-off, so two jobs could hand off back to back:
// two write pauses and two deletions in a row for the source's clients, one stall (330
// ms on the bench). One job at a time gives the writers the time between hand-offs,
// at the cost of that overlap. A variable for the tests and the bench.
var AtomicJobsPerSource = 1

// atomicRun is one step of the atomic mover.
type atomicRun struct {
	f     Factory
	req   ScaleRequest
	addr  map[string]string // node ID -> address
	jobs  map[string][]SlotMigration
	began time.Time
	// todo are the chunks not started yet, in plan order; open those started or adopted
	// and not ended.
	todo, open []*atomicPair
	// failed are the sources and targets whose job failed in this step: the next step
	// starts them again (until recentFailures says they failed too often), not this one.
	failed map[[2]string]bool
	gaveUp error
	prog   ScaleProgress
	// sent: start sent its first jobs (or had none to send).
	sent bool
}

// newAtomicRun cuts the moves into chunks (atomicPair.chunks): a chunk a running job
// covers is adopted, one that failed too often gives the run its *AtomicMigrationError,
// the others are to start.
func newAtomicRun(ctx context.Context, f Factory, st *topology.ClusterState, moves []topology.SlotMove, req ScaleRequest,
	jobs map[string][]SlotMigration, mem map[string]topology.Memory) *atomicRun {
	r := &atomicRun{f: f, req: req, addr: topology.AddrsByID(st), jobs: jobs, began: time.Now(), failed: map[[2]string]bool{},
		prog: ScaleProgress{Phase: PhaseMigrating, Remaining: len(moves), Mover: MoverAtomic}}
	whole, _ := pairsOf(moves)
	loads := sourceLoads(ctx, f, st, moves, mem)
	for _, w := range whole {
		for _, p := range w.chunks(loads[w.from]) {
			if running(jobs[p.from], p) {
				r.open = append(r.open, p)
				continue
			}
			if n, msg := recentFailures(jobs[p.from], p, r.began); n >= atomicAttempts {
				if r.gaveUp == nil {
					r.gaveUp = &AtomicMigrationError{Source: r.addr[p.from], Target: r.addr[p.to], Failures: n, Message: msg}
				}
				continue
			}
			r.todo = append(r.todo, p)
		}
	}
	return r
}

// spent: the budget is spent or the caller asked the step to end.
func (r *atomicRun) spent() bool {
	return r.req.Budget > 0 && time.Since(r.began) > r.req.Budget || r.req.stopped()
}

// start sends the chunks the limits allow, the sources in parallel: a source starts a
// job while it runs fewer than AtomicJobsPerSource (the jobs one source starts at once go
// in one CLUSTER MIGRATESLOTS, which it snapshots one after the other), and a target
// takes a new source while fewer than AtomicSourcesPerTarget export to it. Nothing starts once Stop says so, nor after the first call once the budget is
// spent (a step with no budget left still starts its first jobs, which go on in the
// servers).
func (r *atomicRun) start(ctx context.Context) error {
	if r.req.stopped() || r.sent && r.spent() {
		return nil
	}
	r.sent = true
	exporting := map[string]map[string]bool{} // target -> its sources now
	jobs := map[string]int{}                  // source -> its jobs now
	for _, p := range r.open {
		addTo(exporting, p.to, p.from)
		jobs[p.from]++
	}
	starts := map[string][]AtomicJob{}
	var left []*atomicPair
	for _, p := range r.todo {
		if r.failed[[2]string{p.from, p.to}] || !mayStart(exporting[p.to], p.from, jobs[p.from]) {
			left = append(left, p)
			continue
		}
		addTo(exporting, p.to, p.from)
		jobs[p.from]++
		starts[p.from] = append(starts[p.from], AtomicJob{Slots: rangesOf(p.slots), Target: p.to})
		r.open = append(r.open, p)
	}
	r.todo = left
	return r.send(ctx, starts)
}

// mayStart: a source running jobs jobs may start one more into a target its sources
// export to, within AtomicJobsPerSource and AtomicSourcesPerTarget.
func mayStart(sources map[string]bool, source string, jobs int) bool {
	if AtomicJobsPerSource > 0 && jobs >= AtomicJobsPerSource {
		return false
	}
	return sources[source] || AtomicSourcesPerTarget == 0 || len(sources) < AtomicSourcesPerTarget
}

func addTo(m map[string]map[string]bool, k, v string) {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][v] = true
}

// send sends each source its jobs, in parallel.
func (r *atomicRun) send(ctx context.Context, starts map[string][]AtomicJob) error {
	var mu sync.Mutex
	var startErr error
	var wg sync.WaitGroup
	for from, js := range starts {
		m := r.f.For(r.addr[from])
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
	return startErr
}

// collect reads the open chunks' sources' jobs and ends the chunks whose source's newest
// job for them has ended: a success counts their slots and keys (the target's
// COUNTKEYSINSLOT of them), a failure or a cancellation leaves the slots with the source
// and is reported.
func (r *atomicRun) collect(ctx context.Context) error {
	sources := map[string]string{}
	for _, p := range r.open {
		sources[p.from] = r.addr[p.from]
	}
	var err error
	if r.jobs, err = readJobs(ctx, r.f, sources); err != nil {
		return err
	}
	var still []*atomicPair
	for _, p := range r.open {
		j, ok := newestJob(r.jobs[p.from], p)
		switch {
		case !ok || !j.Finished():
			still = append(still, p)
		case j.State == "success":
			r.prog.MovedSlots += len(p.slots)
			r.prog.Remaining -= len(p.slots)
			if n, err := r.f.For(r.addr[p.to]).CountKeysInSlots(ctx, p.slots); err == nil {
				r.prog.MovedKeys += int(n)
			}
		default:
			// Failed or cancelled: the slots are still the source's, and the next step
			// starts the pair again, until recentFailures says it failed too often.
			r.failed[[2]string{p.from, p.to}] = true
			if r.gaveUp == nil {
				r.gaveUp = fmt.Errorf("slot migration %s from %s to %s %s: %s", j.Name, r.addr[p.from], r.addr[p.to], j.State, j.Message)
			}
		}
	}
	r.open = still
	return nil
}
