package controller

import (
	"context"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// Schedule reasons: events and status.reason of a RedisClusterBackupSchedule.
const (
	// ReasonBackupScheduled: the schedule created a RedisClusterBackup.
	ReasonBackupScheduled = "BackupScheduled"
	// ReasonBackupPruned: retention deleted a backup (its objects with it: the schedule's
	// backups have deletionPolicy Delete).
	ReasonBackupPruned = "BackupPruned"
	// ReasonPreviousBackupRunning: a backup is due but the previous one is still Pending or
	// Running; the next is created once it ends.
	ReasonPreviousBackupRunning = "PreviousBackupRunning"
	// ReasonSuspended: spec.suspend is true: no new backup; retention goes on.
	ReasonSuspended = "Suspended"
)

// ScheduleReconciler runs RedisClusterBackupSchedules: it creates a RedisClusterBackup
// every spec.every and keeps the last spec.keep that succeeded.
type ScheduleReconciler struct {
	*Reconciler
}

// NewScheduleReconciler shares the cluster reconciler's clients.
func NewScheduleReconciler(r *Reconciler) *ScheduleReconciler {
	return &ScheduleReconciler{Reconciler: r}
}

// +kubebuilder:rbac:groups=redis.middleware.hc.cn,resources=redisclusterbackupschedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=redis.middleware.hc.cn,resources=redisclusterbackupschedules/status,verbs=get;update;patch

// SetupWithManager watches schedules, and the backups they created (label ScheduleLabel):
// a backup ending is when retention acts and the next may start.
func (r *ScheduleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&redisv1alpha1.RedisClusterBackupSchedule{}).Named("redisclusterbackupschedule").
		Watches(&redisv1alpha1.RedisClusterBackup{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if name := o.GetLabels()[redisv1alpha1.ScheduleLabel]; name != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
			}
			return nil
		})).Complete(r)
}

// Reconcile prunes the schedule's backups beyond retention, creates the next one when it
// is due, and says when it will look again.
func (r *ScheduleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sc := &redisv1alpha1.RedisClusterBackupSchedule{}
	if err := r.Client.Get(ctx, req.NamespacedName, sc); err != nil {
		if apierrors.IsNotFound(err) {
			backupScheduleInterval.DeletePartialMatch(map[string]string{"namespace": req.Namespace, "schedule": req.Name})
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	backupScheduleInterval.WithLabelValues(sc.Namespace, sc.Spec.ClusterName, sc.Name).Set(sc.Spec.Every.Seconds())
	backups, err := r.scheduleBackups(ctx, sc)
	if err != nil {
		return ctrl.Result{}, err
	}
	st := sc.Status.DeepCopy()
	if err := r.prune(ctx, sc, backups, st); err != nil {
		return ctrl.Result{}, err
	}
	res, err := r.createWhenDue(ctx, sc, backups, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !reflect.DeepEqual(st, &sc.Status) {
		base := sc.DeepCopy()
		sc.Status = *st
		if err := r.Client.Status().Patch(ctx, sc, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	return res, nil
}

// scheduleBackups lists the schedule's backups not being deleted, newest first.
func (r *ScheduleReconciler) scheduleBackups(ctx context.Context, sc *redisv1alpha1.RedisClusterBackupSchedule) ([]*redisv1alpha1.RedisClusterBackup, error) {
	// The API server's list, not the cache's: a backup created by the last reconcile must
	// be seen, or a second one would be created for the same turn.
	var list redisv1alpha1.RedisClusterBackupList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(sc.Namespace), client.MatchingLabels{redisv1alpha1.ScheduleLabel: sc.Name}); err != nil {
		return nil, err
	}
	var backups []*redisv1alpha1.RedisClusterBackup
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			backups = append(backups, &list.Items[i])
		}
	}
	newestFirst(backups)
	return backups, nil
}

// createWhenDue creates the next backup when it is due (not suspended, no backup of the
// schedule still Pending or Running), records the turn in st, and says when to look again.
func (r *ScheduleReconciler) createWhenDue(ctx context.Context, sc *redisv1alpha1.RedisClusterBackupSchedule, backups []*redisv1alpha1.RedisClusterBackup, st *redisv1alpha1.RedisClusterBackupScheduleStatus) (ctrl.Result, error) {
	now := r.now()
	last := st.LastScheduleTime
	for _, b := range backups {
		if last == nil || last.Before(&b.CreationTimestamp) {
			t := b.CreationTimestamp
			last = &t
		}
	}
	next := now
	if last != nil {
		next = last.Add(sc.Spec.Every.Duration)
	}
	busy := ""
	for _, b := range backups {
		if !terminal(b.Status.Phase) {
			busy = b.Name
		}
	}
	var res ctrl.Result
	switch {
	case sc.Spec.Suspend:
		st.Reason, st.Message = ReasonSuspended, "spec.suspend: no new backup"
	case now.Before(next):
	case busy != "":
		st.Reason, st.Message = ReasonPreviousBackupRunning, fmt.Sprintf("backup %s is still %s; the next starts once it ends", busy, phaseOrPending(phaseOf(backups, busy)))
	default:
		b := &redisv1alpha1.RedisClusterBackup{
			ObjectMeta: metav1.ObjectMeta{Namespace: sc.Namespace, Name: fmt.Sprintf("%s-%s", sc.Name, now.UTC().Format("20060102-150405")),
				Labels: map[string]string{redisv1alpha1.ScheduleLabel: sc.Name}},
			Spec: redisv1alpha1.RedisClusterBackupSpec{ClusterName: sc.Spec.ClusterName, S3: sc.Spec.S3, PVC: sc.Spec.PVC, DeletionPolicy: redisv1alpha1.DeletionDelete},
		}
		if err := r.Client.Create(ctx, b); client.IgnoreAlreadyExists(err) != nil {
			return ctrl.Result{}, err
		}
		t := metav1.NewTime(now)
		last, next = &t, now.Add(sc.Spec.Every.Duration)
		st.Reason, st.Message = ReasonBackupScheduled, "created backup "+b.Name
		r.Recorder.Eventf(sc, corev1.EventTypeNormal, ReasonBackupScheduled, "Created backup %s of cluster %s; the next at %s", b.Name, sc.Spec.ClusterName, next.UTC().Format(time.RFC3339))
	}
	st.LastScheduleTime = last
	if !sc.Spec.Suspend {
		n := metav1.NewTime(next)
		st.NextScheduleTime = &n
		res.RequeueAfter = max(next.Sub(now), time.Second)
	} else {
		st.NextScheduleTime = nil
	}
	return res, nil
}

func phaseOf(backups []*redisv1alpha1.RedisClusterBackup, name string) redisv1alpha1.BackupPhase {
	for _, b := range backups {
		if b.Name == name {
			return b.Status.Phase
		}
	}
	return ""
}
