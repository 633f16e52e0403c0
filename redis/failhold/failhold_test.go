package failhold

import (
	"context"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// TestHoldRaisesAndSetsBack runs against real redis-servers: a hold raises only the
// nodes whose timeout is shorter, raising it further keeps what each had first, and
// Release sets exactly that back (a node already above the hold is never touched).
func TestHoldRaisesAndSetsBack(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 2, redistest.Config{})
	var nodes []Node
	for _, s := range servers {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr})
		t.Cleanup(func() { c.Close() })
		nodes = append(nodes, Client{Client: c})
	}
	timeouts := func() [2]time.Duration {
		var out [2]time.Duration
		for i, n := range nodes {
			d, err := n.NodeTimeout(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = d
		}
		return out
	}
	if err := nodes[0].SetNodeTimeout(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].SetNodeTimeout(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	h := New(nodes)
	h.Raise(ctx, time.Minute)
	if got := timeouts(); got != [2]time.Duration{time.Minute, 90 * time.Second} {
		t.Fatalf("raised to a minute: %v", got)
	}
	h.Raise(ctx, 30*time.Second) // lower than held: nothing
	h.Raise(ctx, 2*time.Minute)
	if got := timeouts(); got != [2]time.Duration{2 * time.Minute, 2 * time.Minute} || h.Held() != 2*time.Minute {
		t.Fatalf("raised to two minutes: %v, held %v", got, h.Held())
	}
	began := time.Now()
	h.Release(false)
	if got := timeouts(); got != [2]time.Duration{2 * time.Second, 90 * time.Second} || time.Since(began) > 500*time.Millisecond {
		t.Fatalf("set back: %v after %v", got, time.Since(began))
	}
	h.Release(true) // nothing raised any more: no wait
	if time.Since(began) > 500*time.Millisecond {
		t.Fatalf("a release with nothing raised waited")
	}
}
