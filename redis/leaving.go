package redis

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// A leaving master that has given away its last slot still answers a client whose slot
// table is stale with MOVED to the slot's new owner, and the client learns the new table
// from it. Once reset (CLUSTER RESET) it knows no owner and answers CLUSTERDOWN instead,
// which many clients report to the application, until its pod is gone. So the leaving
// nodes are reset only once they have redirected nobody for redirectQuiet: the clients
// that still wrote to them have moved on. A client re-reads its table on a MOVED, and
// meets one only when it happens to use a slot that moved last: the scale bench's writer,
// about 9 such writes a second, went 200 ms without one about one time in six, and then
// met the reset node. A client idle all that time may still find a reset node (or, later,
// no pod) and must re-read the table, as after any failover.
const (
	redirectQuiet = 500 * time.Millisecond
	redirectPoll  = 50 * time.Millisecond
	// redirectWait bounds the wait (checked between two reads): a client that keeps
	// ignoring MOVED does not hold up the scale-in for long.
	redirectWait = 1500 * time.Millisecond
)

// Redirects is how many MOVED and ASK replies the node has given since it started (INFO
// errorstats).
func (a *admin) Redirects(ctx context.Context) (int64, error) {
	text, err := a.c.Info(ctx, "errorstats").Result()
	if err != nil {
		return 0, fmt.Errorf("failed to read INFO errorstats from %s: %w", a.addr, err)
	}
	if !strings.Contains(text, "# Errorstats") {
		// Before Redis 6.2 an unknown section is an empty reply, not an error.
		return 0, fmt.Errorf("%s has no INFO errorstats", a.addr)
	}
	return topology.ParseRedirects(text)
}

// awaitNoRedirects waits until the nodes at addrs have together redirected no client for
// redirectQuiet, at most redirectWait. Best effort: a node that cannot say (no INFO
// errorstats before Redis 6.2, or no answer) ends the wait, as before there was one.
func awaitNoRedirects(ctx context.Context, f Factory, addrs []string) {
	if len(addrs) == 0 {
		return
	}
	count := func() (int64, bool) {
		var sum int64
		for _, addr := range addrs {
			n, err := f.For(addr).Redirects(ctx)
			if err != nil {
				return 0, false
			}
			sum += n
		}
		return sum, true
	}
	last, ok := count()
	deadline := time.Now().Add(redirectWait)
	for quiet := time.Now(); ok && time.Since(quiet) < redirectQuiet && time.Now().Before(deadline); {
		if sleepCtx(ctx, redirectPoll) != nil {
			return
		}
		var n int64
		if n, ok = count(); ok && n != last {
			last, quiet = n, time.Now()
		}
	}
}
