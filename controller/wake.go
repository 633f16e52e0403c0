package controller

import (
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// wakeups queues a reconcile of a cluster from outside the watches: work the reconciler
// started in a goroutine of its own (a restore) ends at a moment no object changes, and
// without a wake-up its end would be seen at the next requeue, up to a second later.
type wakeups chan event.TypedGenericEvent[*redisv1alpha1.RedisCluster]

// source is the watch SetupWithManager adds: each wake-up reconciles its cluster.
func (w wakeups) source() source.Source {
	return source.Channel(w, &handler.TypedEnqueueRequestForObject[*redisv1alpha1.RedisCluster]{})
}

// wake queues a reconcile of the cluster, never blocking: with the queue full (or no
// manager, as in tests that call Reconcile themselves) the requeue the reconcile asked
// for still comes.
func (w wakeups) wake(key types.NamespacedName) {
	rc := &redisv1alpha1.RedisCluster{}
	rc.Namespace, rc.Name = key.Namespace, key.Name
	select {
	case w <- event.TypedGenericEvent[*redisv1alpha1.RedisCluster]{Object: rc}:
	default:
	}
}
