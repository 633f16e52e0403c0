package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
	"github.com/hc-middleware/redis-cluster-operator/redis/rdb"
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

// objectsRetry is how soon deleting the objects of a deleted backup is tried again.
const objectsRetry = 30 * time.Second

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
	if want := b.Spec.DeletionPolicy == redisv1alpha1.DeletionDelete; want != controllerutil.ContainsFinalizer(b, redisv1alpha1.BackupObjectsFinalizer) {
		// Held by the finalizer only with deletionPolicy Delete, whatever its phase.
		base := b.DeepCopy()
		if want {
			controllerutil.AddFinalizer(b, redisv1alpha1.BackupObjectsFinalizer)
		} else {
			controllerutil.RemoveFinalizer(b, redisv1alpha1.BackupObjectsFinalizer)
		}
		if err := r.Client.Patch(ctx, b, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, err
		}
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
		return ctrl.Result{}, nil
	case redisv1alpha1.BackupRunning:
		r.fail(ctx, b, ReasonInterrupted, "the operator restarted while the snapshots were uploading; take another backup")
		return ctrl.Result{}, nil
	}
	plan, reason, msg, err := r.prepare(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	if reason != "" {
		return ctrl.Result{RequeueAfter: backupWaitRequeue}, r.wait(ctx, b, reason, msg)
	}
	cut, snaps, err := backup.Take(ctx, plan.dialer, plan.addrs, backup.Options{})
	if w, ok := backup.IsWait(err); ok {
		return ctrl.Result{RequeueAfter: backupWaitRequeue}, r.wait(ctx, b, w.Reason, w.Message)
	}
	if err != nil {
		return ctrl.Result{RequeueAfter: backupWaitRequeue}, r.wait(ctx, b, "CutFailed", err.Error())
	}
	log.FromContext(ctx).Info("Backup cut taken", "masters", len(snaps), "writePause", cut.Paused)
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
	r.Recorder.Eventf(b, corev1.EventTypeNormal, ReasonBackupStarted, "Cut %d masters with writes paused %v; uploading to %s/%s", len(snaps), cut.Paused.Round(10*time.Microsecond), plan.bucket, plan.dir)
	go r.upload(context.WithoutCancel(ctx), b.DeepCopy(), plan, cut, snaps)
	return ctrl.Result{}, nil
}

// finalize deletes the objects of a backup being deleted with deletionPolicy Delete (every
// object under PREFIX/NAMESPACE/NAME/, whatever its phase), then lets it go.
func (r *BackupReconciler) finalize(ctx context.Context, b *redisv1alpha1.RedisClusterBackup) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, redisv1alpha1.BackupObjectsFinalizer) {
		return ctrl.Result{}, nil
	}
	bucket, dir := b.Spec.S3.Bucket, backupDir(b)
	var deleted int
	var reason, msg string
	var err error
	if b.Status.CutStartedAt != nil {
		// Never cut, never uploaded: there is nothing to delete (and a store that cannot be
		// reached must not hold the resource).
		var s3 *backup.S3
		if s3, reason, msg, err = s3Store(ctx, r.APIReader, b.Namespace, b.Spec.S3, "spec.s3"); err == nil && reason == "" {
			deleted, err = deleteObjects(ctx, s3, bucket, dir+"/")
		}
	}
	if err != nil || reason != "" {
		if reason == "" {
			reason, msg = ReasonS3Error, err.Error()
		}
		r.Recorder.Eventf(b, corev1.EventTypeWarning, ReasonObjectsNotDeleted, "deletionPolicy Delete: the objects under %s/%s/ are not deleted yet: %s: %s; retried in %v (remove the finalizer %s to leave them)",
			bucket, dir, reason, msg, objectsRetry, redisv1alpha1.BackupObjectsFinalizer)
		return ctrl.Result{RequeueAfter: objectsRetry}, nil
	}
	base := b.DeepCopy()
	controllerutil.RemoveFinalizer(b, redisv1alpha1.BackupObjectsFinalizer)
	if err := r.Client.Patch(ctx, b, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Recorder.Eventf(b, corev1.EventTypeNormal, ReasonObjectsDeleted, "deletionPolicy Delete: deleted %d objects under %s/%s/", deleted, bucket, dir)
	return ctrl.Result{}, nil
}

