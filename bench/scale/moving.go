package main

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// The moving phase of a move: from the first slot opened (MIGRATING on its source or
// IMPORTING on its target) or given away to the last one closed, seen the same way for
// every method by asking each master for its own CLUSTER NODES line every movingPoll.
// It leaves out what comes before the keys can move (the operator's pods starting, a new
// master's writable delay, its replica's sync; redis-cli's reference starts with all that
// done) and after (the operator's forget and reset, the phase turning Running).
//
// The poll is itself a load on the nodes it measures: CLUSTER NODES walks every slot, and
// while slots move it took ~0.6 ms of each master's event loop. Every 20 ms on each
// master it slowed the operator's scale-in by about a tenth (the source and its targets
// are never idle, so each poll delays a MIGRATE) and redis-cli by nothing measurable
// (Redis waits for redis-cli between its commands). Every 100 ms it costs a fifth of
// that. A poll only sees a slot open if one is open at that instant, and redis-cli opens
// and closes one slot at a time at a steady pace: sparse polls can fall in step with the
// instants between two slots for a second and more. So the phase ends at the first poll
// from which every master's own slot count is final and no slot is open, which no
// instant between two slots can fake; each edge is then seen up to one poll late, which
// leaves the phase's length unbiased within about ±0.1 s.

const movingPoll = 100 * time.Millisecond

// movingWatch polls until stopped.
type movingWatch struct {
	f      redis.Factory
	addrs  []string
	cancel context.CancelFunc
	done   chan struct{}

	samples []movingSample
	last    []int // each master's own slot count at its last answer
}

// movingSample is one poll: each master's own slot count (the last known one for a
// master that did not answer, as a leaving pod deleted at the end), whether any master
// had a slot open, and the machine's busy CPU time (/proc/stat) then.
type movingSample struct {
	t     time.Time
	busy  time.Duration
	slots []int
	open  bool
}

// watchMoving starts polling the nodes at addrs (the masters before the move: every
// slot that moves has one of them as its source or target).
func watchMoving(addrs []string) *movingWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &movingWatch{f: redis.NewFactory(redis.Options{ReadTimeout: 2 * time.Second}), addrs: addrs,
		cancel: cancel, done: make(chan struct{}), last: make([]int, len(addrs))}
	go func() {
		defer close(w.done)
		for {
			w.poll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-time.After(movingPoll):
			}
		}
	}()
	return w
}

func (w *movingWatch) poll(ctx context.Context) {
	smp := movingSample{t: time.Now()}
	for i, a := range w.addrs {
		nodes, err := w.f.For(a).ClusterNodes(ctx)
		if err != nil {
			continue // a node leaving (the operator deletes the pod of a master it emptied)
		}
		for _, n := range nodes {
			if n.Myself {
				w.last[i] = n.Slots.Count()
				// A master's markers only: Valkey 8 and later show the replicas' copies of
				// them too, which may close a moment after the master's.
				smp.open = smp.open || n.Master && (len(n.Migrating) > 0 || len(n.Importing) > 0)
			}
		}
	}
	smp.slots, smp.busy = slices.Clone(w.last), machineBusy()
	w.samples = append(w.samples, smp)
}

// stop polls once more (the move is over) and returns the moving phase's start and end,
// the last poll before its end, and the cores the whole machine kept busy on average in
// it; ok is false when no slot was ever seen moving. The last slot closed between
// lastOpen and end: the time from lastOpen is the one to quote for what follows the
// move, as it is never shorter than the truth.
func (w *movingWatch) stop() (start, end, lastOpen time.Time, cores float64, ok bool) {
	w.cancel()
	<-w.done
	w.poll(context.Background())
	w.f.Close()
	s := w.samples
	initial, final := s[0].slots, s[len(s)-1].slots
	first := slices.IndexFunc(s, func(x movingSample) bool { return x.open || !slices.Equal(x.slots, initial) })
	settled := len(s)
	for settled > 0 && !s[settled-1].open && slices.Equal(s[settled-1].slots, final) {
		settled--
	}
	if first < 0 || settled <= first || settled == len(s) {
		return time.Time{}, time.Time{}, time.Time{}, 0, false
	}
	// Up to the last poll before the end: the end may come after the move returned (the
	// final poll), when the machine has idled.
	a, b := s[first], s[settled-1]
	if d := b.t.Sub(a.t); d > 0 {
		cores = (b.busy - a.busy).Seconds() / d.Seconds()
	}
	return a.t, s[settled].t, b.t, cores, true
}

// machineBusy is the CPU time all cores spent neither idle nor waiting for I/O since boot
// (the first line of /proc/stat, in ticks of 1/100 s); 0 if it cannot be read.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	var busy int64
	for i, f := range fields[1:] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond
}
