package redis

import (
	"context"
	"errors"
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

// removeLeaving forgets the leaving nodes on every kept member that knows them, then
// resets the leaving nodes so they cannot gossip the kept ones back (FORGET bans an ID
// for only 60 s), as `redis-cli --cluster del-node` does: once they have redirected no
// client for a moment (awaitNoRedirects). A leaving node that knows only itself is
// already reset.
func removeLeaving(ctx context.Context, f Factory, st *topology.ClusterState, req ScaleRequest) (ScaleProgress, error) {
	prog := ScaleProgress{Phase: PhaseRemoving}
	var acts []topology.Action
	for l := req.Keep; l < len(st.Members); l++ {
		id := st.Members[l].ID()
		for i := 0; i < req.Keep; i++ {
			if st.Members[i].Find(id) != nil {
				acts = append(acts, topology.Action{Kind: topology.ActionForget, Member: i, NodeID: id,
					Message: fmt.Sprintf("Made %s forget leaving node %s (%s)", st.Members[i].Pod, st.Members[l].Pod, id)})
			}
		}
	}
	prog.Actions = acts
	if err := newExecutor(f).execute(ctx, st, acts); err != nil {
		return prog, err
	}
	var leaving []string
	for l := req.Keep; l < len(st.Members); l++ {
		if len(st.Members[l].Nodes) > 1 {
			leaving = append(leaving, st.Members[l].Addr)
		}
	}
	awaitNoRedirects(ctx, f, leaving)
	for _, addr := range leaving {
		m := f.For(addr)
		if err := m.ClusterReset(ctx); err != nil {
			return prog, err
		}
	}
	prog.Done = true
	return prog, nil
}

// keepLeavingApart stops the leaving members from following their slots. By default
// (cluster-allow-replica-migration yes) a master that gives away its last slot turns
// replica of the node that took it, and its replicas follow. Each then copies that node's
// whole data set (a full sync, a fork on the taker) just before it is reset, and a
// replica that has just synced rewrites its AOF, during which Redis refuses SIGTERM
// ("Writing initial AOF, can't exit"): the pod then waits out its whole grace period
// when the StatefulSet shrinks. With the directive off on the leaving members they stay
// an empty master and its replicas until removeLeaving resets them. It is set in the steps
// that can move a slot (migrating, finishing an open slot), not in those that wait. CONFIG
// SET only, not the config file: the pods go. Best effort: a Redis before 6.2 has no such
// directive and turns replica as before, which costs time, not data.
func keepLeavingApart(ctx context.Context, f Factory, members []topology.Member, req ScaleRequest) {
	for _, m := range members[min(req.Keep, len(members)):] {
		if c := f.For(m.Addr); c != nil {
			_ = c.ConfigSet(ctx, ReplicaMigration, "no")
		}
	}
}

// ReplicaMigration is the directive keepLeavingApart turns off on the leaving members.
const ReplicaMigration = "cluster-allow-replica-migration"

// RestoreReplicaMigration sets cluster-allow-replica-migration to want on the nodes at
// addrs that have another value, and counts them. keepLeavingApart turns it off on the
// members leaving at the time; when the resize is set back (an abort) some of them stay,
// and would keep it off until they restart: their replicas would not move to a master left
// without one, and an emptied master would not turn replica. Values compare without case.
// A node that cannot be read or refuses is the error (the others are still set).
func RestoreReplicaMigration(ctx context.Context, f Factory, addrs []string, want string) (int, error) {
	n := 0
	var errs []error
	for _, addr := range addrs {
		c := f.For(addr)
		v, err := c.ConfigGet(ctx, ReplicaMigration)
		if errors.Is(err, errUnknownParameter) {
			continue // before Redis 6.2: nothing was turned off
		}
		if err == nil && !strings.EqualFold(v, want) {
			if err = c.ConfigSet(ctx, ReplicaMigration, want); err == nil {
				n++
			}
		}
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}
