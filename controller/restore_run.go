package controller

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
)

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
// (clusterMemory.restore). Only the cluster's reconciles touch it (controller-runtime
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

// restoreStateOf is the cluster's restore state (clusterMemory.restore), made anew for a
// new CR of the same name or another backup, whose attempt under way is stopped.
func (r *Reconciler) restoreStateOf(rc *redisv1alpha1.RedisCluster) *restoreState {
	mem, backupName := r.memory(rc), rc.Spec.RestoreFrom.Backup
	if old := mem.restore; old != nil {
		if old.uid == rc.UID && old.backup == backupName {
			return old
		}
		if old.run != nil {
			old.run.cancel() // a CR of the same name deleted and created again
		}
	}
	mem.restore = &restoreState{uid: rc.UID, backup: backupName}
	return mem.restore
}

// forgetRestore stops the cluster's restore under way and drops its state (as an
// operator restart would); forget calls it for a cluster that no longer exists.
func (r *Reconciler) forgetRestore(key types.NamespacedName) {
	v, ok := r.memories.Load(key)
	if !ok {
		return
	}
	mem := v.(*clusterMemory)
	if mem.restore != nil && mem.restore.run != nil {
		mem.restore.run.cancel()
	}
	mem.restore = nil
}

// followRestore reports the attempt under way (state.run): its progress while it runs,
// its end once it is over; false, with state.run cleared, when a failed attempt's
// backoff is over and the next may start.
func (r *Reconciler) followRestore(ctx context.Context, s *scope, st *redisv1alpha1.RestoreStatus, state *restoreState) (ctrl.Result, bool) {
	rc, from, run := s.cluster, s.cluster.Spec.RestoreFrom, state.run
	select {
	case <-run.done:
	default:
		if run.shown.IsZero() || s.now.Sub(run.shown) >= restoreProgressEvery {
			run.shown = s.now
			run.shownKeys, run.shownBytes, run.shownExpired = run.progress.Keys.Load(), run.progress.Bytes.Load(), run.progress.Expired.Load()
		}
		st.Keys, st.Bytes, st.Expired = run.shownKeys, run.shownBytes, run.shownExpired
		s.reason = fmt.Sprintf("Restoring backup %s: %d keys, %.1f MiB so far", from.Backup, st.Keys, float64(st.Bytes)/(1<<20))
		return ctrl.Result{RequeueAfter: time.Second}, true
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
		r.releaseRestoreStore(ctx, rc)
		// Kept until the status says completed: a reconcile from a cached CR older than
		// that write finds the run here and does not start another.
		return ctrl.Result{Requeue: true}, true
	}
	if reason := permanentRestoreFailure(run.err); reason != "" {
		r.failRestore(s, st, reason, fmt.Sprintf("after %d keys (attempt %d): %v", st.Keys, st.Attempts, run.err), run.finished)
		state.run = nil
		return ctrl.Result{}, true
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
		return ctrl.Result{RequeueAfter: wait}, true
	}
	state.run = nil
	return ctrl.Result{}, false
}

// launchRestore starts attempt st.Attempts+1 in a goroutine of its own (runRestore).
func (r *Reconciler) launchRestore(ctx context.Context, s *scope, st *redisv1alpha1.RestoreStatus, state *restoreState, b *redisv1alpha1.RedisClusterBackup, store backup.Store) ctrl.Result {
	rc, from := s.cluster, s.cluster.Spec.RestoreFrom
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
	key := client.ObjectKeyFromObject(rc)
	go func() {
		runRestore(runCtx, run, target, store, b.Status.Shards)
		r.wakeups.wake(key) // its end reaches the status now, not at the next requeue
	}()
	s.reason = fmt.Sprintf("Restoring backup %s: started", from.Backup)
	return ctrl.Result{RequeueAfter: time.Second}
}

// runRestore writes every key of the shards' objects into the target.
func runRestore(ctx context.Context, run *restoreRun, target backup.RestoreTarget, store backup.Store, shards []redisv1alpha1.BackupShard) {
	defer close(run.done)
	defer run.cancel()
	sources := make([]func() (io.ReadCloser, error), 0, len(shards))
	for _, sh := range shards {
		sources = append(sources, func() (io.ReadCloser, error) {
			rc, err := store.Get(ctx, sh.Object)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", sh.Object, err)
			}
			return backup.VerifyingReader(rc, sh.SHA256), nil
		})
	}
	run.err = backup.Restore(ctx, target, sources, &run.progress)
	run.finished = time.Now()
}