// deleteObjects deletes every object of the bucket whose name begins with prefix.
func deleteObjects(ctx context.Context, s3 *backup.S3, bucket, prefix string) (int, error) {
	names, err := s3.List(ctx, bucket, prefix)
	if err != nil {
		return 0, err
	}
	for i, name := range names {
		if err := s3.Delete(ctx, bucket, name); err != nil {
			return i, err
		}
	}
	return len(names), nil
}

// backupDir is PREFIX/NAMESPACE/NAME, where a backup's objects go.
func backupDir(b *redisv1alpha1.RedisClusterBackup) string {
	return path.Join(b.Spec.S3.Prefix, b.Namespace, b.Name)
}

// backupPlan is what a backup needs, resolved from its spec.
type backupPlan struct {
	dialer backup.Dialer
	addrs  []string
	s3     *backup.S3
	bucket string
	// dir is PREFIX/NAMESPACE/NAME, where the objects go.
	dir string
}

// prepare resolves the cluster, its nodes and credentials, and the store; a reason not
// empty says why the backup must wait.
func (r *BackupReconciler) prepare(ctx context.Context, b *redisv1alpha1.RedisClusterBackup) (*backupPlan, string, string, error) {
	rc := &redisv1alpha1.RedisCluster{}
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.ClusterName}
	if err := r.Client.Get(ctx, key, rc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, ReasonClusterNotFound, fmt.Sprintf("no RedisCluster %q in namespace %s", key.Name, key.Namespace), nil
		}
		return nil, "", "", err
	}
	if rc.Status.Phase != redisv1alpha1.PhaseRunning {
		return nil, ReasonClusterNotRunning, fmt.Sprintf("RedisCluster %s is %s; a backup waits for Running", rc.Name, rc.Status.Phase), nil
	}
	creds, ok := r.redis.credsOf(key)
	if !ok {
		return nil, ReasonClusterNotRunning, fmt.Sprintf("RedisCluster %s has not been reconciled by this operator process yet", rc.Name), nil
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(rc.Namespace), client.MatchingLabels(redisv1alpha1.SelectorLabels(rc.Name))); err != nil {
		return nil, "", "", err
	}
	var addrs []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			addrs = append(addrs, net.JoinHostPort(p.Status.PodIP, "6379"))
		}
	}
	if len(addrs) < int(rc.Spec.Replicas) {
		return nil, ReasonClusterNotRunning, fmt.Sprintf("%d of %d pods have an address", len(addrs), rc.Spec.Replicas), nil
	}
	d := b.Spec.S3
	s3, reason, msg, err := s3Store(ctx, r.APIReader, b.Namespace, d, "spec.s3")
	if err != nil || reason != "" {
		return nil, reason, msg, err
	}
	passwords := []string{creds.password}
	if creds.previous != "" {
		passwords = append(passwords, creds.previous)
	}
	return &backupPlan{
		dialer: backup.Dialer{User: creds.user, Passwords: passwords, TLS: creds.tlsConfig},
		addrs:  addrs, s3: s3, bucket: d.Bucket,
		dir: backupDir(b),
	}, "", "", nil
}

