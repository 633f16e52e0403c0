package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// TestDeletionPolicy: deleting a RedisClusterBackup deletes its objects from a real S3
// server only with deletionPolicy Delete (held by a finalizer until they are gone, and
// until the store takes the credentials); with Retain (the default) they stay. Objects of
// another backup under the same prefix are untouched.
func TestDeletionPolicy(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	ns := newNamespace(t)
	br := NewBackupReconciler(h.r)
	s3srv := redistest.StartS3(t, "127.0.0.1")
	s3 := &backup.S3{Endpoint: s3srv.Endpoint, AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey}
	g.Expect(s3.CreateBucket(ctx, "backups")).To(Succeed())
	g.Expect(apiClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3-creds"},
		StringData: map[string]string{"accessKeyID": s3srv.AccessKey, "secretAccessKey": "wrong"}})).To(Succeed())

	newBackup := func(name, policy string) *redisv1alpha1.RedisClusterBackup {
		b := &redisv1alpha1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: redisv1alpha1.RedisClusterBackupSpec{ClusterName: "demo", DeletionPolicy: policy, S3: &redisv1alpha1.S3Destination{
				Endpoint: s3srv.Endpoint, Bucket: "backups", Prefix: "t", CredentialsSecret: redisv1alpha1.LocalName{Name: "s3-creds"}}}}
		g.Expect(apiClient.Create(ctx, b)).To(Succeed())
		done := metav1.Now()
		cut := metav1.NewMicroTime(done.Time)
		b.Status = redisv1alpha1.RedisClusterBackupStatus{Phase: redisv1alpha1.BackupSucceeded, CompletedAt: &done, CutStartedAt: &cut}
		for i := 0; i < 2; i++ {
			obj := fmt.Sprintf("t/%s/%s/shard-%d.rdb", ns, name, i)
			g.Expect(s3.PutSmall(ctx, "backups", obj, []byte("rdb"))).To(Succeed())
			b.Status.Shards = append(b.Status.Shards, redisv1alpha1.BackupShard{Object: obj, Size: 3})
		}
		g.Expect(s3.PutSmall(ctx, "backups", fmt.Sprintf("t/%s/%s/manifest.json", ns, name), []byte("{}"))).To(Succeed())
		g.Expect(apiClient.Status().Update(ctx, b)).To(Succeed())
		return b
	}
	reconcile := func(b *redisv1alpha1.RedisClusterBackup) ctrl.Result {
		res, err := br.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)})
		g.Expect(err).NotTo(HaveOccurred())
		return res
	}
	objects := func(name string) []string {
		names, err := s3.List(ctx, "backups", fmt.Sprintf("t/%s/%s/", ns, name))
		g.Expect(err).NotTo(HaveOccurred())
		return names
	}
	gone := func(b *redisv1alpha1.RedisClusterBackup) bool {
		return apierrors.IsNotFound(apiClient.Get(ctx, client.ObjectKeyFromObject(b), &redisv1alpha1.RedisClusterBackup{}))
	}

	retained, deleted := newBackup("kept", ""), newBackup("dropped", redisv1alpha1.DeletionDelete)
	// A name that begins with the other's: its objects are not under dropped/.
	neighbour := newBackup("dropped-2", "")
	g.Expect(retained.Spec.DeletionPolicy).To(Equal(redisv1alpha1.DeletionRetain), "the default")
	reconcile(retained)
	reconcile(deleted)
	got := &redisv1alpha1.RedisClusterBackup{}
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(deleted), got)).To(Succeed())
	g.Expect(got.Finalizers).To(ConsistOf(redisv1alpha1.BackupObjectsFinalizer))
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(retained), got)).To(Succeed())
	g.Expect(got.Finalizers).To(BeEmpty())

	// Retain: the resource goes at once, the objects stay.
	g.Expect(apiClient.Delete(ctx, retained)).To(Succeed())
	g.Expect(gone(retained)).To(BeTrue())
	g.Expect(objects("kept")).To(HaveLen(3))

	// Delete, with credentials the store refuses: held, a Warning, retried.
	g.Expect(apiClient.Delete(ctx, deleted)).To(Succeed())
	res := reconcile(deleted)
	g.Expect(res.RequeueAfter).To(Equal(objectsRetry))
	g.Expect(gone(deleted)).To(BeFalse())
	g.Expect(objects("dropped")).To(HaveLen(3))
	g.Expect(strings.Join(h.events(), "\n")).To(ContainSubstring("Warning ObjectsNotDeleted deletionPolicy Delete: the objects under backups/t/" + ns + "/dropped/ are not deleted yet: S3AccessDenied"))

	// The credentials fixed: the objects are deleted, then the resource goes.
	secret := &corev1.Secret{}
	g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s3-creds"}, secret)).To(Succeed())
	secret.Data["secretAccessKey"] = []byte(s3srv.SecretKey)
	g.Expect(apiClient.Update(ctx, secret)).To(Succeed())
	reconcile(deleted)
	g.Expect(objects("dropped")).To(BeEmpty())
	g.Expect(gone(deleted)).To(BeTrue())
	g.Expect(strings.Join(h.events(), "\n")).To(ContainSubstring("Normal ObjectsDeleted deletionPolicy Delete: deleted 3 objects under backups/t/" + ns + "/dropped/"))
	g.Expect(objects("kept")).To(HaveLen(3))
	g.Expect(objects("dropped-2")).To(HaveLen(3))

	// Switching a backup to Delete later holds it too; back to Retain lets it go.
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(neighbour), got)).To(Succeed())
	got.Spec.DeletionPolicy = redisv1alpha1.DeletionDelete
	g.Expect(apiClient.Update(ctx, got)).To(Succeed())
	reconcile(neighbour)
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(neighbour), got)).To(Succeed())
	g.Expect(got.Finalizers).To(ConsistOf(redisv1alpha1.BackupObjectsFinalizer))
	got.Spec.DeletionPolicy = redisv1alpha1.DeletionRetain
	g.Expect(apiClient.Update(ctx, got)).To(Succeed())
	reconcile(neighbour)
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(neighbour), got)).To(Succeed())
	g.Expect(got.Finalizers).To(BeEmpty())
	// A backup never cut has no objects: it goes at once, whatever its store says.
	pending := &redisv1alpha1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "never-cut"},
		Spec: redisv1alpha1.RedisClusterBackupSpec{ClusterName: "absent", DeletionPolicy: redisv1alpha1.DeletionDelete, S3: &redisv1alpha1.S3Destination{
			Endpoint: s3srv.Endpoint, Bucket: "backups", CredentialsSecret: redisv1alpha1.LocalName{Name: "absent"}}}}
	g.Expect(apiClient.Create(ctx, pending)).To(Succeed())
	reconcile(pending)
	g.Expect(apiClient.Delete(ctx, pending)).To(Succeed())
	g.Expect(gone(pending)).To(BeFalse(), "held by the finalizer")
	reconcile(pending)
	g.Expect(gone(pending)).To(BeTrue())
	// A PersistentVolumeClaim's backup whose claim is gone (a namespace being deleted takes
	// its claims first) goes with a Warning: holding it would hold the namespace for ever.
	orphan := &redisv1alpha1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claim-gone"},
		Spec: redisv1alpha1.RedisClusterBackupSpec{ClusterName: "absent", DeletionPolicy: redisv1alpha1.DeletionDelete,
			PVC: &redisv1alpha1.PVCDestination{ClaimName: "gone"}}}
	g.Expect(apiClient.Create(ctx, orphan)).To(Succeed())
	cut := metav1.NewMicroTime(time.Now())
	orphan.Status = redisv1alpha1.RedisClusterBackupStatus{Phase: redisv1alpha1.BackupSucceeded, CutStartedAt: &cut}
	g.Expect(apiClient.Status().Update(ctx, orphan)).To(Succeed())
	reconcile(orphan)
	g.Expect(apiClient.Delete(ctx, orphan)).To(Succeed())
	reconcile(orphan)
	g.Expect(gone(orphan)).To(BeTrue(), "held by a claim that no longer exists")
	g.Expect(strings.Join(h.events(), "\n")).To(ContainSubstring(`no PersistentVolumeClaim "gone"`))

	// The rest of the spec stays immutable.
	got.Spec.S3.Prefix = "elsewhere"
	err := apiClient.Update(ctx, got)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.clusterName, spec.s3 and spec.pvc are immutable"))
	// Nor can the destination move from the bucket to a claim.
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
	got.Spec.S3, got.Spec.PVC = nil, &redisv1alpha1.PVCDestination{ClaimName: "backups"}
	err = apiClient.Update(ctx, got)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.clusterName, spec.s3 and spec.pvc are immutable"))

	// Exactly one destination, for a backup and for a schedule.
	bucket := &redisv1alpha1.S3Destination{Endpoint: s3srv.Endpoint, Bucket: "backups", CredentialsSecret: redisv1alpha1.LocalName{Name: "absent"}}
	pvc := &redisv1alpha1.PVCDestination{ClaimName: "backups"}
	for i, d := range []struct {
		s3  *redisv1alpha1.S3Destination
		pvc *redisv1alpha1.PVCDestination
		ok  bool
	}{{nil, nil, false}, {bucket, pvc, false}, {nil, pvc, true}} {
		b := &redisv1alpha1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("dest-%d", i)},
			Spec: redisv1alpha1.RedisClusterBackupSpec{ClusterName: "absent", S3: d.s3, PVC: d.pvc}}
		sc := &redisv1alpha1.RedisClusterBackupSchedule{ObjectMeta: b.ObjectMeta,
			Spec: redisv1alpha1.RedisClusterBackupScheduleSpec{ClusterName: "absent", Every: metav1.Duration{Duration: time.Hour}, Keep: 1, S3: d.s3, PVC: d.pvc}}
		for _, obj := range []client.Object{b, sc} {
			err := apiClient.Create(ctx, obj)
			if d.ok {
				g.Expect(err).NotTo(HaveOccurred())
				continue
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("exactly one of spec.s3 and spec.pvc"))
		}
	}
	bad := &redisv1alpha1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dotdot"},
		Spec: redisv1alpha1.RedisClusterBackupSpec{ClusterName: "absent", PVC: &redisv1alpha1.PVCDestination{ClaimName: "backups", Prefix: "a/../.."}}}
	err = apiClient.Create(ctx, bad)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.pvc.prefix: a path inside the volume: no '..' element and no leading '/'"))
	// A leading '/' made every backup fail after its cut (the store refuses the name).
	bad.Name, bad.Spec.PVC.Prefix = "absolute", "/backups"
	err = apiClient.Create(ctx, bad)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.pvc.prefix: a path inside the volume"))
}

