package controller

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// prune deletes the schedule's backups beyond retention (their objects with them) and
// records in st what is kept.
func (r *ScheduleReconciler) prune(ctx context.Context, sc *redisv1alpha1.RedisClusterBackupSchedule, backups []*redisv1alpha1.RedisClusterBackup, st *redisv1alpha1.RedisClusterBackupScheduleStatus) error {
	prune, kept := retention(backups, int(sc.Spec.Keep))
	for _, b := range prune {
		if err := r.Client.Delete(ctx, b); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.Recorder.Eventf(sc, corev1.EventTypeNormal, ReasonBackupPruned, "Deleted %s backup %s (keep %d): its objects are deleted with it", phaseOrPending(b.Status.Phase), b.Name, sc.Spec.Keep)
	}
	st.Kept = int32(len(kept))
	if len(kept) > 0 {
		st.LastSuccessfulBackup, st.LastSuccessfulTime = kept[0].Name, kept[0].Status.CompletedAt
	}
	return nil
}

// newestFirst sorts backups by creation, newest first (then by name, newest first: the
// schedule's names carry the time).
func newestFirst(backups []*redisv1alpha1.RedisClusterBackup) {
	sort.SliceStable(backups, func(i, j int) bool {
		a, b := backups[i].CreationTimestamp, backups[j].CreationTimestamp
		if !a.Equal(&b) {
			return b.Before(&a)
		}
		return backups[i].Name > backups[j].Name
	})
}

// retention splits a schedule's backups, newest first: kept are the newest keep that
// Succeeded; prune the older Succeeded ones, and every Failed one older than a Succeeded
// one (a newer backup worked: the failure is history). A Failed backup never counts
// towards keep, nor is a Pending or Running one pruned.
func retention(newestFirst []*redisv1alpha1.RedisClusterBackup, keep int) (prune, kept []*redisv1alpha1.RedisClusterBackup) {
	succeeded := 0
	for _, b := range newestFirst {
		switch b.Status.Phase {
		case redisv1alpha1.BackupSucceeded:
			succeeded++
			if succeeded > keep {
				prune = append(prune, b)
			} else {
				kept = append(kept, b)
			}
		case redisv1alpha1.BackupFailed:
			if succeeded > 0 {
				prune = append(prune, b)
			}
		}
	}
	return prune, kept
}
