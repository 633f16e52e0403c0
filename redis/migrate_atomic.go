package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/go-redis/redis/v8"

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

// AtomicMigrationCommands are the commands the atomic mover sends, as ACL command names.
// They are not in OperatorCommands: a server without them (Redis, Valkey 8) refuses an ACL
// rule naming them, and the operator user's rules are one file for every pod. The mover
// grants them to the operator user on a node that refuses them with NOPERM (ACL SETUSER
// adds, the user has +acl|setuser), so a node restarted from the file gets them back on use.
var AtomicMigrationCommands = []string{"cluster|migrateslots", "cluster|getslotmigrations", "cluster|cancelslotmigrations"}

// SlotMigration is one job of CLUSTER GETSLOTMIGRATIONS.
type SlotMigration struct {
	Name string
	// Operation is "EXPORT" (this node is the source) or "IMPORT".
	Operation string
	Slots     []topology.SlotRange
	// Source and Target are node IDs (empty on a replica's tracking entry).
	Source, Target string
	Created        time.Time
	State, Message string
}

// Finished: the job is done, one way or the other, and only kept as a log entry.
func (j SlotMigration) Finished() bool {
	return j.State == "success" || j.State == "failed" || j.State == "cancelled"
}

// AtomicJob is one SLOTSRANGE … NODE group of CLUSTER MIGRATESLOTS.
type AtomicJob struct {
	Slots  []topology.SlotRange
	Target string
}

// MigrateSlotsAtomic sends CLUSTER MIGRATESLOTS with one group a job.
func (a *admin) MigrateSlotsAtomic(ctx context.Context, jobs []AtomicJob) error {
	args := []interface{}{"cluster", "migrateslots"}
	for _, j := range jobs {
		args = append(args, "slotsrange")
		for _, r := range j.Slots {
			args = append(args, r.Start, r.End)
		}
		args = append(args, "node", j.Target)
	}
	err := a.grantingAtomic(ctx, func() error { return a.c.Do(ctx, args...).Err() })
	if err != nil {
		return fmt.Errorf("failed to start slot migrations on %s: %w", a.addr, err)
	}
	return nil
}

// SlotMigrations reads CLUSTER GETSLOTMIGRATIONS: the node's jobs, running and recent.
func (a *admin) SlotMigrations(ctx context.Context) ([]SlotMigration, error) {
	var reply interface{}
	err := a.grantingAtomic(ctx, func() error {
		var err error
		reply, err = a.c.Do(ctx, "cluster", "getslotmigrations").Result()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to read slot migrations of %s: %w", a.addr, err)
	}
	return ParseSlotMigrations(reply)
}

// CancelSlotMigrations cancels every export the node runs; none running is not an error.
func (a *admin) CancelSlotMigrations(ctx context.Context) error {
	err := a.grantingAtomic(ctx, func() error { return a.c.Do(ctx, "cluster", "cancelslotmigrations").Err() })
	if err != nil && !strings.Contains(err.Error(), "No migrations ongoing") {
		return fmt.Errorf("failed to cancel slot migrations on %s: %w", a.addr, err)
	}
	return nil
}

// CountKeysInSlots sums CLUSTER COUNTKEYSINSLOT over slots, in one pipeline.
func (a *admin) CountKeysInSlots(ctx context.Context, slots []int) (int64, error) {
	cmds := make([]*goredis.IntCmd, len(slots))
	_, _ = a.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, s := range slots {
			cmds[i] = p.ClusterCountKeysInSlot(ctx, s)
		}
		return nil
	})
	var n int64
	for _, c := range cmds {
		v, err := c.Result()
		if err != nil {
			return n, fmt.Errorf("failed to count keys on %s: %w", a.addr, err)
		}
		n += v
	}
	return n, nil
}

// grantingAtomic runs call; refused with NOPERM while the operator speaks as its own user,
// it grants that user AtomicMigrationCommands on this node and runs call once more.
func (a *admin) grantingAtomic(ctx context.Context, call func() error) error {
	err := call()
	if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") || a.user == "" || a.user == DefaultUser {
		return err
	}
	args := []interface{}{"acl", "setuser", a.user}
	for _, c := range AtomicMigrationCommands {
		args = append(args, "+"+c)
	}
	if gerr := a.c.Do(ctx, args...).Err(); gerr != nil {
		return fmt.Errorf("%w (and granting the slot migration commands to %s: %w)", err, a.user, gerr)
	}
	return call()
}

