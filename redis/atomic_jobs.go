package redis

import (
	"fmt"
	"slices"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// The planned moves as atomic migration jobs (atomicPair), matched with the jobs the
// servers report, and the failures that make the mover give up on a pair.

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

// atomicPair is the planned slots of one source and target.
type atomicPair struct {
	from, to string
	slots    []int
}

// AtomicJobKeys bounds the keys of one job, on the source's average a slot. When a job
// ends, the source deletes the job's keys at once, with its clients' writes waiting (a
// quarter of 1,000,000 keys in one job per source stalled a writer for up to 635 ms on the
// bench); jobs of at most this many keys keep each such stall short. A source snapshots
// its jobs one at a time, so more jobs cost a fork each, not more concurrency. A variable
// for the tests, which cut smaller jobs out of fewer keys, and the bench.
var AtomicJobKeys = 16384.0

// chunks cuts the pair into as few pairs of at most AtomicJobKeys keys as hold it (by
// load, the source's keys a slot; the whole pair when unknown), in slot order, their
// sizes differing by one slot at most: no small remainder job (a 25-slot one paid a
// hand-off's write pause of its own right before the next job's on the bench).
func (p *atomicPair) chunks(load slotLoad) []*atomicPair {
	n := len(p.slots)
	if load.keys > 0 {
		n = max(1, int(AtomicJobKeys/load.keys))
	}
	if n >= len(p.slots) {
		return []*atomicPair{p}
	}
	slots := slices.Sorted(slices.Values(p.slots))
	jobs := (len(slots) + n - 1) / n
	out := make([]*atomicPair, 0, jobs)
	for i, from := 0, 0; i < jobs; i++ {
		to := from + len(slots)/jobs
		if i < len(slots)%jobs {
			to++
		}
		out = append(out, &atomicPair{from: p.from, to: p.to, slots: slots[from:to]})
		from = to
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
