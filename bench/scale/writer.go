package main

import (
	"context"
	"strconv"
	"sync"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// writer writes w:<i> = i through a cluster client that follows MOVED and ASK, one at a
// time at about rate a second, and records which writes were acknowledged and the longest
// time without an acknowledgement (the write gap).
type writer struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	acked  []int
	failed int
	gap    time.Duration
	f      redis.Factory
}

func writerKey(i int) string   { return "w:" + strconv.Itoa(i) }
func writerValue(i int) string { return strconv.Itoa(i) }

// startWriter begins writing from index first (each round's moves use fresh names).
func startWriter(addrs []string, first, rate int) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cancel: cancel, done: make(chan struct{}), f: redis.NewFactory(redis.Options{})}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs: addrs, ReadTimeout: 10 * time.Second, MaxRedirects: 16,
		// go-redis v8 cannot parse Redis 7's CLUSTER SLOTS.
		ClusterSlots: func(ctx context.Context) ([]goredis.ClusterSlot, error) { return redis.ClusterSlots(ctx, w.f, addrs) },
	})
	go func() {
		defer close(w.done)
		defer cc.Close()
		every := time.Second / time.Duration(rate)
		last := time.Now()
		next := last
		for i := first; ctx.Err() == nil; i++ {
			err := cc.Set(ctx, writerKey(i), writerValue(i), 0).Err()
			now := time.Now()
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, i)
				w.gap = max(w.gap, now.Sub(last))
				last = now
			} else if ctx.Err() == nil {
				w.failed++
			}
			w.mu.Unlock()
			next = next.Add(every)
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			} else {
				next = now
			}
		}
	}()
	return w
}

// stop ends the writer and returns the acknowledged indexes, the failed writes and the
// longest gap.
func (w *writer) stop() ([]int, int, time.Duration) {
	w.cancel()
	<-w.done
	w.f.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.failed, w.gap
}
