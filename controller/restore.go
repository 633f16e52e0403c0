package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

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
	case errors.As(err, &e) && e.Status == http.StatusNotFound:
		return ReasonBackupObjectMissing
	}
	return ""
}

// restoreRun is one attempt of a restore, running in a goroutine of its own.
type restoreRun struct {
	progress backup.Progress
	cancel   context.CancelFunc
	started  time.Time
	// done is closed once err and finished are set.
	done     chan struct{}
	err      error
	finished time.Time
	// reported: the end was said in an event (the reconcile's own field).
	reported bool
	// shown is when the progress below was last put in the status, and shownKeys,
	// shownBytes, shownExpired what it said (the reconcile's own fields): the counters
	// change with every key, and a status written at each reconcile would trigger the next
	// one at once through its own watch event, a loop of writes, Secret reads and Redis
	// observes for as long as the restore runs.
	shown                               time.Time
	shownKeys, shownBytes, shownExpired int64
}

// restoreProgressEvery is how often a running restore's progress is written to the status.
const restoreProgressEvery = 5 * time.Second

// restoreState is what the operator keeps about one cluster's restore
// (Reconciler.restores). Only the cluster's reconciles touch it (controller-runtime
// never runs two for one key at once), but for run's progress and end, which its
// goroutine writes before closing done.
type restoreState struct {
	uid    types.UID
	backup string
	// failures counts attempts in a row that ended in an error, waits reconciles in a row
	// that could not start one: each sets the backoff before the next try.
	failures, waits int
	// nextTry is when a restore that could not start is looked at again; waitMsg is what
	// it said, kept in status.reason meanwhile.
	nextTry time.Time
	waitMsg string
	run     *restoreRun
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
	key := client.ObjectKeyFromObject(rc)
	st := &redisv1alpha1.RestoreStatus{Backup: from.Backup}
	if prev := s.original.Restore; prev != nil && prev.Backup == from.Backup {
		st = prev.DeepCopy()
	}
	s.restore = st
	if st.FailedAt != nil {
		// Failed for good: nothing is tried again (the cluster turns Failed, cannotProceed).
		s.reason = fmt.Sprintf("Restoring backup %s failed for good: %s", from.Backup, st.Reason)
		return ctrl.Result{}, nil
	}

	state := &restoreState{uid: rc.UID, backup: from.Backup}
	if v, ok := r.restores.Load(key); ok {
		if old := v.(*restoreState); old.uid == rc.UID && old.backup == from.Backup {
			state = old
		} else if old.run != nil {
			old.run.cancel() // a CR of the same name deleted and created again
		}
	}
	r.restores.Store(key, state)

	if run := state.run; run != nil {
		select {
		case <-run.done:
		default:
			if run.shown.IsZero() || s.now.Sub(run.shown) >= restoreProgressEvery {
				run.shown = s.now
				run.shownKeys, run.shownBytes, run.shownExpired = run.progress.Keys.Load(), run.progress.Bytes.Load(), run.progress.Expired.Load()
			}
			st.Keys, st.Bytes, st.Expired = run.shownKeys, run.shownBytes, run.shownExpired
			s.reason = fmt.Sprintf("Restoring backup %s: %d keys, %.1f MiB so far", from.Backup, st.Keys, float64(st.Bytes)/(1<<20))
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		st.Keys, st.Bytes, st.Expired = run.progress.Keys.Load(), run.progress.Bytes.Load(), run.progress.Expired.Load()
		if run.err == nil {
			done := metav1.NewTime(run.finished)
			st.CompletedAt, st.Reason, st.Message = &done, ReasonRestoreSucceeded, ""
			took := run.finished.Sub(run.started)
			if !run.reported {
				run.reported = true
				r.Recorder.Eventf(rc, corev1.EventTypeNormal, ReasonRestoreSucceeded, "Restored backup %s: %d keys, %d bytes (%d expired keys skipped) in %v: %.0f keys/s, %.1f MB/s",
					from.Backup, st.Keys, st.Bytes, st.Expired, took.Round(time.Millisecond), float64(st.Keys)/took.Seconds(), float64(st.Bytes)/took.Seconds()/1e6)
				log.FromContext(ctx).Info("Restore done", "backup", from.Backup, "keys", st.Keys, "bytes", st.Bytes, "took", took)
			}
			s.reason = fmt.Sprintf("Restored backup %s: %d keys", from.Backup, st.Keys)
			// Kept until the status says completed: a reconcile from a cached CR older than
			// that write finds the run here and does not start another.
			return ctrl.Result{Requeue: true}, nil
		}
		if reason := permanentRestoreFailure(run.err); reason != "" {
			r.failRestore(s, st, reason, fmt.Sprintf("after %d keys (attempt %d): %v", st.Keys, st.Attempts, run.err), run.finished)
			state.run = nil
			return ctrl.Result{}, nil
		}
		st.Reason, st.Message = ReasonRestoreFailed, run.err.Error()
		if !run.reported {
			run.reported = true
			state.failures++
			r.warnIfNew(s, ReasonRestoreFailed, fmt.Sprintf("Restoring backup %s failed after %d keys (attempt %d): %v; starting again from the beginning",
				from.Backup, st.Keys, st.Attempts, run.err))
		}
		wait := restoreBackoff(state.failures) - s.now.Sub(run.finished)
		s.reason = fmt.Sprintf("Restore of backup %s failed: %v; trying again", from.Backup, run.err)
		if wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		state.run = nil
	}

	if s.now.Before(state.nextTry) {
		// Within the backoff of a restore that could not start: a pod event reconciles
		// the cluster, but the backup and the store are not asked again yet.
		s.reason = state.waitMsg
		return ctrl.Result{RequeueAfter: state.nextTry.Sub(s.now)}, nil
	}
	b, s3, reason, msg, err := r.restoreSource(ctx, rc)
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

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	run := &restoreRun{cancel: cancel, started: time.Now(), done: make(chan struct{})}
	state.run = run
	st.Attempts++
	st.Keys, st.Bytes, st.Expired = 0, 0, 0
	st.Reason, st.Message = ReasonRestoreStarted, ""
	var total, size int64
	for _, sh := range b.Status.Shards {
		total += sh.Keys
		size += sh.Size
	}
	target := backup.RestoreTarget{Addrs: s.memberAddrs(), Dialer: dialerOf(s.creds), Replace: true}
	r.Recorder.Eventf(rc, corev1.EventTypeNormal, ReasonRestoreStarted, "Restoring backup %s (%d shards, %d keys, %d bytes, cut at %s) into %d masters, attempt %d",
		b.Name, len(b.Status.Shards), total, size, cutTime(b), rc.Spec.Masters(), st.Attempts)
	log.FromContext(ctx).Info("Restore starting", "backup", b.Name, "shards", len(b.Status.Shards), "keys", total, "attempt", st.Attempts)
	go runRestore(runCtx, run, target, s3, b.Spec.S3.Bucket, b.Status.Shards)
	s.reason = fmt.Sprintf("Restoring backup %s: started", from.Backup)
	return ctrl.Result{RequeueAfter: time.Second}, nil
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

// runRestore writes every key of the shards' objects into the target.
func runRestore(ctx context.Context, run *restoreRun, target backup.RestoreTarget, s3 *backup.S3, bucket string, shards []redisv1alpha1.BackupShard) {
	defer close(run.done)
	defer run.cancel()
	sources := make([]func() (io.ReadCloser, error), 0, len(shards))
	for _, sh := range shards {
		sources = append(sources, func() (io.ReadCloser, error) {
			rc, err := s3.Get(ctx, bucket, sh.Object)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", sh.Object, err)
			}
			return backup.VerifyingReader(rc, sh.SHA256), nil
		})
	}
	run.err = backup.Restore(ctx, target, sources, &run.progress)
	run.finished = time.Now()
}

// restoreSource resolves spec.restoreFrom: the backup, which must have Succeeded, and a
// client of its store; a reason not empty says why the restore cannot start.
func (r *Reconciler) restoreSource(ctx context.Context, rc *redisv1alpha1.RedisCluster) (*redisv1alpha1.RedisClusterBackup, *backup.S3, string, string, error) {
	name := rc.Spec.RestoreFrom.Backup
	b := &redisv1alpha1.RedisClusterBackup{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: name}, b); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil, ReasonBackupNotFound, fmt.Sprintf("spec.restoreFrom.backup: no RedisClusterBackup %q in namespace %s", name, rc.Namespace), nil
		}
		return nil, nil, "", "", fmt.Errorf("failed to get RedisClusterBackup %s: %w", name, err)
	}
	if b.Status.Phase != redisv1alpha1.BackupSucceeded || len(b.Status.Shards) == 0 {
		msg := fmt.Sprintf("spec.restoreFrom.backup: RedisClusterBackup %s is %s, not Succeeded", name, phaseOrPending(b.Status.Phase))
		if b.Status.Reason != "" {
			msg += " (" + b.Status.Reason + ")"
		}
		return nil, nil, ReasonBackupNotSucceeded, msg, nil
	}
	s3, reason, msg, err := s3Store(ctx, r.APIReader, rc.Namespace, b.Spec.S3, "RedisClusterBackup "+name+": spec.s3")
	return b, s3, reason, msg, err
}

