package redis

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// syncPoll is how often CheckSync reads the replica again while it streams.
const syncPoll = 20 * time.Millisecond

// SyncCheck is one comparison of a replica's replication stream with its master's: the
// master's INFO replication, read first, then the replica's, read after it.
type SyncCheck struct {
	// MasterAddr is the address the master was read at.
	MasterAddr string
	// MasterAliases are other addresses of the same master (the external address it
	// announces, spec.externalAccess NodePort: its replicas replicate from that one).
	MasterAliases []string
	Master        topology.Replication
	Replica       topology.Replication
}

// CaughtUp reports whether the replica holds everything its master had written when the
// check began: it replicates from that master, its link is up, no full sync is loading,
// and its offset has reached the master's.
//
// The bound is the master's master_repl_offset read before the replica's, with no
// tolerance. Reading in that order makes a tolerance unnecessary: a replica that has
// processed every byte the master had produced at the moment of the check passes
// however fast the master writes, and writes made after that moment are the ones Redis'
// asynchronous replication is still carrying, as at any other time. A tolerance would
// instead let through a replica still streaming the backlog a full sync leaves behind
// (the writes made while the RDB was built and loaded), which is what this check is for.
// Heartbeat PINGs count in both offsets, so an idle master does not hold a replica back.
func (c SyncCheck) CaughtUp() bool {
	return c.Master.Role == topology.RoleMaster && c.Replica.InSync() && c.replicatesFromMaster() &&
		c.Replica.Offset >= c.Master.Offset
}

// Lag is how many bytes of the master's stream the replica had not yet processed.
func (c SyncCheck) Lag() int64 {
	if d := c.Master.Offset - c.Replica.Offset; d > 0 {
		return d
	}
	return 0
}

// Why says in words why the replica is not caught up; "" when it is.
func (c SyncCheck) Why() string {
	switch {
	case c.Master.Role != topology.RoleMaster:
		return fmt.Sprintf("%s is not a master (role %s)", c.MasterAddr, c.Master.Role)
	case c.Replica.Role != topology.RoleSlave:
		return fmt.Sprintf("it is not a replica (role %s)", c.Replica.Role)
	case !c.replicatesFromMaster():
		return fmt.Sprintf("it replicates from %s, not from %s", c.Replica.MasterAddr, c.MasterAddr)
	case !c.Replica.LinkUp:
		return "its replication link is down"
	case c.Replica.Syncing:
		return "a full sync is in progress"
	case c.Replica.Offset < c.Master.Offset:
		return fmt.Sprintf("it is %d bytes behind its master (offset %d of %d)", c.Lag(), c.Replica.Offset, c.Master.Offset)
	}
	return ""
}

// replicatesFromMaster is true when the replica names the checked master as its own, at
// its address or one of its aliases; a replica that does not report master_host is taken
// at its word.
func (c SyncCheck) replicatesFromMaster() bool {
	return c.Replica.MasterAddr == "" || c.Replica.MasterAddr == c.MasterAddr || slices.Contains(c.MasterAliases, c.Replica.MasterAddr)
}

// CheckSync reads the master's replication offset, then the replica's, and reads the
// replica again (every 20 ms, for at most within) while its link is up and it is still
// behind: a replica that keeps up with a busy master passes once it has processed the
// bytes in flight, a lagging or syncing one fails fast. It only reads. masterAliases are
// other addresses the replica may name the master by (SyncCheck.MasterAliases).
func CheckSync(ctx context.Context, f Factory, masterAddr, replicaAddr string, within time.Duration, masterAliases ...string) (SyncCheck, error) {
	c := SyncCheck{MasterAddr: masterAddr, MasterAliases: masterAliases}
	var err error
	if c.Master, err = f.For(masterAddr).Replication(ctx); err != nil {
		return c, fmt.Errorf("failed to check the sync of %s: %w", replicaAddr, err)
	}
	deadline := time.Now().Add(within)
	for {
		if c.Replica, err = f.For(replicaAddr).Replication(ctx); err != nil {
			return c, fmt.Errorf("failed to check the sync of %s: %w", replicaAddr, err)
		}
		if c.CaughtUp() || !c.Replica.InSync() || !c.replicatesFromMaster() || time.Now().After(deadline) {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(syncPoll):
		}
	}
}
