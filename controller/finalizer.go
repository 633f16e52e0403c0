package controller

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// ForegroundFinalizer holds a cluster with `spec.finalizers: foreground` until its pods are gone.
const ForegroundFinalizer = "redis.middleware.hc.cn/foreground-deletion"

// reconcileFinalizer keeps the finalizer in step with spec.finalizers while the cluster
// lives. It returns true when it wrote the CR, so the reconcile starts again from the
// server's copy.
func (r *Reconciler) reconcileFinalizer(ctx context.Context, rc *redisv1alpha1.RedisCluster) (bool, error) {
	if !rc.DeletionTimestamp.IsZero() || rc.Spec.Pause {
		// While paused the operator writes nothing but the status, not even its finalizer.
		return false, nil
	}
	want := rc.Spec.Finalizers == "foreground"
	has := controllerutil.ContainsFinalizer(rc, ForegroundFinalizer)
	if want == has {
		return false, nil
	}
	// The lock keeps a stale cached CR from dropping another controller's finalizer: a
	// merge patch replaces the whole list.
	patch := client.MergeFromWithOptions(rc.DeepCopy(), client.MergeFromWithOptimisticLock{})
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