// ParseSlotMigrations reads CLUSTER GETSLOTMIGRATIONS' reply: an array of maps (flat arrays of
// key, value under RESP2).
func ParseSlotMigrations(reply interface{}) ([]SlotMigration, error) {
	list, ok := reply.([]interface{})
	if !ok {
		return nil, fmt.Errorf("unexpected CLUSTER GETSLOTMIGRATIONS reply %T", reply)
	}
	out := make([]SlotMigration, 0, len(list))
	for _, item := range list {
		fields := map[string]string{}
		switch m := item.(type) {
		case []interface{}:
			for i := 0; i+1 < len(m); i += 2 {
				fields[fmt.Sprint(m[i])] = fmt.Sprint(m[i+1])
			}
		case map[interface{}]interface{}:
			for k, v := range m {
				fields[fmt.Sprint(k)] = fmt.Sprint(v)
			}
		default:
			return nil, fmt.Errorf("unexpected CLUSTER GETSLOTMIGRATIONS entry %T", item)
		}
		j := SlotMigration{Name: fields["name"], Operation: fields["operation"], Source: fields["source_node"],
			Target: fields["target_node"], State: fields["state"], Message: fields["message"]}
		if sec, err := strconv.ParseInt(fields["create_time"], 10, 64); err == nil {
			j.Created = time.Unix(sec, 0)
		}
		for _, r := range strings.Fields(fields["slot_ranges"]) {
			lo, hi, _ := strings.Cut(r, "-")
			s, err1 := strconv.Atoi(lo)
			e, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("unexpected slot range %q in CLUSTER GETSLOTMIGRATIONS", r)
			}
			j.Slots = append(j.Slots, topology.SlotRange{Start: s, End: e})
		}
		out = append(out, j)
	}
	return out, nil
}

// AtomicMigrationError is a pair whose migrations the servers failed atomicAttempts times
// within atomicFailureWindow: the operator stops starting new ones for it and reports the
// servers' last message until the window has passed.
type AtomicMigrationError struct {
	Source, Target string // addresses
	Failures       int
	Message        string
}

func (e *AtomicMigrationError) Error() string {
	return fmt.Sprintf("CLUSTER MIGRATESLOTS from %s to %s failed %d times in a row; last: %s", e.Source, e.Target, e.Failures, e.Message)
}

// atomicAttempts is how many failed jobs of one source and target (in the source's log,
// created within atomicFailureWindow, since the last job of the pair that succeeded) make
// the mover give up on the pair for the rest of the window.
const (
	atomicAttempts      = 3
	atomicFailureWindow = 5 * time.Minute
	// AtomicRetryAfter is when the controller comes back after an *AtomicMigrationError.
	AtomicRetryAfter = 30 * time.Second
	// atomicPoll is how often a step reads the sources' jobs while they run.
	atomicPoll = 20 * time.Millisecond
)

// UsesAtomicMigration reports whether every member runs a server that moves slots itself.
func UsesAtomicMigration(servers []topology.Server) bool {
	if len(servers) == 0 {
		return false
	}
	for _, s := range servers {
		if !s.AtomicSlotMigration() {
			return false
		}
	}
	return true
}

// membersServers reads INFO server of every member, in parallel; a member that does not
// say leaves its entry zero (which no mover treats as atomic).
func membersServers(ctx context.Context, f Factory, st *topology.ClusterState) []topology.Server {
	out := make([]topology.Server, len(st.Members))
	idx := make([]int, len(st.Members))
	for i := range idx {
		idx[i] = i
	}
	_ = parallel(idx, func(i int) error {
		s, err := f.For(st.Members[i].Addr).Server(ctx)
		out[i] = s
		return err
	})
	return out
}

// atomicPair is the planned slots of one source and target.
type atomicPair struct {
	from, to string
	slots    []int
}

// atomicJobKeys bounds the keys of one job, on the source's average a slot. When a job
// ends, the source deletes the job's keys at once, with its clients' writes waiting (a
// quarter of 1,000,000 keys in one job per source stalled a writer for up to 635 ms on the
// bench); jobs of at most this many keys keep each such stall short. A source snapshots
// its jobs one at a time, so more jobs cost a fork each, not more concurrency. A variable
// for the tests, which cut smaller jobs out of fewer keys.
var atomicJobKeys = 16384.0

// chunks cuts the pair into pairs of at most atomicJobKeys keys (by load, the source's
// keys a slot; the whole pair when unknown), in slot order.
func (p *atomicPair) chunks(load slotLoad) []*atomicPair {
	n := len(p.slots)
	if load.keys > 0 {
		n = max(1, int(atomicJobKeys/load.keys))
	}
	if n >= len(p.slots) {
		return []*atomicPair{p}
	}
	slots := slices.Sorted(slices.Values(p.slots))
	var out []*atomicPair
	for i := 0; i < len(slots); i += n {
		out = append(out, &atomicPair{from: p.from, to: p.to, slots: slots[i:min(i+n, len(slots))]})
	}
	return out
}

// pairsOf groups the moves by source and target, in plan order.
func pairsOf(moves []topology.SlotMove) ([]*atomicPair, map[[2]string]*atomicPair) {
	var pairs []*atomicPair
	byPair := map[[2]string]*atomicPair{}
	for _, mv := range moves {
		k := [2]string{mv.From, mv.To}
		if byPair[k] == nil {
			byPair[k] = &atomicPair{from: mv.From, to: mv.To}
			pairs = append(pairs, byPair[k])
		}
		byPair[k].slots = append(byPair[k].slots, mv.Slot)
	}
	return pairs, byPair
}