// TestRetentionNeverCountsAFailedBackup: the newest keep Succeeded backups are kept, older
// Succeeded ones pruned, a Failed one pruned only once a newer one succeeded, and a
// Pending or Running one never pruned.
func TestRetentionNeverCountsAFailedBackup(t *testing.T) {
	g := NewWithT(t)
	base := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	var backups []*redisv1alpha1.RedisClusterBackup
	for i, p := range []redisv1alpha1.BackupPhase{"Succeeded", "Failed", "Succeeded", "Succeeded", "Failed", "Failed", "Running"} {
		backups = append(backups, &redisv1alpha1.RedisClusterBackup{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("b", i), CreationTimestamp: metav1.NewTime(base.Add(time.Duration(i) * time.Minute))},
			Status:     redisv1alpha1.RedisClusterBackupStatus{Phase: p}})
	}
	names := func(bs []*redisv1alpha1.RedisClusterBackup) (out []string) {
		for _, b := range bs {
			out = append(out, b.Name)
		}
		return out
	}
	slices.Reverse(backups)
	newestFirst(backups)
	g.Expect(names(backups)).To(Equal([]string{"b6", "b5", "b4", "b3", "b2", "b1", "b0"}))
	prune, kept := retention(backups, 2)
	g.Expect(names(kept)).To(Equal([]string{"b3", "b2"}))
	g.Expect(names(prune)).To(Equal([]string{"b1", "b0"}), "b4 and b5 failed after the newest success: kept to be seen")
	prune, kept = retention(backups, 5)
	g.Expect(names(kept)).To(Equal([]string{"b3", "b2", "b0"}))
	g.Expect(names(prune)).To(Equal([]string{"b1"}))
	prune, kept = retention(backups[:3], 1)
	g.Expect(kept).To(BeEmpty())
	g.Expect(prune).To(BeEmpty(), "failures with no success after them are not pruned")
}

