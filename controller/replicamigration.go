package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// ReasonReplicaMigrationRestored: nodes a resize had told not to follow their slots
// (cluster-allow-replica-migration no: the leaving nodes of a scale-in set back, or on
// Valkey the replicas of the masters receiving slots) were given redis.conf's value back.
const ReasonReplicaMigrationRestored = "ReplicaMigrationRestored"

// restoreReplicaMigration gives every node redis.conf's cluster-allow-replica-migration
// (yes unless the user's ConfigMap says otherwise) where it has another, whoever changed it
// (a CONFIG SET by hand is set back too, as redis.conf is what the pods run). A scale-in turns
// it off on the leaving nodes (redis.keepLeavingApart); when the resize is set back, some
// of them stay. On servers that replicate CLUSTER SETSLOT (Valkey 8 and later) a resize
// also turns it off on the replicas of the masters receiving slots while they move
// (redis.keepReceiversReplicasHome). Once after each resize and once per operator process, on the first
// reconcile that finds the cluster Running and whole: a CONFIG GET per node. A node that
// cannot be read is looked at again on a later reconcile.
func (r *Reconciler) restoreReplicaMigration(ctx context.Context, s *scope) {
	if r.memory(s.cluster).migrationChecked {
		return
	}
	conf, ok := renderedConf(s)
	if !ok {
		return
	}
	want := topology.ConfValue(conf, redis.ReplicaMigration, "yes")
	addrs := s.memberAddrs()
	n, err := redis.RestoreReplicaMigration(ctx, r.factoryFor(s), addrs, want)
	if n > 0 {
		r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonReplicaMigrationRestored,
			"%s set back to %s, as redis.conf gives it, on %d instances (a resize turns it off on nodes that must not follow their slots)", redis.ReplicaMigration, want, n)
	}
	if err != nil {
		log.FromContext(ctx).Info("could not check "+redis.ReplicaMigration+" on every instance; will look again", "error", err.Error())
		return
	}
	r.memory(s.cluster).migrationChecked = true
}