// settleAtomic reads every master's jobs and cancels the exports the plan (moves) does not
// want: an abort set the size back, or a crash left jobs of an older plan running. It
// reports busy while a job the plan does not want has not ended, on either side (a
// target cleans up the keys of a cancelled import after its source has let go, and a
// leaving node cannot be reset while it holds them), or a target is still cleaning up.
// It returns the jobs it read, by node ID.
func settleAtomic(ctx context.Context, f Factory, st *topology.ClusterState, moves []topology.SlotMove) (map[string][]SlotMigration, bool, error) {
	_, byPair := pairsOf(moves)
	masters := map[string]string{}
	for i := range st.Members {
		if self := st.Members[i].Self(); self != nil && self.Master {
			masters[self.ID] = st.Members[i].Addr
		}
	}
	jobs, err := readJobs(ctx, f, masters)
	if err != nil {
		return jobs, false, err
	}
	busy := false
	for id, js := range jobs {
		cancel := false
		for _, j := range js {
			if j.State == "cleaning-up" {
				// A target dropping the keys of an import that failed: until it is done it
				// refuses a new import of those slots, which would fail the next job.
				busy = true
			}
			if j.Finished() || wanted(j, byPair[[2]string{j.Source, j.Target}]) {
				continue
			}
			busy = true
			cancel = cancel || j.Operation == "EXPORT"
		}
		if !cancel {
			continue
		}
		m := f.For(masters[id])
		// CANCELSLOTMIGRATIONS cancels every export of the source: the wanted ones are
		// started again.
		if err := m.CancelSlotMigrations(ctx); err != nil {
			return jobs, busy, err
		}
	}
	return jobs, busy, nil
}

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

// readJobs reads GETSLOTMIGRATIONS of the nodes (id -> address), in parallel.
func readJobs(ctx context.Context, f Factory, nodes map[string]string) (map[string][]SlotMigration, error) {
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	out := make([][]SlotMigration, len(ids))
	idx := make([]int, len(ids))
	for i := range idx {
		idx[i] = i
	}
	err := parallel(idx, func(i int) error {
		m := f.For(nodes[ids[i]])
		js, err := m.SlotMigrations(ctx)
		out[i] = js
		return err
	})
	res := map[string][]SlotMigration{}
	for i, id := range ids {
		res[id] = out[i]
	}
	return res, err
}

// rangesOf turns slots into sorted ranges of consecutive slots.
func rangesOf(slots []int) []topology.SlotRange {
	s := slices.Sorted(slices.Values(slots))
	var out []topology.SlotRange
	for _, x := range s {
		if n := len(out); n > 0 && out[n-1].End+1 == x {
			out[n-1].End = x
			continue
		}
		out = append(out, topology.SlotRange{Start: x, End: x})
	}
	return out
}

// wanted: every slot of the job is one of the pair's.
func wanted(j SlotMigration, p *atomicPair) bool {
	if p == nil {
		return false
	}
	set := make(map[int]bool, len(p.slots))
	for _, s := range p.slots {
		set[s] = true
	}
	for _, r := range j.Slots {
		for s := r.Start; s <= r.End; s++ {
			if !set[s] {
				return false
			}
		}
	}
	return true
}

// overlaps: the job moves one of the pair's slots to the pair's target.
func overlaps(j SlotMigration, p *atomicPair) bool {
	if j.Operation != "EXPORT" || j.Target != p.to {
		return false
	}
	for _, s := range p.slots {
		for _, r := range j.Slots {
			if s >= r.Start && s <= r.End {
				return true
			}
		}
	}
	return false
}

// running: a job of the source still moves some of the pair's slots to its target.
func running(jobs []SlotMigration, p *atomicPair) bool {
	for _, j := range jobs {
		if !j.Finished() && overlaps(j, p) {
			return true
		}
	}
	return false
}

// newestJob is the source's latest job for the pair (GETSLOTMIGRATIONS lists newest first).
func newestJob(jobs []SlotMigration, p *atomicPair) (SlotMigration, bool) {
	for _, j := range jobs {
		if overlaps(j, p) {
			return j, true
		}
	}
	return SlotMigration{}, false
}

// recentFailures counts the pair's failed jobs in a row, newest first, created within
// atomicFailureWindow before now, and returns the newest one's message. A cancelled job
// (an abort, the operator's own doing) neither counts nor breaks the run.
func recentFailures(jobs []SlotMigration, p *atomicPair, now time.Time) (int, string) {
	n, msg := 0, ""
	for _, j := range jobs {
		if !overlaps(j, p) || j.State == "cancelled" {
			continue
		}
		if j.State != "failed" || now.Sub(j.Created) > atomicFailureWindow {
			break
		}
		if n == 0 {
			msg = j.Message
		}
		n++
	}
	return n, msg
}
