package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// ForegroundFinalizer holds a cluster with `spec.finalizers: foreground` until its pods are gone.
const ForegroundFinalizer = "redis.middleware.hc.cn/foreground-deletion"

// podsGonePollInterval is how often a Deleting cluster looks again for its pods. Pod
// deletions also wake the reconciler through the pod watch; the poll is the safety net.
const podsGonePollInterval = 2 * time.Second

// reconcileFinalizer keeps the finalizer in step with spec.finalizers while the cluster
// lives. It returns true when it wrote the CR, so the reconcile starts again from the
// server's copy.
func (r *Reconciler) reconcileFinalizer(ctx context.Context, rc *redisv1alpha1.RedisCluster) (bool, error) {
	if !rc.DeletionTimestamp.IsZero() {
		return false, nil
	}
	want := rc.Spec.Finalizers == "foreground"
	has := controllerutil.ContainsFinalizer(rc, ForegroundFinalizer)
	if want == has {
		return false, nil
	}
	patch := client.MergeFrom(rc.DeepCopy())
	if want {
		controllerutil.AddFinalizer(rc, ForegroundFinalizer)
	} else {
		controllerutil.RemoveFinalizer(rc, ForegroundFinalizer)
	}
	if err := r.Client.Patch(ctx, rc, patch); err != nil {
		return false, fmt.Errorf("failed to update finalizers of RedisCluster %s: %w", rc.Name, err)
	}
	return true, nil
}

// reconcileDeletion runs while the CR has a deletionTimestamp and our finalizer: it
// deletes the StatefulSet in the foreground and lets the CR go only once no pod of the
// cluster is left. Without the finalizer, owner references let the garbage collector do it.
func (r *Reconciler) reconcileDeletion(ctx context.Context, s *scope) (ctrl.Result, error) {
	rc := s.cluster
	if !controllerutil.ContainsFinalizer(rc, ForegroundFinalizer) {
		return ctrl.Result{}, nil
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: rc.Name}}
	if err := r.Client.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("failed to delete StatefulSet %s: %w", rc.Name, err)
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(rc.Namespace), client.MatchingLabels(selectorLabels(rc.Name))); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list pods of %s: %w", rc.Name, err)
	}
	if len(pods.Items) > 0 {
		s.reason = fmt.Sprintf("Waiting for %d pod(s) to terminate before the RedisCluster is removed", len(pods.Items))
		return ctrl.Result{RequeueAfter: podsGonePollInterval}, nil
	}
	patch := client.MergeFrom(rc.DeepCopy())
	controllerutil.RemoveFinalizer(rc, ForegroundFinalizer)
	if err := r.Client.Patch(ctx, rc, patch); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("failed to remove finalizer of RedisCluster %s: %w", rc.Name, err)
	}
	r.Recorder.Event(rc, corev1.EventTypeNormal, ReasonDeleted, "All Redis pods are gone; the RedisCluster is released")
	s.released = true
	return ctrl.Result{}, nil
}
