package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// TestStaleCacheDoesNotJudgeAFinishedBackup: the informer cache may still hold a
// backup's Running or Pending status after the upload wrote Succeeded. A reconcile that
// reads it must not mark the backup Interrupted (Failed), nor wait it (Pending) or cut it
// again: the API server's copy decides. A backup the API server also says is Running,
// and that this process is not uploading, was cut short by a restart: Interrupted.
func TestStaleCacheDoesNotJudgeAFinishedBackup(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	ns := newNamespace(t)

	var stale *redisv1alpha1.RedisClusterBackupStatus
	cached := interceptor.NewClient(apiClient.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if b, ok := obj.(*redisv1alpha1.RedisClusterBackup); ok && stale != nil {
				b.Status = *stale.DeepCopy()
			}
			return nil
		},
	})
	br := NewBackupReconciler(&Reconciler{Client: cached, APIReader: apiClient, Recorder: h.recorder, redis: h.r.redis, now: time.Now})

	b := &redisv1alpha1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: redisv1alpha1.RedisClusterBackupSpec{ClusterName: "absent", S3: &redisv1alpha1.S3Destination{
			Endpoint: "http://127.0.0.1:1", Bucket: "backups", CredentialsSecret: redisv1alpha1.LocalName{Name: "s3-creds"}}}}
	g.Expect(apiClient.Create(ctx, b)).To(Succeed())
	done := metav1.NewTime(time.Now())
	b.Status = redisv1alpha1.RedisClusterBackupStatus{Phase: redisv1alpha1.BackupSucceeded, Reason: ReasonBackupSucceeded, CompletedAt: &done,
		Shards: []redisv1alpha1.BackupShard{{NodeID: "n0", Slots: "0-16383", Object: "x/shard-0.rdb", Size: 1, SHA256: "00", Keys: 1}}}
	g.Expect(apiClient.Status().Update(ctx, b)).To(Succeed())
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)}
	current := func() *redisv1alpha1.RedisClusterBackup {
		out := &redisv1alpha1.RedisClusterBackup{}
		g.Expect(apiClient.Get(ctx, req.NamespacedName, out)).To(Succeed())
		return out
	}

	for _, phase := range []redisv1alpha1.BackupPhase{redisv1alpha1.BackupRunning, redisv1alpha1.BackupPending, ""} {
		stale = &redisv1alpha1.RedisClusterBackupStatus{Phase: phase, Reason: ReasonBackupStarted}
		_, err := br.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		got := current()
		g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.BackupSucceeded), "a cached %q judged a Succeeded backup: %+v", phase, got.Status)
		g.Expect(got.Status.Reason).To(Equal(ReasonBackupSucceeded))
	}
	g.Expect(h.events()).To(BeEmpty())

	// Running in the API server too, and not uploading here: the operator restarted.
	got := current()
	got.Status = redisv1alpha1.RedisClusterBackupStatus{Phase: redisv1alpha1.BackupRunning, Reason: ReasonBackupStarted}
	g.Expect(apiClient.Status().Update(ctx, got)).To(Succeed())
	stale = nil
	_, err := br.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	got = current()
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.BackupFailed))
	g.Expect(got.Status.Reason).To(Equal(ReasonInterrupted))
	g.Expect(h.events()).To(ConsistOf(ContainSubstring("Warning BackupFailed Interrupted")))
}
