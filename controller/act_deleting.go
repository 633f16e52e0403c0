package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// podsGonePollInterval is how often a Deleting cluster looks again for its pods. Pod
// deletions also wake the reconciler through the pod watch; the poll is the safety net.
const podsGonePollInterval = 2 * time.Second

// actDeleting runs while the CR has a deletionTimestamp (reconcileDeletion). It is the
// only action that runs while paused.
func (r *Reconciler) actDeleting(ctx context.Context, s *scope) (ctrl.Result, error) {
	return r.reconcileDeletion(ctx, s)
}

// reconcileDeletion runs while the CR has a deletionTimestamp and our finalizer: it
// deletes the StatefulSet in the foreground and lets the CR go only once neither the
// StatefulSet nor any pod of the cluster is left. Without the finalizer, owner references
// let the garbage collector do it.
func (r *Reconciler) reconcileDeletion(ctx context.Context, s *scope) (ctrl.Result, error) {
	rc := s.cluster
	if !controllerutil.ContainsFinalizer(rc, ForegroundFinalizer) {
		return ctrl.Result{}, nil
	}
	if controllerutil.ContainsFinalizer(rc, metav1.FinalizerOrphanDependents) {
		// `kubectl delete --cascade=orphan`: the user keeps the pods; only let the CR go.
		return ctrl.Result{}, r.releaseFinalizer(ctx, s, "The RedisCluster is released; its StatefulSet and pods are orphaned as asked")
	}
	// Read from the API server, not the cache: releasing the CR on a cache that has not
	// seen a pod yet would let the CR go before that pod.
	sts := &appsv1.StatefulSet{}
	stsErr := r.APIReader.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: rc.Name}, sts)
	stsGone := apierrors.IsNotFound(stsErr)
	switch {
	case stsErr != nil && !stsGone:
		return ctrl.Result{}, fmt.Errorf("failed to get StatefulSet %s: %w", rc.Name, stsErr)
	case !stsGone && !metav1.IsControlledBy(sts, rc):
		// Orphaned: the garbage collector honours --cascade=orphan by taking our owner
		// reference off and then its own orphan finalizer, possibly before this reconcile
		// saw that finalizer. A StatefulSet that is not ours any more is the user's to keep.
		return ctrl.Result{}, r.releaseFinalizer(ctx, s, "The RedisCluster is released; its StatefulSet and pods are orphaned as asked")
	case !stsGone && sts.DeletionTimestamp.IsZero():
		// Foreground: the StatefulSet is gone only once its pods are.
		log.FromContext(ctx).Info("Deleting StatefulSet", "StatefulSet", klog.KObj(sts), "propagationPolicy", metav1.DeletePropagationForeground)
		if err := r.Client.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("failed to delete StatefulSet %s: %w", rc.Name, err)
		}
	}
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(rc.Namespace), client.MatchingLabels(redisv1alpha1.SelectorLabels(rc.Name))); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list pods of %s: %w", rc.Name, err)
	}
	if !stsGone || len(pods.Items) > 0 {
		s.reason = fmt.Sprintf("Waiting for %d pod(s) and the StatefulSet to go before the RedisCluster is removed", len(pods.Items))
		return ctrl.Result{RequeueAfter: podsGonePollInterval}, nil
	}
	return ctrl.Result{}, r.releaseFinalizer(ctx, s, "All Redis pods are gone; the RedisCluster is released")
}

// releaseFinalizer removes the foreground finalizer so the CR can go.
func (r *Reconciler) releaseFinalizer(ctx context.Context, s *scope, msg string) error {
	rc := s.cluster
	patch := client.MergeFromWithOptions(rc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	log.FromContext(ctx).Info("Removing finalizer", "RedisCluster", klog.KObj(rc), "finalizer", ForegroundFinalizer)
	controllerutil.RemoveFinalizer(rc, ForegroundFinalizer)
	if err := r.Client.Patch(ctx, rc, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to remove finalizer of RedisCluster %s: %w", rc.Name, err)
	}
	r.Recorder.Event(rc, corev1.EventTypeNormal, ReasonDeleted, msg)
	s.released = true
	return nil
}
