// Package controller reconciles RedisClusters: each reconcile observes the CR, its
// objects, its pods and Redis itself, lets the phase machine (package fsm) decide the
// phase, acts for that phase, and writes the status.
package controller

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/render"
)

// Options are the operator's tunables, set by flags in main.go.
type Options struct {
	// CreateTimeout, ScaleTimeout and UpgradeTimeout bound how long Creating, Scaling and
	// Upgrading may last before the cluster is marked Failed.
	CreateTimeout, ScaleTimeout, UpgradeTimeout time.Duration
	// MaxConcurrentReconciles is how many clusters are reconciled at once; more than one,
	// so a cluster whose nodes hang holds one worker, not every cluster behind it.
	MaxConcurrentReconciles int
	// HealthCheckInterval is how often a Running cluster nobody changed is looked at
	// (CLUSTER NODES and CLUSTER INFO of every node); requeueRunning when zero. Changes
	// to the CR, its objects and its pods are watched and reconciled at once regardless.
	HealthCheckInterval time.Duration
	// RedisOptions tune the Redis clients (timeouts, hooks such as a command counter).
	RedisOptions RedisClientOptions
	// MovingGCPercent is the Go collector's target while a resize step runs
	// (gcWhileMoving); 0 leaves the collector alone.
	MovingGCPercent int
	// StoreImage is the image of the store pods that serve PersistentVolumeClaim backup
	// destinations (the operator's own: `manager backup-store`); empty: the image of the
	// operator's own pod.
	StoreImage string
}

// Reconciler reconciles RedisCluster objects.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads objects the operator does not cache (the password Secret, the
	// user's ConfigMap), so it needs no cluster-wide watch on Secrets.
	APIReader client.Reader
	Recorder  record.EventRecorder
	Renderer  *render.Renderer
	Options   Options
	redis     *redisClients
	now       func() time.Time
	// memories holds each cluster's *clusterMemory (memory.go): what the reconciler
	// remembers of it between reconciles, dropped by forget.
	memories sync.Map
	// gc raises the collector's target while resize steps run.
	gc gcWhileMoving
	// ownImage guards Options.StoreImage, learnt from the operator's own pod (storeImage).
	ownImage sync.Mutex
	// storeIdentities are the store pods' tokens and key pairs (storepod.go).
	storeIdentities storeIdentities
	// wakeups reconcile a cluster when work of its own goroutine ends (wake.go).
	wakeups wakeups
}

// New builds the reconciler from the manager's clients.
func New(mgr manager.Manager, renderer *render.Renderer, opts Options) *Reconciler {
	return &Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorderFor(redisv1alpha1.ManagedBy),
		Renderer:  renderer,
		Options:   opts,
		redis:     newRedisClients(opts.RedisOptions),
		now:       time.Now,
		gc:        gcWhileMoving{percent: opts.MovingGCPercent},
		wakeups:   make(wakeups, 64),
	}
}

// +kubebuilder:rbac:groups=redis.middleware.hc.cn,resources=redisclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=redis.middleware.hc.cn,resources=redisclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=redis.middleware.hc.cn,resources=redisclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager watches RedisClusters, the objects they own, their pods (pods are owned
// by the StatefulSet, so they are mapped to their cluster by label) and the user ConfigMaps
// they name, so an edit of one reaches the nodes at once (live, or by a roll). ConfigMaps
// are cached anyway for the ones the operator owns, so this watch costs no memory.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&redisv1alpha1.RedisCluster{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToCluster)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.clustersNaming)).
		WatchesRawSource(r.wakeups.source()).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.MaxConcurrentReconciles}).
		Complete(r)
}

func podToCluster(_ context.Context, o client.Object) []reconcile.Request {
	labels := o.GetLabels()
	if labels[redisv1alpha1.LabelName] != redisv1alpha1.LabelNameValue || labels[redisv1alpha1.LabelInstance] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: labels[redisv1alpha1.LabelInstance]}}}
}

// clustersNaming maps a ConfigMap to the RedisClusters of its namespace whose
// spec.pod[0].configmap names it. It lists from the cache, and a namespace holds few
// clusters; a field index would need the CRD installed before the operator starts.
func (r *Reconciler) clustersNaming(ctx context.Context, o client.Object) []reconcile.Request {
	var list redisv1alpha1.RedisClusterList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "Failed to list the RedisClusters that may name a ConfigMap", "ConfigMap", klog.KObj(o))
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.PodTemplate().ConfigMap == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// Reconcile is get → finalizer → observe → decide → act, with the status written once at
// the end from what was observed and decided.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	rc := &redisv1alpha1.RedisCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, rc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rc.SetGroupVersionKind(redisv1alpha1.GroupVersion.WithKind("RedisCluster"))
	if wrote, err := r.reconcileFinalizer(ctx, rc); err != nil || wrote {
		if err != nil {
			countReconcileError(rc, "finalizer")
		}
		return ctrl.Result{}, err
	}

	s := &scope{cluster: rc, original: *rc.Status.DeepCopy(), now: r.now()}
	// step names the step under way, for redis_operator_reconcile_errors_total.
	step := "observe"
	s.remembered = r.memoryOf(req.NamespacedName).progress
	defer func() {
		if retErr != nil {
			countReconcileError(rc, step)
		}
		err := r.writeStatus(ctx, s, retErr)
		if err != nil && !apierrors.IsConflict(err) {
			countReconcileError(rc, "status")
		}
		observeMetrics(s)
		switch {
		case apierrors.IsConflict(err) && retErr == nil:
			// The cache had an older CR than the server: start again from the newer one.
			result, retErr = ctrl.Result{Requeue: true}, nil
		case err != nil:
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
	}()

	if err := r.observe(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	step = "decide"
	if err := r.decide(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).V(1).Info("Decided", "phase", s.decision.Phase, "event", s.decision.Event, "reason", s.decision.Reason)
	step = "act"
	return r.act(ctx, s)
}

// healthCheckInterval is Options.HealthCheckInterval, requeueRunning when unset.
func (r *Reconciler) healthCheckInterval() time.Duration {
	if r.Options.HealthCheckInterval > 0 {
		return r.Options.HealthCheckInterval
	}
	return requeueRunning
}