// TestStorePodNotReadySaysWhy: a store pod not ready within storeBindTimeout is starting;
// after it, the reason is its claim not Bound, else the pod itself, and the message names
// the field, the claim's phase and the container's waiting reason.
func TestStorePodNotReadySaysWhy(t *testing.T) {
	g := NewWithT(t)
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups"}}
	pod := storePodSpec("ns", "b-backup-store", "backups", "img", backup.StoreIdentity{Token: "t0ken"})
	pod.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Minute))
	g.Expect(storeNotReady(pod, pvc)).To(Equal(ReasonStoreStarting))
	pod.CreationTimestamp = metav1.NewTime(time.Now().Add(-3 * time.Minute))
	pod.Status.Phase = corev1.PodPending
	g.Expect(storeNotReady(pod, pvc)).To(Equal(ReasonPVCNotBound))
	g.Expect(storeNotReadyMessage(pod, pvc, "spec.pvc.claimName")).To(HavePrefix("spec.pvc.claimName: PersistentVolumeClaim backups is Pending; its store pod b-backup-store is not ready after 3m0s (Pending"))
	pvc.Status.Phase = corev1.ClaimBound
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}}}
	g.Expect(storeNotReady(pod, pvc)).To(Equal(ReasonStorePodNotReady))
	g.Expect(storeNotReadyMessage(pod, pvc, "spec.pvc.claimName")).To(ContainSubstring("ImagePullBackOff: no such image"))
	// restricted: non-root, no escalation, no capability, RuntimeDefault seccomp, no token.
	sc, psc := pod.Spec.Containers[0].SecurityContext, pod.Spec.SecurityContext
	g.Expect(*psc.RunAsNonRoot && *sc.RunAsNonRoot && !*sc.AllowPrivilegeEscalation && *sc.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(sc.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(psc.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	g.Expect(*pod.Spec.AutomountServiceAccountToken).To(BeFalse())
}

// TestFullVolumeFailsTheBackupNamingTheClaim: the store pod's 507 (ENOSPC on the volume),
// however wrapped by the upload, is VolumeFull naming spec.pvc.claimName; any other
// failure, or the same from S3, is UploadFailed.
func TestFullVolumeFailsTheBackupNamingTheClaim(t *testing.T) {
	g := NewWithT(t)
	full := errors.Join(fmt.Errorf("uploading the snapshot of 10.0.0.1:6379: %w", &backup.StoreError{Status: 507, Message: "no space left on the volume"}))
	pvc := destination{pvc: &redisv1alpha1.PVCDestination{ClaimName: "backups"}, field: "spec.pvc"}
	reason, msg := failureReason(pvc, full)
	g.Expect(reason).To(Equal(ReasonVolumeFull))
	g.Expect(msg).To(HavePrefix("spec.pvc.claimName: the volume of PersistentVolumeClaim backups is full"))
	reason, _ = failureReason(pvc, errors.New("connection reset"))
	g.Expect(reason).To(Equal(ReasonUploadFailed))
	reason, _ = failureReason(destination{s3: &redisv1alpha1.S3Destination{}, field: "spec.s3"}, full)
	g.Expect(reason).To(Equal(ReasonUploadFailed))
}