// clusterHoldsKeys refuses a cluster a node of which holds keys (the reason is
// ReasonClusterNotEmpty), before the restore starts.
func (r *Reconciler) clusterHoldsKeys(ctx context.Context, s *scope) (string, string, error) {
	f := r.factoryFor(s)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var holding []string
	var errs []error
	for _, m := range s.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := f.For(m.Addr).DBSize(ctx)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("DBSIZE on %s: %w", m.Pod, err))
			case n > 0:
				holding = append(holding, fmt.Sprintf("%s holds %d keys", m.Pod, n))
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return "", "", errs[0]
	}
	if len(holding) > 0 {
		return ReasonClusterNotEmpty, strings.Join(holding, ", ") + "; a restore writes only into an empty cluster unless spec.restoreFrom.replace is true", nil
	}
	return "", "", nil
}

// dialerOf authenticates as the cluster's reconcile does.
func dialerOf(c credentials) backup.Dialer {
	passwords := []string{c.password}
	if c.previous != "" {
		passwords = append(passwords, c.previous)
	}
	return backup.Dialer{User: c.user, Passwords: passwords, TLS: c.tlsConfig}
}

func cutTime(b *redisv1alpha1.RedisClusterBackup) string {
	if b.Status.CutStartedAt == nil {
		return "an unknown time"
	}
	return b.Status.CutStartedAt.UTC().Format(time.RFC3339Nano)
}

func phaseOrPending(p redisv1alpha1.BackupPhase) string {
	if p == "" {
		return "not started"
	}
	return string(p)
}

// forgetRestore stops the restore of a cluster that no longer exists.
func (r *Reconciler) forgetRestore(key types.NamespacedName) {
	if v, ok := r.restores.LoadAndDelete(key); ok {
		if run := v.(*restoreState).run; run != nil {
			run.cancel()
		}
	}
}