// s3Store is the client of the store d names, its credentials (and CA) read from
// Secrets of namespace ns, checked with HEAD on the bucket; a reason not empty
// (ReasonSecretMissing, ReasonS3AccessDenied, ReasonS3Error) says why it cannot be used. field prefixes the
// names of the fields a message cites ("spec.s3").
func s3Store(ctx context.Context, reader client.Reader, ns string, d redisv1alpha1.S3Destination, field string) (*backup.S3, string, string, error) {
	access, missing, err := readSecretKey(ctx, reader, ns, d.CredentialsSecret.Name, redisv1alpha1.S3AccessKeyIDKey, field+".credentialsSecret")
	if err != nil || missing != "" {
		return nil, ReasonSecretMissing, missing, err
	}
	secret, missing, err := readSecretKey(ctx, reader, ns, d.CredentialsSecret.Name, redisv1alpha1.S3SecretAccessKeyKey, field+".credentialsSecret")
	if err != nil || missing != "" {
		return nil, ReasonSecretMissing, missing, err
	}
	s3 := &backup.S3{Endpoint: d.Endpoint, Region: d.Region, AccessKey: access, SecretKey: secret}
	if d.CASecret != nil {
		ca, missing, err := readSecretKey(ctx, reader, ns, d.CASecret.Name, d.CASecret.Key, field+".caSecret")
		if err != nil || missing != "" {
			return nil, ReasonSecretMissing, missing, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(ca)) {
			return nil, ReasonSecretMissing, field + ".caSecret: no PEM certificate in the key", nil
		}
		s3.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s3.HeadBucket(hctx, d.Bucket); err != nil {
		reason := ReasonS3Error
		if permanentRestoreFailure(err) == ReasonS3AccessDenied {
			reason = ReasonS3AccessDenied
		}
		return nil, reason, fmt.Sprintf("bucket %s at %s: %v", d.Bucket, d.Endpoint, err), nil
	}
	return s3, "", "", nil
}

// manifest is PREFIX/NAMESPACE/NAME/manifest.json, written last: its presence is what
// makes the objects a backup.
type manifest struct {
	Cluster      string                      `json:"cluster"`
	Namespace    string                      `json:"namespace"`
	Backup       string                      `json:"backup"`
	CutStartedAt time.Time                   `json:"cutStartedAt"`
	CutEndedAt   time.Time                   `json:"cutEndedAt"`
	RDBVersion   int                         `json:"rdbVersion"`
	RedisVersion string                      `json:"redisVersion"`
	Shards       []redisv1alpha1.BackupShard `json:"shards"`
}

// upload streams every snapshot to the store in parallel, reading each through the RDB
// parser on the way (counting keys and checking the RDB's own checksum), then writes the
// manifest and marks the backup Succeeded; any failure marks it Failed and deletes the
// objects it wrote.
func (r *BackupReconciler) upload(ctx context.Context, b *redisv1alpha1.RedisClusterBackup, plan *backupPlan, cut *backup.Cut, snaps []*backup.Snapshot) {
	defer r.running.Delete(b.UID)
	var bytes, keys atomic.Int64
	var done atomic.Int32
	shards := make([]redisv1alpha1.BackupShard, len(snaps))
	versions := make([]int, len(snaps))
	redisVersions := make([]string, len(snaps))
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = r.updateStatus(ctx, b, func(st *redisv1alpha1.RedisClusterBackupStatus) {
					st.Progress.Bytes, st.Progress.Keys, st.Progress.ShardsDone = bytes.Load(), keys.Load(), done.Load()
					st.Progress.Summary = progressSummary(st.Progress)
				})
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, len(snaps))
	for i, s := range snaps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			obj := path.Join(plan.dir, fmt.Sprintf("shard-%d.rdb", i))
			if err := s.Open(2 * time.Minute); err != nil {
				errs[i] = err
				return
			}
			pr, pw := io.Pipe()
			var n int64
			var hdr *rdb.Header
			scanned := make(chan error, 1)
			go func() {
				h, err := rdb.Scan(pr, func(*rdb.Entry) error { n++; keys.Add(1); return nil })
				hdr = h
				_, _ = io.Copy(io.Discard, pr)
				scanned <- err
			}()
			up, err := plan.s3.Put(ctx, plan.bucket, obj, io.TeeReader(s, pw), func(n int64) { bytes.Add(n) })
			pw.Close()
			serr := <-scanned
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("uploading the snapshot of %s: %w", s.Shard.Addr, err)
				return
			case serr != nil:
				errs[i] = fmt.Errorf("the snapshot of %s does not read as an RDB file: %w", s.Shard.Addr, serr)
				return
			case up.Size != s.Size:
				errs[i] = fmt.Errorf("the snapshot of %s has %d bytes, the master announced %d", s.Shard.Addr, up.Size, s.Size)
				return
			}
			versions[i], redisVersions[i] = hdr.Version, hdr.Aux["redis-ver"]
			if redisVersions[i] == "" {
				redisVersions[i] = hdr.Server() // Valkey 8 and later write only valkey-ver
			}
			shards[i] = redisv1alpha1.BackupShard{NodeID: s.Shard.NodeID, Slots: s.Shard.Slots.String(),
				ReplicationOffset: s.Shard.Offset, Object: obj, Size: up.Size, SHA256: up.SHA256, Keys: n}
			done.Add(1)
		}()
	}
	wg.Wait()
	close(stop)
	err := errors.Join(errs...)
	if err == nil {
		m := manifest{Cluster: b.Spec.ClusterName, Namespace: b.Namespace, Backup: b.Name, CutStartedAt: cut.PauseBegan,
			CutEndedAt: cut.PauseEnded, RDBVersion: versions[0], RedisVersion: redisVersions[0], Shards: shards}
		raw, _ := json.MarshalIndent(m, "", "  ")
		err = plan.s3.PutSmall(ctx, plan.bucket, path.Join(plan.dir, "manifest.json"), raw)
	}
	if err != nil {
		for i := range snaps {
			_ = plan.s3.Delete(ctx, plan.bucket, path.Join(plan.dir, fmt.Sprintf("shard-%d.rdb", i)))
		}
		r.fail(ctx, b, ReasonUploadFailed, err.Error())
		return
	}
	now := metav1.Now()
	uerr := r.updateStatus(ctx, b, func(st *redisv1alpha1.RedisClusterBackupStatus) {
		st.Phase, st.Reason, st.Message = redisv1alpha1.BackupSucceeded, ReasonBackupSucceeded, ""
		st.Shards, st.CompletedAt = shards, &now
		st.RDBVersion, st.RedisVersion = int32(versions[0]), redisVersions[0]
		st.Progress = redisv1alpha1.BackupProgress{Shards: int32(len(snaps)), ShardsDone: done.Load(), Bytes: bytes.Load(), Keys: keys.Load()}
		st.Progress.Summary = progressSummary(st.Progress)
	})
	if uerr != nil {
		log.FromContext(ctx).Error(uerr, "Failed to record a successful backup", "backup", b.Name)
		return
	}
	countBackupEnded(b, "succeeded")
	b.Status.Phase, b.Status.CompletedAt, b.Status.Shards = redisv1alpha1.BackupSucceeded, &now, shards
	b.Status.CutStartedAt = &metav1.MicroTime{Time: cut.PauseBegan}
	observeBackupSucceeded(b)
	r.Recorder.Eventf(b, corev1.EventTypeNormal, ReasonBackupSucceeded, "%d keys, %d bytes in %d objects", keys.Load(), bytes.Load(), len(snaps))
}

func progressSummary(p redisv1alpha1.BackupProgress) string {
	return fmt.Sprintf("%d/%d shards, %.1f MiB", p.ShardsDone, p.Shards, float64(p.Bytes)/(1<<20))
}

// wait records why the backup waits (Pending), with one Warning event per new reason.
func (r *BackupReconciler) wait(ctx context.Context, b *redisv1alpha1.RedisClusterBackup, reason, msg string) error {
	if b.Status.Phase == redisv1alpha1.BackupPending && b.Status.Reason == reason && b.Status.Message == msg {
		return nil
	}
	if b.Status.Reason != reason {
		r.Recorder.Eventf(b, corev1.EventTypeWarning, ReasonBackupWaiting, "%s: %s", reason, msg)
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
