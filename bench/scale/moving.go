package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// The moving phase of a move: from the first slot opened (MIGRATING on its source or
// IMPORTING on its target) to the last one closed, seen the same way for every method by
// asking each master for its own CLUSTER NODES line every movingPoll. It leaves out what
// comes before the keys can move (the operator's pods starting, a new master's writable
// delay, its replica's sync; redis-cli's reference starts with all that done) and after
// (the operator's forget and reset, the phase turning Running).
//
// The poll is itself a load on the nodes it measures: CLUSTER NODES walks every slot, and
// while slots move it took ~0.6 ms of each master's event loop. Every 20 ms on each
// master it slowed the operator's scale-in by about a tenth (the source and its targets
// are never idle, so each poll delays a MIGRATE) and redis-cli by nothing measurable
// (Redis waits for redis-cli between its commands). Every 100 ms it costs a fifth of
// that; each edge of the phase is then seen up to 100 ms late, which leaves the phase's
// length unbiased (both edges are late alike) within about ±0.1 s.

const movingPoll = 100 * time.Millisecond

// movingWatch polls until stopped.
type movingWatch struct {
	f      redis.Factory
	addrs  []string
	cancel context.CancelFunc
	done   chan struct{}

	// first is the first poll that saw a slot open, lastOpen the last that did, closed
	// the first after lastOpen that saw none (zero while one is open).
	first, lastOpen, closed time.Time
	// busyAtFirst and busyAtClosed are the machine's busy CPU time (/proc/stat) at first
	// and at closed, busyAtLast at lastOpen.
	busyAtFirst, busyAtLast, busyAtClosed time.Duration
}

// watchMoving starts polling the nodes at addrs (the masters before the move: every
// slot that moves has one of them as its source or target).
func watchMoving(addrs []string) *movingWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &movingWatch{f: redis.NewFactory(redis.Options{ReadTimeout: 2 * time.Second}), addrs: addrs,
		cancel: cancel, done: make(chan struct{})}
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
	t := time.Now()
	open := false
	for _, a := range w.addrs {
		nodes, err := w.f.For(a).ClusterNodes(ctx)
		if err != nil {
			continue // a node leaving (the operator deletes the pod of a master it emptied)
		}
		for _, n := range nodes {
			if n.Myself && (len(n.Migrating) > 0 || len(n.Importing) > 0) {
				open = true
			}
		}
	}
	switch {
	case open:
		busy := machineBusy()
		if w.first.IsZero() {
			w.first, w.busyAtFirst = t, busy
		}
		w.lastOpen, w.closed, w.busyAtLast = t, time.Time{}, busy
	case !w.lastOpen.IsZero() && w.closed.IsZero():
		w.closed, w.busyAtClosed = t, machineBusy()
	}
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

// stop polls once more (the move is over) and returns the moving phase's start and end,
// the last poll that saw a slot open, and the cores the whole machine kept busy on
// average in it; ok is false when no slot was ever seen open. The last slot closed
// between lastOpen and end: the time from lastOpen is the one to quote for what follows
// the move, as it is never shorter than the truth.
func (w *movingWatch) stop() (start, end, lastOpen time.Time, cores float64, ok bool) {
	w.cancel()
	<-w.done
	w.poll(context.Background())
	w.f.Close()
	if w.first.IsZero() || w.closed.IsZero() {
		return time.Time{}, time.Time{}, time.Time{}, 0, false
	}
	// Up to the last poll that saw a slot open: the closing poll may come after the move
	// returned (the final one), when the machine has idled.
	if d := w.lastOpen.Sub(w.first); d > 0 {
		cores = (w.busyAtLast - w.busyAtFirst).Seconds() / d.Seconds()
	}
	return w.first, w.closed, w.lastOpen, cores, true
}
