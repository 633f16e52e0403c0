package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
)

// Restore reasons: events of a RedisCluster with spec.restoreFrom, and status.restore.reason.
// SecretMissing and S3Error (backup.go) are reasons of status.restore too.
const (
	// ReasonRestoreStarted: an attempt began writing the backup's keys into the formed cluster.
	ReasonRestoreStarted = "RestoreStarted"
	// ReasonRestoreSucceeded: every key of the backup is in; the cluster moves to Running.
	ReasonRestoreSucceeded = "RestoreSucceeded"
	// ReasonRestoreFailed: an attempt stopped (a master refused a key, the store failed
	// mid-way); it is started again from the beginning, with backoff.
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonRestoreWaiting: the restore cannot start; status.restore.reason says why.
	ReasonRestoreWaiting = "RestoreWaiting"
	// ReasonBackupNotFound: spec.restoreFrom.backup names no RedisClusterBackup of the namespace.
	ReasonBackupNotFound = "BackupNotFound"
	// ReasonBackupNotSucceeded: the backup is Pending, Running or Failed: only a Succeeded
	// backup is restored.
	ReasonBackupNotSucceeded = "BackupNotSucceeded"
	// ReasonClusterNotEmpty: a node of the new cluster holds keys and spec.restoreFrom.replace
	// is false.
	ReasonClusterNotEmpty = "ClusterNotEmpty"
	// ReasonRestoreFailedPermanently (event): the restore failed for a cause no retry cures;
	// status.restore.reason names it and failedAt is set. It is not tried again.
	ReasonRestoreFailedPermanently = "RestoreFailedPermanently"
	// The causes no retry cures (status.restore.reason):
	// ReasonS3AccessDenied: the store refuses the backup's credentials (401, 403).
	ReasonS3AccessDenied = "S3AccessDenied"
	// ReasonBackupObjectMissing: a shard's object is not in the store (404).
	ReasonBackupObjectMissing = "BackupObjectMissing"
	// ReasonChecksumMismatch: an object does not have the SHA-256 the backup recorded.
	ReasonChecksumMismatch = "ChecksumMismatch"
	// ReasonIncompatibleBackup: an object is no RDB file the operator reads (a newer
	// format, module data, corrupt), or a master refuses a key's payload.
	ReasonIncompatibleBackup = "IncompatibleBackup"
)

// permanentRestoreFailure is the reason of a restore error no retry cures, or "" for one
// worth retrying (the network, the store's 5xx, a master restarting).
func permanentRestoreFailure(err error) string {
	var e *backup.S3Error
	switch {
	case errors.Is(err, backup.ErrChecksum):
		return ReasonChecksumMismatch
	case errors.Is(err, backup.ErrIncompatible):
		return ReasonIncompatibleBackup
	case errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden):
		return ReasonS3AccessDenied
	case errors.As(err, &e) && e.Status == http.StatusNotFound, errors.Is(err, backup.ErrObjectMissing):
		return ReasonBackupObjectMissing
	}
	return ""
}

// restoreBackoff is how long the n-th failure or wait in a row waits before the next
// try: 5 s, doubling, at most 2 min.
func restoreBackoff(n int) time.Duration {
	d := 5 * time.Second
	for i := 1; i < n && d < 2*time.Minute; i++ {
		d *= 2
	}
	return min(d, 2*time.Minute)
}

// restoring says whether the cluster is yet to be restored from spec.restoreFrom: a new
// cluster whose status does not record the restore done.
func restoring(rc *redisv1alpha1.RedisCluster) bool {
	return !restored(rc)
}

// withholdClientService drops the client Service from the objects to apply while the
// cluster is yet to be restored, so no client is pointed at a cluster whose keys are not
// all in; Running applies it. Clusters without spec.restoreFrom are untouched.
func withholdClientService(s *scope) {
	if !restoring(s.cluster) || s.decision.Phase == fsm.Running {
		return
	}
	kept := s.desired[:0]
	for _, obj := range s.desired {
		if obj.GetKind() == "Service" && obj.GetName() == s.cluster.Name+"-client" {
			continue
		}
		kept = append(kept, obj)
	}
	s.desired = kept
}

