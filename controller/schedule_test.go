package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// TestScheduleCreatesWhenDueAndKeepsTheLastSucceeded drives a schedule every 10 s with
// keep 2 on a clock of the test's: the API server refuses a shorter interval; a backup is
// created at once, the next only when due and once the previous ended; a Failed backup
// never counts, the oldest Succeeded ones beyond keep are deleted, and suspend stops new
// backups.
func TestScheduleCreatesWhenDueAndKeepsTheLastSucceeded(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	ns := newNamespace(t)
	sr := NewScheduleReconciler(h.r)
	now := time.Now()
	h.r.now = func() time.Time { return now }

	sc := &redisv1alpha1.RedisClusterBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "often"},
		Spec: redisv1alpha1.RedisClusterBackupScheduleSpec{ClusterName: "demo", Every: metav1.Duration{Duration: time.Second}, Keep: 2,
			S3: &redisv1alpha1.S3Destination{Endpoint: "http://127.0.0.1:1", Bucket: "backups", CredentialsSecret: redisv1alpha1.LocalName{Name: "s3-creds"}}}}
	err := apiClient.Create(ctx, sc)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.every: at least 10s"))
	sc.Spec.Every.Duration = 10 * time.Second
	g.Expect(apiClient.Create(ctx, sc)).To(Succeed())

	reconcile := func() ctrl.Result {
		res, err := sr.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sc)})
		g.Expect(err).NotTo(HaveOccurred())
		return res
	}
	backups := func() map[string]*redisv1alpha1.RedisClusterBackup {
		var list redisv1alpha1.RedisClusterBackupList
		g.Expect(apiClient.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{redisv1alpha1.ScheduleLabel: "often"})).To(Succeed())
		out := map[string]*redisv1alpha1.RedisClusterBackup{}
		for i := range list.Items {
			out[list.Items[i].Name] = &list.Items[i]
		}
		return out
	}
	end := func(name string, phase redisv1alpha1.BackupPhase) {
		b := backups()[name]
		g.Expect(b).NotTo(BeNil(), name)
		done := metav1.NewTime(now)
		b.Status = redisv1alpha1.RedisClusterBackupStatus{Phase: phase, CompletedAt: &done}
		g.Expect(apiClient.Status().Update(ctx, b)).To(Succeed())
	}
	name := func() string { return "often-" + now.UTC().Format("20060102-150405") }
	status := func() redisv1alpha1.RedisClusterBackupScheduleStatus {
		got := &redisv1alpha1.RedisClusterBackupSchedule{}
		g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(sc), got)).To(Succeed())
		return got.Status
	}

	// The first at once, with deletionPolicy Delete; the next in 10 s.
	res := reconcile()
	first := name()
	g.Expect(backups()).To(HaveKey(first))
	g.Expect(backups()[first].Spec.DeletionPolicy).To(Equal(redisv1alpha1.DeletionDelete))
	g.Expect(res.RequeueAfter).To(Equal(10 * time.Second))
	g.Expect(status().Reason).To(Equal(ReasonBackupScheduled))
	g.Expect(strings.Join(h.events(), "\n")).To(ContainSubstring("Normal BackupScheduled Created backup " + first))

	// Due, but the first is still Pending: none created.
	now = now.Add(15 * time.Second) // the backups' creationTimestamp is the real clock's, a little after the test's
	reconcile()
	g.Expect(backups()).To(HaveLen(1))
	g.Expect(status().Reason).To(Equal(ReasonPreviousBackupRunning))

	// first Succeeded; then second Failed; third and fourth Succeeded.
	var names []string
	for _, phase := range []redisv1alpha1.BackupPhase{redisv1alpha1.BackupSucceeded, redisv1alpha1.BackupFailed, redisv1alpha1.BackupSucceeded, redisv1alpha1.BackupSucceeded} {
		if len(names) == 0 {
			names = append(names, first)
		} else {
			now = now.Add(15 * time.Second) // the backups' creationTimestamp is the real clock's, a little after the test's
			reconcile()
			names = append(names, name())
			g.Expect(backups()).To(HaveKey(name()))
		}
		end(names[len(names)-1], phase)
	}
	reconcile()
	got := backups()
	g.Expect(got).To(HaveLen(2), "kept: the two newest Succeeded (the Failed one and the oldest pruned)")
	g.Expect(got).To(HaveKey(names[2]))
	g.Expect(got).To(HaveKey(names[3]))
	st := status()
	g.Expect(st.Kept).To(BeEquivalentTo(2))
	g.Expect(st.LastSuccessfulBackup).To(Equal(names[3]))
	events := strings.Join(h.events(), "\n")
	g.Expect(events).To(ContainSubstring("Normal BackupPruned Deleted Succeeded backup " + names[0]))
	g.Expect(events).To(ContainSubstring("Normal BackupPruned Deleted Failed backup " + names[1]))

	// Suspended: due, none created; retention still counts.
	cur := &redisv1alpha1.RedisClusterBackupSchedule{}
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(sc), cur)).To(Succeed())
	cur.Spec.Suspend = true
	g.Expect(apiClient.Update(ctx, cur)).To(Succeed())
	now = now.Add(time.Minute)
	reconcile()
	g.Expect(backups()).To(HaveLen(2))
	g.Expect(status().Reason).To(Equal(ReasonSuspended))
	g.Expect(status().NextScheduleTime).To(BeNil())
}
