package redis

import (
	"context"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// keepReceiversReplicasHome turns cluster-allow-replica-migration off on the kept
// replicas of the masters receiving slots in this step (moves, and the slots left open),
// when they run a server that replicates CLUSTER SETSLOT (Valkey 8 and later). Such a
// replica applies SETSLOT NODE before its master has bumped its config epoch; should the
// SETSLOT time out on the master (a replica busy loading a big key), or the old owner's
// gossip come first, the old owner's claim wins in the replica's view, which then sees its
// master own no slot and, with the directive on, turns replica of the old owner
// (clusterUpdateSlotsConfigWith): the new master is left without one. Healing moves a
// replica back (topology.PlanSpareMoves), at the cost of two full syncs; with the
// directive off it stays. A kept master never gives away its last slot in a resize, so
// following the slots is never what its replica should do then. CONFIG SET only, best
// effort; the first Running reconcile sets redis.conf's value back (the controller's
// restoreReplicaMigration), which turns the servers' own replica migration back on.
//
// servers is what each member runs, by member index (ScaleRequest.servers: what the
// controller learnt, read only when it does not know).
func keepReceiversReplicasHome(ctx context.Context, f Factory, st *topology.ClusterState, servers []topology.Server, keep int, moves []topology.SlotMove) {
	for _, i := range topology.ReplicasOf(st, keep, topology.SlotReceivers(st, moves)) {
		if !servers[i].SetSlotBlocks() {
			continue // Redis applies SETSLOT on the node it is sent to only
		}
		_ = f.For(st.Members[i].Addr).ConfigSet(ctx, ReplicaMigration, "no")
	}
}
