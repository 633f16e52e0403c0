package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
)

// start takes the cut of a Pending backup's cluster (a few milliseconds of paused writes),
// records it Running and starts the upload in a goroutine of its own; a cluster that
// cannot be cut yet leaves the backup Pending with the reason.
func (r *BackupReconciler) start(ctx context.Context, b *redisv1alpha1.RedisClusterBackup) (ctrl.Result, error) {
	plan, reason, msg, err := r.prepare(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	if reason != "" {
		return ctrl.Result{RequeueAfter: waitFor(reason)}, r.wait(ctx, b, reason, msg)
	}
	cut, snaps, err := backup.Take(ctx, plan.dialer, plan.addrs, backup.Options{})
	if w, ok := backup.IsWait(err); ok {
		return ctrl.Result{RequeueAfter: backupWaitRequeue}, r.wait(ctx, b, w.Reason, w.Message)
	}
	if err != nil {
		return ctrl.Result{RequeueAfter: backupWaitRequeue}, r.wait(ctx, b, "CutFailed", err.Error())
	}
	log.FromContext(ctx).Info("Backup cut taken", "masters", len(snaps), "writePause", cut.Paused, "snapshots", cut.Snapshots())
	r.running.Store(b.UID, true)
	err = r.updateStatus(ctx, b, func(st *redisv1alpha1.RedisClusterBackupStatus) {
		st.Phase, st.Reason, st.Message = redisv1alpha1.BackupRunning, ReasonBackupStarted, ""
		began, ended := metav1.NewMicroTime(cut.PauseBegan), metav1.NewMicroTime(cut.PauseEnded)
		st.CutStartedAt, st.CutEndedAt = &began, &ended
		st.WritePause = cut.Paused.Round(10 * time.Microsecond).String()
		st.Progress = redisv1alpha1.BackupProgress{Shards: int32(len(snaps))}
		st.Progress.Summary = fmt.Sprintf("0/%d shards", len(snaps))
	})
	if err != nil {
		r.running.Delete(b.UID)
		for _, s := range snaps {
			s.Close()
		}
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(b, corev1.EventTypeNormal, ReasonBackupStarted, "Cut %d masters with writes paused %v; uploading to %s; snapshots %s",
		len(snaps), cut.Paused.Round(10*time.Microsecond), plan.dest.location(plan.dir), cut.Snapshots())
	go r.upload(context.WithoutCancel(ctx), b.DeepCopy(), plan, cut, snaps)
	return ctrl.Result{}, nil
}

// waitFor is how soon a backup waiting for reason looks again: soon for a store pod
// starting, backupWaitRequeue otherwise.
func waitFor(reason string) time.Duration {
	if reason == ReasonStoreStarting {
		return 2 * time.Second
	}
	return backupWaitRequeue
}
