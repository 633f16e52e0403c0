// Package failhold holds Redis Cluster's failure detection while the operator blocks a
// master on purpose: a big key's MIGRATE (redis.holdDetection) or RESTORE (a restore,
// redis/backup) can keep a master from answering for longer than cluster-node-timeout,
// and the other masters would flag it failing (and a replica take over, or the cluster
// stop serving) although nothing failed. A Hold raises cluster-node-timeout on the masters
// for the length of the block and sets back what each had. Best effort: a master that
// cannot be read or set keeps its own timeout (the work goes on, less protected). A hold
// left by an operator that died is set back by redis.ReleaseStaleHolds.
package failhold

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	goredis "github.com/go-redis/redis/v8"
)

// Node is a master whose cluster-node-timeout can be read and set.
type Node interface {
	NodeTimeout(ctx context.Context) (time.Duration, error)
	SetNodeTimeout(ctx context.Context, d time.Duration) error
}

// Hold is cluster-node-timeout raised on some of its nodes, until Release.
type Hold struct {
	mu    sync.Mutex
	nodes []Node
	// old is what to set back, by index in nodes, for each node raised.
	old  map[int]time.Duration
	held time.Duration
}

// New is a hold of nodes, raising nothing yet.
func New(nodes []Node) *Hold { return &Hold{nodes: nodes, old: map[int]time.Duration{}} }

// Held is the timeout last raised to (0 before any Raise).
func (h *Hold) Held() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// Raise sets cluster-node-timeout to to on every node whose own is shorter, unless the
// hold is already at least to; a node raised twice is set back to what it had first.
func (h *Hold) Raise(ctx context.Context, to time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if to <= h.held {
		return
	}
	h.held = to
	for i, n := range h.nodes {
		cur, err := n.NodeTimeout(ctx)
		if err != nil || cur >= to {
			continue
		}
		if n.SetNodeTimeout(ctx, to) != nil {
			continue
		}
		if _, ok := h.old[i]; !ok {
			h.old[i] = cur
		}
	}
}

// Release sets every raised timeout back, with its own context (the caller's may be
// spent). settle first waits a second, in which the masters hear from the node that was
// busy before their timeout shrinks; nothing is waited when nothing was raised.
func (h *Hold) Release(settle bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.old) == 0 {
		return
	}
	if settle {
		time.Sleep(time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, old := range h.old {
		_ = h.nodes[i].SetNodeTimeout(ctx, old)
	}
	h.old = map[int]time.Duration{}
}

// Read is cluster-node-timeout of the node c talks to (CONFIG GET).
func Read(ctx context.Context, c goredis.Cmdable) (time.Duration, error) {
	v, err := c.ConfigGet(ctx, "cluster-node-timeout").Result()
	if err != nil || len(v) != 2 {
		return 0, fmt.Errorf("%v %w", v, err)
	}
	ms, err := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Set sets cluster-node-timeout of the node c talks to (CONFIG SET: not written to the
// config file).
func Set(ctx context.Context, c goredis.Cmdable, d time.Duration) error {
	return c.ConfigSet(ctx, "cluster-node-timeout", strconv.FormatInt(d.Milliseconds(), 10)).Err()
}

// Client is a go-redis client of one master as a Node.
type Client struct{ *goredis.Client }

// NodeTimeout reads cluster-node-timeout.
func (c Client) NodeTimeout(ctx context.Context) (time.Duration, error) { return Read(ctx, c.Client) }

// SetNodeTimeout sets cluster-node-timeout.
func (c Client) SetNodeTimeout(ctx context.Context, d time.Duration) error {
	return Set(ctx, c.Client, d)
}
