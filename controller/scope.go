package controller

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// scope carries what one reconcile observed and decided. Each field says which step fills it.
type scope struct {
	// cluster is the RedisCluster being reconciled (Reconcile); status is written back from it.
	cluster *redisv1alpha1.RedisCluster
	// original is the status as read, to write only when something changed (Reconcile).
	original redisv1alpha1.RedisClusterStatus
	// now is the reconcile's clock reading, used for time-outs and transition times (Reconcile).
	now time.Time

	// rendered are the objects the spec renders to, in apply order, as rendered
	// (observeSpec). Never edited: decide derives s.desired from them.
	rendered []*unstructured.Unstructured
	// creds are what the operator authenticates to Redis with: its ACL user and the
	// password the instances have, none for a cluster without a password (observeSpec).
	creds credentials
	// auth is the password and users asked for and applied; nil for a cluster without a
	// password (observeSpec, reconcileAuth).
	auth *authState
	// noPassword says why the cluster has no password: "" (it has one),
	// noPasswordDisabled (spec.disablePassword) or noPasswordLegacy (formed without one
	// by an older operator) (observeSpec).
	noPassword string
	// passwordNotice is the notice of a cluster an older operator formed without a
	// password, also in notices (observeSpec).
	passwordNotice string
	// tls is the certificate of spec.tls.secretName; nil without spec.tls or when the
	// Secret cannot be used (observeSpec).
	tls *tlsState
	// tlsApplied is status.tls: the certificate every instance serves (observeSpec,
	// reconcileTLS).
	tlsApplied *redisv1alpha1.TLSStatus
	// specErr says why the spec cannot be acted on, in the user's words (observeSpec).
	specErr error

	// statefulSet is the live StatefulSet, nil when absent (observeKubernetes).
	statefulSet *appsv1.StatefulSet
	// pods are the cluster's pods indexed by ordinal; a missing pod is nil (observeKubernetes).
	pods []*corev1.Pod
	// members are the pods that run Redis and can be reached, in ordinal order (observeKubernetes).
	members []topology.Member
	// live are the rendered objects' live copies this RedisCluster controls, by kind/name
	// (objectKey); an absent or foreign object has no entry (observeKubernetes).
	live map[string]client.Object
	// unrendered are optional objects this RedisCluster controls that its spec no longer
	// renders, to delete (observeUnrendered).
	unrendered []client.Object
	// external is every pod's external address by pod name (spec.externalAccess), and
	// externalPending the pods whose address is not known yet, each with why
	// (observeExternal).
	external        map[string]endpoint
	externalPending []string
	// externalWaiting are pods whose load balancer has no address yet but may still get
	// one (loadBalancerBound); externalUncovered the names the certificate does not cover.
	externalWaiting, externalUncovered []string
	// externalRefused is why the API server refused a pod's external Service, by pod
	// (applyObjects).
	externalRefused map[string]string
	// externalRecheck, when not 0, is when to look again (a load balancer pending).
	externalRecheck time.Duration
	// templateChanged is true when the rendered pod template differs from the applied one (observeKubernetes).
	templateChanged bool
	// appliedSize is the size the operator last gave the StatefulSet (observeKubernetes,
	// see appliedSize); the members are the pods below it.
	appliedSize int32

	// redis is the Redis cluster's own view, read from every member; nil when no member
	// is reachable yet (observeRedis).
	redis *topology.ClusterState
	// redisErr is why Redis could not be observed, if it could not (observeRedis).
	redisErr error
	// replication is INFO replication of each replica member by pod name, read only in
	// Upgrading, where it picks the failover target and guards the end (observeRedis).
	replication map[string]topology.Replication

	// conf is what redis.conf changes and what was done about its live directives
	// (observeLiveConfig, tryLiveConfig, reconcileLiveConfig).
	conf liveConf

	// decision is what the phase machine decided for this reconcile (decide).
	decision fsm.Decision

	// desired are the objects the decided phase applies: the rendered ones with the
	// StatefulSet's size and, outside Upgrading, its template held (decide, deriveDesired).
	desired []*unstructured.Unstructured
	// stale are the desired objects the server does not hold as desired, in apply order (decide).
	stale []*unstructured.Unstructured
	// held is the size the StatefulSet is held at in the decided phase (decide, see
	// heldSize); applyObjects updates it when it applies another size.
	held int32
	// resized says who resized the StatefulSet behind the operator's back, "" when
	// nobody did (decide); act reports the revert once applied.
	resized string
	// assignRefused is the refusal of AssignReceive's entries (*topology.AssignError)
	// decide found planning the resize (scalePlaced), nil for none; the resize step
	// refuses with it rather than plan again (reconcileScale).
	assignRefused error

	// remembered is the status.progress this operator last computed for the cluster,
	// which may be ahead of a stale cached status (Reconcile, Reconciler.progress).
	remembered *redisv1alpha1.OperationProgress
	// step is what this reconcile's resize step moved, nil when none ran (reconcileScale);
	// progressOf adds it to status.progress.
	step *scaleStep

	// restore is status.restore as the restore step left it; nil keeps the stored one
	// (reconcileRestore).
	restore *redisv1alpha1.RestoreStatus

	// reason explains the phase in words for status.reason (any step).
	reason string
	// notices are problems that do not stop the reconcile (a name another RedisCluster
	// also wants), appended to status.reason (any step, through notice).
	notices []string
	// appliedStatefulSet is true once this reconcile applied the StatefulSet, whose
	// observed copy (s.statefulSet) is then stale (applyObjects).
	appliedStatefulSet bool
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

// memberAddrs are the members' "ip:port", in member order.
func (s *scope) memberAddrs() []string {
	addrs := make([]string, 0, len(s.members))
	for _, m := range s.members {
		addrs = append(addrs, m.Addr)
	}
	return addrs
}
