package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
)

// objectsRetry is how soon deleting the objects of a deleted backup is tried again.
const objectsRetry = 30 * time.Second

// finalize deletes the objects of a backup being deleted with deletionPolicy Delete (every
// object under PREFIX/NAMESPACE/NAME/, whatever its phase), then lets it go. A
// PersistentVolumeClaim's objects are deleted through a store pod started for it.
func (r *BackupReconciler) finalize(ctx context.Context, b *redisv1alpha1.RedisClusterBackup) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, redisv1alpha1.BackupObjectsFinalizer) {
		return ctrl.Result{}, nil
	}
	dest, dir := destinationOf(b, ""), backupDir(b)
	var deleted int
	var reason, msg string
	var err error
	if b.Status.CutStartedAt != nil {
		// Never cut, never uploaded: there is nothing to delete (and a store that cannot be
		// reached must not hold the resource).
		var store backup.Store
		if store, reason, msg, err = r.openStore(ctx, b, backupStorePod(b), dest); err == nil && reason == "" {
			deleted, err = deleteObjects(ctx, store, dir+"/")
		}
	}
	if reason == ReasonStoreStarting {
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	if reason == ReasonPVCNotFound {
		// The claim is gone (or going), and the files with it unless its volume is retained:
		// holding the backup would hold its namespace's deletion for ever.
		r.Recorder.Eventf(b, corev1.EventTypeWarning, ReasonObjectsNotDeleted, "deletionPolicy Delete: %s; the files under %s/ went with it unless its volume is retained, and are not looked for",
			msg, dest.location(dir))
		reason, err = "", nil
	}
	if err != nil || reason != "" {
		if reason == "" {
			reason, msg = storeErrorReason(dest), err.Error()
		}
		r.Recorder.Eventf(b, corev1.EventTypeWarning, ReasonObjectsNotDeleted, "deletionPolicy Delete: the objects under %s/ are not deleted yet: %s: %s; retried in %v (remove the finalizer %s to leave them)",
			dest.location(dir), reason, msg, objectsRetry, redisv1alpha1.BackupObjectsFinalizer)
		return ctrl.Result{RequeueAfter: objectsRetry}, nil
	}
	r.releaseBackupStore(ctx, b)
	base := b.DeepCopy()
	controllerutil.RemoveFinalizer(b, redisv1alpha1.BackupObjectsFinalizer)
	if err := r.Client.Patch(ctx, b, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Recorder.Eventf(b, corev1.EventTypeNormal, ReasonObjectsDeleted, "deletionPolicy Delete: deleted %d objects under %s/", deleted, dest.location(dir))
	return ctrl.Result{}, nil
}

// deleteObjects deletes every object of the store whose name begins with prefix.
func deleteObjects(ctx context.Context, store backup.Store, prefix string) (int, error) {
	names, err := store.List(ctx, prefix)
	if err != nil {
		return 0, err
	}
	for i, name := range names {
		if err := store.Delete(ctx, name); err != nil {
			return i, err
		}
	}
	return len(names), nil
}
