package backup

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	goredis "github.com/go-redis/redis/v8"
)

// Holding failure detection. RESTORE of a big key blocks its master for as long as it
// takes to rebuild it (a 2,000,000-member sorted set, 40 MB of payload: 6 s on a loaded
// 2-core machine, more than the default cluster-node-timeout of 5 s): the other masters
// would flag it failing and the cluster stop serving (or a replica take over) until it
// answers again, which is what TestBackupAMillionKeys saw. The restored cluster does not
// serve yet, so for the whole restore every master's cluster-node-timeout is raised to at
// least restoreHold, and further before a payload that could take longer to load than
// the hold covers (at payloadRate); each is set back when Restore returns. Best effort: a
// master that cannot be set keeps its own timeout. Should the operator die meanwhile, the
// masters keep the longer timeout until the operator sets it back once the cluster is
// Running (redis.ReleaseStaleHolds).
const (
	restoreHold = time.Minute
	// payloadRate is the RESTORE payload a master is assumed to load per second, under
	// half of what a loaded 2-core machine measured (40 MB in 6 s).
	payloadRate = 3 << 20
)

type hold struct {
	mu      sync.Mutex
	clients map[string]*goredis.Client
	old     map[string]time.Duration // what to set back, per master raised
	held    time.Duration
	// big is set once a big payload was sent: its master may just have come back.
	big bool
}

func holdDetection(ctx context.Context, clients map[string]*goredis.Client) *hold {
	h := &hold{clients: clients, old: map[string]time.Duration{}}
	h.raise(ctx, restoreHold)
	return h
}

// cover raises the hold, if needed, so that a payload of n bytes loads within it.
func (h *hold) cover(ctx context.Context, n int) {
	need := restoreHold + time.Duration(float64(n)/payloadRate*float64(time.Second))
	h.mu.Lock()
	held := h.held
	h.big = true
	h.mu.Unlock()
	if need > held {
		h.raise(ctx, need)
	}
}

func (h *hold) raise(ctx context.Context, to time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if to <= h.held {
		return
	}
	h.held = to
	for addr, c := range h.clients {
		v, err := c.ConfigGet(ctx, "cluster-node-timeout").Result()
		if err != nil || len(v) != 2 {
			continue
		}
		ms, err := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
		if err != nil || time.Duration(ms)*time.Millisecond >= to {
			continue
		}
		if c.ConfigSet(ctx, "cluster-node-timeout", strconv.FormatInt(to.Milliseconds(), 10)).Err() != nil {
			continue
		}
		if _, ok := h.old[addr]; !ok {
			h.old[addr] = time.Duration(ms) * time.Millisecond
		}
	}
}

// release sets every raised timeout back, after a big payload a second later, in which
// the masters hear from the node that was busy (as redis.holdDetection does); with its own
// context, as the restore's may be spent.
func (h *hold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.old) == 0 {
		return
	}
	if h.big {
		time.Sleep(time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for addr, old := range h.old {
		_ = h.clients[addr].ConfigSet(ctx, "cluster-node-timeout", strconv.FormatInt(old.Milliseconds(), 10)).Err()
	}
	h.old = map[string]time.Duration{}
}
