package controller

import (
	"context"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// Backup reasons: events and status.reason of a RedisClusterBackup. The cut's own
// reasons to wait (OpenSlots, NodeFailing, ForkBusy, ...) come from redis/backup.
const (
	// ReasonBackupStarted: the cut is taken; uploading.
	ReasonBackupStarted = "BackupStarted"
	// ReasonBackupSucceeded: every shard and the manifest are in the store.
	ReasonBackupSucceeded = "BackupSucceeded"
	// ReasonBackupFailed: the backup stopped; no manifest was written.
	ReasonBackupFailed = "BackupFailed"
	// ReasonBackupWaiting: the backup cannot start yet (status.reason says why).
	ReasonBackupWaiting = "BackupWaiting"
	// ReasonClusterNotFound: spec.clusterName names no RedisCluster of the namespace.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonClusterNotRunning: the cluster is not Running (creating, resizing, upgrading, failed).
	ReasonClusterNotRunning = "ClusterNotRunning"
	// ReasonSecretMissing: the credentials or CA Secret (or its key) is missing.
	ReasonSecretMissing = "SecretMissing"
	// ReasonS3Error: the object store refused or could not be reached (bucket missing,
	// wrong credentials, endpoint unreachable).
	ReasonS3Error = "S3Error"
	// ReasonInterrupted: the operator restarted while the backup was uploading.
	ReasonInterrupted = "Interrupted"
	// ReasonUploadFailed: reading a snapshot or writing it to the store failed.
	ReasonUploadFailed = "UploadFailed"
	// ReasonObjectsDeleted (event): a backup with deletionPolicy Delete was deleted and its
	// objects were deleted from the store.
	ReasonObjectsDeleted = "ObjectsDeleted"
	// ReasonObjectsNotDeleted (event): a backup with deletionPolicy Delete is being deleted
	// but its objects could not be; the resource stays until they are (retried).
	ReasonObjectsNotDeleted = "ObjectsNotDeleted"
)

// backupWaitRequeue is how soon a waiting backup looks again.
const backupWaitRequeue = 10 * time.Second

// BackupReconciler runs RedisClusterBackups: it takes the cut in Reconcile (a few
// milliseconds of paused writes) and uploads the snapshots in a goroutine of its own,
// which writes the status as it goes.
type BackupReconciler struct {
	*Reconciler
	// running holds the UIDs of the backups this process is uploading: a backup the
	// status says is Running but not here was cut short by a restart.
	running sync.Map
}

// NewBackupReconciler shares the cluster reconciler's clients and credentials.
func NewBackupReconciler(r *Reconciler) *BackupReconciler { return &BackupReconciler{Reconciler: r} }

// +kubebuilder:rbac:groups=redis.middleware.hc.cn,resources=redisclusterbackups,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=redis.middleware.hc.cn,resources=redisclusterbackups/status,verbs=get;update;patch

// SetupWithManager watches RedisClusterBackups.
func (r *BackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&redisv1alpha1.RedisClusterBackup{}).Named("redisclusterbackup").Complete(r)
}

