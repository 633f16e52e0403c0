package controller

import (
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// clusterMemory is what the reconciler keeps about one cluster from one reconcile to the
// next, in this operator process only: each field says what losing it on a restart costs.
// One per cluster, made on first use (memory) and dropped with everything else the
// reconciler holds for the cluster once it is gone (forget). The workqueue never hands
// one cluster to two workers at once, so the fields need no lock.
type clusterMemory struct {
	// failover is the CLUSTER FAILOVER last sent, so a failover in flight is waited for
	// rather than sent again (failOver, failoverInFlight); nil when none is. Lost on
	// restart, which only means one more FAILOVER to a replica that is already taking over.
	failover *failoverSent
	// servers is what each Redis process runs, by processID (learnServers), so INFO server
	// is read once per process, not every reconcile.
	servers map[string]topology.Server
	// progress is the status.progress last computed (writeStatus): a resize step starts at
	// once after the last, often from a cached CR that has not seen the status just
	// written, and the step after a conflicting write must not lose the slots that one
	// counted. Lost on restart: the status is the fallback.
	progress *redisv1alpha1.OperationProgress
	// stopWarned is the last "Upgrade stopped" Warning (warnStopped), so a pod that flaps
	// between crashes and short runs is reported once, whatever the cached status says.
	stopWarned string
	// failWatch is since when each slot owner has been seen failing, so healing promotes a
	// replica Redis will not (promoteAfter); made on first use (healOptions).
	failWatch *redis.FailWatch
	// holdsChecked is true once releaseStaleHolds found no raised cluster-node-timeout left
	// by an earlier operator process.
	holdsChecked bool
	// migrationChecked is true once restoreReplicaMigration found every node with
	// redis.conf's cluster-allow-replica-migration; a resize step sets it false again.
	migrationChecked bool
	// restore is the restore from spec.restoreFrom under way (restoreStateOf): the
	// goroutine writing the keys and the backoff of its retries. Lost on restart:
	// status.restore says the restore started, and it starts again from the beginning.
	restore *restoreState
}

// memory is the cluster's clusterMemory, made empty on first use.
func (r *Reconciler) memory(rc client.Object) *clusterMemory {
	return r.memoryOf(client.ObjectKeyFromObject(rc))
}

func (r *Reconciler) memoryOf(key types.NamespacedName) *clusterMemory {
	v, _ := r.memories.LoadOrStore(key, &clusterMemory{})
	return v.(*clusterMemory)
}

// forget drops what the reconciler keeps for a cluster that no longer exists: its Redis
// connection pools (closed), its clusterMemory with its restore under way (stopped) and its metrics, so
// a deleted cluster costs nothing. The one place all of it is let go.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.redis.forget(key)
	r.forgetRestore(key)
	r.memories.Delete(key)
	forgetMetrics(key)
}
