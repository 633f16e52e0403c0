package controller

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// scope carries what one reconcile observed and decided. Each field says which step fills it.
type scope struct {
	// cluster is the RedisCluster being reconciled (Reconcile); status is written back from it.
	cluster *redisv1alpha1.RedisCluster
	// original is the status as read, to write only when something changed (Reconcile).
	original redisv1alpha1.RedisClusterStatus
	// now is the reconcile's clock reading, used for time-outs and transition times (Reconcile).
	now time.Time

	// rendered are the objects the spec renders to, in apply order (observeSpec).
	rendered []*unstructured.Unstructured
	// password is the Redis password from spec.passwordSecret, "" without one (observeSpec).
	password string
	// specErr says why the spec cannot be acted on, in the user's words (observeSpec).
	specErr error

	// statefulSet is the live StatefulSet, nil when absent (observeKubernetes).
	statefulSet *appsv1.StatefulSet
	// pods are the cluster's pods indexed by ordinal; a missing pod is nil (observeKubernetes).
	pods []*corev1.Pod
	// members are the pods that run Redis and can be reached, in ordinal order (observeKubernetes).
	members []redis.Member
	// stale are the rendered objects the server does not hold as rendered, in apply order (observeKubernetes).
	stale []*unstructured.Unstructured
	// templateChanged is true when the rendered pod template differs from the applied one (observeKubernetes).
	templateChanged bool
	// held is the size the StatefulSet is held at in this phase (observeKubernetes, see
	// heldSize); applyObjects updates it when it applies another size.
	held int32
	// resized says who resized the StatefulSet behind the operator's back, "" when
	// nobody did (observeKubernetes); act reports the revert once applied.
	resized string

	// redis is the Redis cluster's own view, read from every member; nil when no member
	// is reachable yet (observeRedis).
	redis *redis.ClusterState
	// redisErr is why Redis could not be observed, if it could not (observeRedis).
	redisErr error
	// replication is INFO replication of each replica member by pod name, read only in
	// Upgrading, where it picks the failover target and guards the end (observeRedis).
	replication map[string]redis.Replication

	// decision is what the phase machine decided for this reconcile (evaluate).
	decision fsm.Decision

	// reason explains the phase in words for status.reason (any step).
	reason string
	// notices are problems that do not stop the reconcile (a name another RedisCluster
	// also wants), appended to status.reason (any step, through notice).
	notices []string
	// released is true once the finalizer was removed and the CR may vanish (reconcileDeletion).
	released bool
}

// desiredReplicas is the number of Redis instances the spec asks for.
func (s *scope) desiredReplicas() int {
	return int(s.cluster.Spec.Replicas)
}

// readyPods counts the pods of desired ordinals that are Ready.
func (s *scope) readyPods() int {
	n := 0
	for i, p := range s.pods {
		if i < s.desiredReplicas() && podReady(p) {
			n++
		}
	}
	return n
}

// podsUp counts the pods of desired ordinals that run, with an address, and are not going.
func (s *scope) podsUp() int {
	n := 0
	for i, p := range s.pods {
		if i < s.desiredReplicas() && p != nil && p.DeletionTimestamp == nil && p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}