// Reconcile starts a backup once its cluster can be cut.
func (r *BackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &redisv1alpha1.RedisClusterBackup{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	_, mine := r.running.Load(b.UID)
	if !b.DeletionTimestamp.IsZero() {
		if mine {
			// The upload ends on its own (Succeeded, or Failed with its objects deleted);
			// the objects are deleted after it.
			return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
		}
		return r.finalize(ctx, b)
	}
	if err := r.syncFinalizer(ctx, b); err != nil {
		return ctrl.Result{}, err
	}
	if mine {
		return ctrl.Result{}, nil
	}
	if !terminal(b.Status.Phase) {
		// The cache may not have the upload's last write yet: a backup that just Succeeded
		// (and left running) would read as Running and be marked Interrupted, or as Pending
		// and be cut a second time over its own objects. The API server's copy decides.
		if err := r.APIReader.Get(ctx, req.NamespacedName, b); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	switch b.Status.Phase {
	case redisv1alpha1.BackupSucceeded, redisv1alpha1.BackupFailed:
		observeBackupSucceeded(b)
		r.releaseBackupStore(ctx, b) // left by an operator that stopped meanwhile
		return ctrl.Result{}, nil
	case redisv1alpha1.BackupRunning:
		r.fail(ctx, b, ReasonInterrupted, "the operator restarted while the snapshots were uploading; take another backup")
		return ctrl.Result{}, nil
	}
	return r.start(ctx, b)
}

// syncFinalizer holds the backup by the objects' finalizer only with deletionPolicy
// Delete, whatever its phase.
func (r *BackupReconciler) syncFinalizer(ctx context.Context, b *redisv1alpha1.RedisClusterBackup) error {
	want := b.Spec.DeletionPolicy == redisv1alpha1.DeletionDelete
	if want == controllerutil.ContainsFinalizer(b, redisv1alpha1.BackupObjectsFinalizer) {
		return nil
	}
	base := b.DeepCopy()
	if want {
		controllerutil.AddFinalizer(b, redisv1alpha1.BackupObjectsFinalizer)
	} else {
		controllerutil.RemoveFinalizer(b, redisv1alpha1.BackupObjectsFinalizer)
	}
	return r.Client.Patch(ctx, b, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// wait records why the backup waits (Pending), with one Warning event per new reason.
func (r *BackupReconciler) wait(ctx context.Context, b *redisv1alpha1.RedisClusterBackup, reason, msg string) error {
	if b.Status.Phase == redisv1alpha1.BackupPending && b.Status.Reason == reason && b.Status.Message == msg {
		return nil
	}
	if b.Status.Reason != reason {
		kind := corev1.EventTypeWarning
		if reason == ReasonStoreStarting {
			kind = corev1.EventTypeNormal // the usual first step of a PVC destination
		}
		r.Recorder.Eventf(b, kind, ReasonBackupWaiting, "%s: %s", reason, msg)
	}
	return r.updateStatus(ctx, b, func(st *redisv1alpha1.RedisClusterBackupStatus) {
		if !terminal(st.Phase) {
			st.Phase, st.Reason, st.Message = redisv1alpha1.BackupPending, reason, msg
		}
	})
}

func (r *BackupReconciler) fail(ctx context.Context, b *redisv1alpha1.RedisClusterBackup, reason, msg string) {
	now := metav1.Now()
	failed := false
	if err := r.updateStatus(ctx, b, func(st *redisv1alpha1.RedisClusterBackupStatus) {
		// A backup the API server says is over keeps its end: only a stale copy of it
		// could be judged again.
		if failed = !terminal(st.Phase); failed {
			st.Phase, st.Reason, st.Message, st.CompletedAt = redisv1alpha1.BackupFailed, reason, msg, &now
		}
	}); err != nil {
		log.FromContext(ctx).Error(err, "Failed to record a failed backup", "backup", b.Name)
		return
	}
	if failed {
		countBackupEnded(b, "failed")
		r.Recorder.Eventf(b, corev1.EventTypeWarning, ReasonBackupFailed, "%s: %s", reason, msg)
	}
}

// terminal says whether a backup is over: Succeeded or Failed.
func terminal(p redisv1alpha1.BackupPhase) bool {
	return p == redisv1alpha1.BackupSucceeded || p == redisv1alpha1.BackupFailed
}

// updateStatus applies change to the backup's latest status and writes it.
func (r *BackupReconciler) updateStatus(ctx context.Context, b *redisv1alpha1.RedisClusterBackup, change func(*redisv1alpha1.RedisClusterBackupStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &redisv1alpha1.RedisClusterBackup{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil {
			return err
		}
		before := cur.Status.DeepCopy()
		change(&cur.Status)
		if reflect.DeepEqual(before, &cur.Status) {
			return nil
		}
		return r.Client.Status().Update(ctx, cur)
	})
}
