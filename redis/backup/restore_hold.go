package backup

import (
	"context"
	"sync"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/failhold"
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

// hold is the restore's failhold.Hold on every master: raised to restoreHold at the
// start, further before a big payload (cover).
type hold struct {
	*failhold.Hold
	mu sync.Mutex
	// big is set once a big payload was sent: its master may just have come back.
	big bool
}

func holdDetection(ctx context.Context, clients map[string]*goredis.Client) *hold {
	nodes := make([]failhold.Node, 0, len(clients))
	for _, c := range clients {
		nodes = append(nodes, failhold.Client{Client: c})
	}
	h := &hold{Hold: failhold.New(nodes)}
	h.Raise(ctx, restoreHold)
	return h
}

// cover raises the hold, if needed, so that a payload of n bytes loads within it.
func (h *hold) cover(ctx context.Context, n int) {
	need := restoreHold + time.Duration(float64(n)/payloadRate*float64(time.Second))
	h.mu.Lock()
	h.big = true
	h.mu.Unlock()
	h.Raise(ctx, need)
}

// release sets every raised timeout back, after a big payload a second later, in which
// the masters hear from the node that was busy (as redis.holdDetection does).
func (h *hold) release() {
	h.mu.Lock()
	big := h.big
	h.mu.Unlock()
	h.Release(big)
}