// reconcileRestore restores spec.restoreFrom into the formed cluster, one step per
// reconcile, never blocking the worker: the keys are written by a goroutine (one per
// cluster, like a backup's upload) and each reconcile reports its progress in
// status.restore until every key is in, which is what the Restored fact reads.
//
// Restart safety: status.restore.startedAt is written, after the cluster was checked
// empty, before any key is; a restore then always runs with RESTORE … REPLACE. An
// attempt cut short (an error, the operator restarted, the status write lost) is started
// again from the beginning: keys an earlier attempt wrote are overwritten with the same
// value and expiry, and nothing else writes to the cluster meanwhile (it is not Running,
// and its client Service is withheld).
func (r *Reconciler) reconcileRestore(ctx context.Context, s *scope) (ctrl.Result, error) {
	rc := s.cluster
	from := rc.Spec.RestoreFrom
	st := &redisv1alpha1.RestoreStatus{Backup: from.Backup}
	if prev := s.original.Restore; prev != nil && prev.Backup == from.Backup {
		st = prev.DeepCopy()
	}
	s.restore = st
	if st.FailedAt != nil {
		// Failed for good: nothing is tried again (the cluster turns Failed, cannotProceed).
		r.releaseRestoreStore(ctx, rc)
		s.reason = fmt.Sprintf("Restoring backup %s failed for good: %s", from.Backup, st.Reason)
		return ctrl.Result{}, nil
	}

	state := r.restoreStateOf(rc)
	if state.run != nil {
		if res, ok := r.followRestore(ctx, s, st, state); ok {
			return res, nil
		}
	}
	if s.now.Before(state.nextTry) {
		// Within the backoff of a restore that could not start: a pod event reconciles
		// the cluster, but the backup and the store are not asked again yet.
		s.reason = state.waitMsg
		return ctrl.Result{RequeueAfter: state.nextTry.Sub(s.now)}, nil
	}
	return r.beginRestore(ctx, s, st, state)
}

// failRestore records a restore failed for a cause no retry cures, with a Warning.
func (r *Reconciler) failRestore(s *scope, st *redisv1alpha1.RestoreStatus, reason, msg string, at time.Time) {
	failed := metav1.NewTime(at)
	st.Reason, st.Message, st.FailedAt = reason, msg, &failed
	from := s.cluster.Spec.RestoreFrom.Backup
	s.reason = fmt.Sprintf("Restoring backup %s failed for good: %s", from, reason)
	r.Recorder.Eventf(s.cluster, corev1.EventTypeWarning, ReasonRestoreFailedPermanently,
		"Restoring backup %s failed for good: %s: %s; not tried again: fix the cause, delete this RedisCluster and create it again", from, reason, msg)
}

// beginRestore starts an attempt once the backup and its store can be read and the
// cluster is empty (or spec.restoreFrom.replace), after recording the start; otherwise
// it says why it waits, with backoff, or fails for good.
func (r *Reconciler) beginRestore(ctx context.Context, s *scope, st *redisv1alpha1.RestoreStatus, state *restoreState) (ctrl.Result, error) {
	rc, from := s.cluster, s.cluster.Spec.RestoreFrom
	b, store, reason, msg, err := r.restoreSource(ctx, rc)
	if err == nil && reason == "" && st.StartedAt == nil && !from.Replace {
		reason, msg, err = r.clusterHoldsKeys(ctx, s)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if reason == ReasonS3AccessDenied {
		r.failRestore(s, st, reason, msg, s.now)
		return ctrl.Result{}, nil
	}
	if reason == ReasonStoreStarting {
		// The usual first step of a backup on a claim: no Warning, no backoff.
		st.Reason, st.Message = reason, msg
		s.reason = fmt.Sprintf("Restore of backup %s: %s", from.Backup, msg)
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	if reason != "" {
		state.waits++
		st.Reason, st.Message = reason, msg
		state.waitMsg = fmt.Sprintf("Cannot restore backup %s: %s: %s", from.Backup, reason, msg)
		state.nextTry = s.now.Add(restoreBackoff(state.waits))
		r.warnOnce(s, ReasonRestoreWaiting, state.waitMsg)
		return ctrl.Result{RequeueAfter: restoreBackoff(state.waits)}, nil
	}
	state.waits, state.waitMsg = 0, ""
	if st.StartedAt == nil {
		// Record the start before writing any key: a restarted operator then knows keys
		// in the cluster are its own and restores again over them (REPLACE).
		now := metav1.NewTime(s.now)
		st.StartedAt, st.Reason, st.Message = &now, ReasonRestoreStarted, ""
		s.reason = fmt.Sprintf("Restore of backup %s starting", from.Backup)
		return ctrl.Result{Requeue: true}, nil
	}
	return r.launchRestore(ctx, s, st, state, b, store), nil
}
