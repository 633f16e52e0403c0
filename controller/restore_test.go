package controller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// shardOf writes keys into one redis-server owning every slot and returns its RDB file
// (SAVE): one shard of a backup, as a cut would have it.
func shardOf(t *testing.T, keys int) []byte {
	t.Helper()
	ctx := context.Background()
	srv := redistest.Start(t, 1, redistest.Config{})[0]
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer c.Close()
	if err := c.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if time.Now().After(deadline) {
			t.Fatal("one-node cluster not ok")
		}
		time.Sleep(50 * time.Millisecond)
	}
	p := c.Pipeline()
	for i := 0; i < keys; i++ {
		if i%10 == 0 {
			p.Set(ctx, fmt.Sprint("k:", i), fmt.Sprint("v", i), time.Hour)
		} else {
			p.Set(ctx, fmt.Sprint("k:", i), fmt.Sprint("v", i), 0)
		}
	}
	p.HSet(ctx, "hash", "f", "v")
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(srv.Dir, "dump.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestRestoreFromBeforeRunning creates a cluster with spec.restoreFrom naming a backup
// that does not exist yet (it waits, Creating, with a Warning), then the backup: a shard
// of one master in a real S3 server, restored into 3 masters. The cluster reaches Running
// only once status.restore says every key is in, and gets its client Service only then.
// An operator restart after the keys were written but before that was recorded restores
// again over them (REPLACE), not refused as a cluster holding keys.
func TestRestoreFromBeforeRunning(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const keys = 5000

	rc := newCluster(ns, 6)
	rc.Spec.RestoreFrom = &redisv1alpha1.RestoreSource{Backup: "nightly"}
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	key := client.ObjectKeyFromObject(rc)
	servers := redistest.Start(t, 6, redistest.Config{})
	startPods(t, rc, servers)

	// Formed, but the backup is missing: Creating, a Warning, no client Service.
	var got *redisv1alpha1.RedisCluster
	for i := 0; i < 40; i++ {
		h.reconcile(rc)
		got = get(t, rc)
		if got.Status.Restore != nil && got.Status.Restore.Reason == ReasonBackupNotFound {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseCreating), got.Status.Reason)
	g.Expect(got.Status.Restore).NotTo(BeNil())
	g.Expect(got.Status.Restore.Reason).To(Equal(ReasonBackupNotFound), got.Status.Reason)
	g.Expect(got.Status.Reason).To(ContainSubstring("AwaitingRestored"))
	g.Expect(got.Status.Reason).To(ContainSubstring(`no RedisClusterBackup "nightly"`))
	g.Expect(got.Status.Restore.StartedAt).To(BeNil())
	g.Expect(strings.Join(h.events(), "\n")).To(ContainSubstring("Warning RestoreWaiting Cannot restore backup nightly: BackupNotFound"))
	err := apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-client"}, &corev1.Service{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the client Service is withheld until Running: %v", err)
	// Within the backoff a reconcile neither asks again nor says it again.
	h.reconcile(rc)
	g.Expect(h.events()).To(BeEmpty())

	// The backup: its credentials, its object in a real S3 server, its status Succeeded.
	s3srv := redistest.StartS3(t, "127.0.0.1")
	s3 := &backup.S3{Endpoint: s3srv.Endpoint, AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey}
	g.Expect(s3.CreateBucket(ctx, "backups")).To(Succeed())
	rdbFile := shardOf(t, keys)
	up, err := s3.Put(ctx, "backups", "t/nightly/shard-0.rdb", bytes.NewReader(rdbFile), nil)
	g.Expect(err).NotTo(HaveOccurred())
	sum := sha256.Sum256(rdbFile)
	g.Expect(up.SHA256).To(Equal(hex.EncodeToString(sum[:])))
	g.Expect(apiClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3-creds"},
		StringData: map[string]string{"accessKeyID": s3srv.AccessKey, "secretAccessKey": s3srv.SecretKey}})).To(Succeed())
	b := &redisv1alpha1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: redisv1alpha1.RedisClusterBackupSpec{ClusterName: "source", S3: &redisv1alpha1.S3Destination{
			Endpoint: s3srv.Endpoint, Bucket: "backups", Prefix: "t", CredentialsSecret: redisv1alpha1.LocalName{Name: "s3-creds"}}}}
	g.Expect(apiClient.Create(ctx, b)).To(Succeed())
	cut := metav1.NewMicroTime(time.Now())
	b.Status = redisv1alpha1.RedisClusterBackupStatus{Phase: redisv1alpha1.BackupSucceeded, CutStartedAt: &cut, CutEndedAt: &cut,
		Shards: []redisv1alpha1.BackupShard{{NodeID: "n0", Slots: "0-16383", Object: "t/nightly/shard-0.rdb", Size: up.Size, SHA256: up.SHA256, Keys: keys + 1}}}
	g.Expect(apiClient.Status().Update(ctx, b)).To(Succeed())
	h.r.forgetRestore(key) // as an operator restart would: no backoff left

	// A node holding a key refuses the restore: nothing is written, a Warning names it.
	var owner *goredis.Client
	var pod string
	for i, srv := range servers {
		c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		if role, _ := c.Do(ctx, "role").Slice(); owner == nil && len(role) > 0 && role[0] == "master" {
			owner, pod = c, fmt.Sprint("demo-", i)
			defer c.Close()
			continue
		}
		c.Close()
	}
	g.Expect(owner).NotTo(BeNil())
	var stray string
	for i := 0; stray == "" && i < 100000; i++ {
		k := fmt.Sprint("stray:", i)
		slot, _ := owner.ClusterKeySlot(ctx, k).Result()
		if n, _ := owner.ClusterCountKeysInSlot(ctx, int(slot)).Result(); n == 0 && owner.Set(ctx, k, "x", 0).Err() == nil {
			stray = k
		}
	}
	h.reconcile(rc)
	got = get(t, rc)
	g.Expect(got.Status.Restore.Reason).To(Equal(ReasonClusterNotEmpty), got.Status.Reason)
	g.Expect(got.Status.Restore.StartedAt).To(BeNil())
	g.Expect(got.Status.Reason).To(ContainSubstring(pod + " holds 1 keys"))
	g.Expect(strings.Join(h.events(), "\n")).To(ContainSubstring("Warning RestoreWaiting Cannot restore backup nightly: ClusterNotEmpty"))
	g.Expect(owner.Del(ctx, stray).Err()).To(Succeed())
	h.r.forgetRestore(key)

	// Until the first attempt's keys are all written; then the operator "restarts"
	// before recording it. The attempt's end wakes the cluster's reconcile.
	h.r.wakeups = make(wakeups, 1)
	for i := 0; i < 40; i++ {
		h.reconcile(rc)
		got = get(t, rc)
		g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseCreating))
		if st := got.Status.Restore; st != nil && st.Attempts == 1 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.Expect(got.Status.Restore.Attempts).To(BeEquivalentTo(1), got.Status.Reason)
	g.Expect(got.Status.Restore.StartedAt).NotTo(BeNil())
	state := h.r.memoryOf(key).restore
	g.Expect(state).NotTo(BeNil())
	run := state.run
	select {
	case <-run.done:
	case <-time.After(time.Minute):
		t.Fatal("the restore did not finish")
	}
	g.Expect(run.err).NotTo(HaveOccurred())
	select {
	case ev := <-h.r.wakeups:
		g.Expect(client.ObjectKeyFromObject(ev.Object)).To(Equal(key))
	case <-time.After(10 * time.Second):
		t.Fatal("the restore's end woke no reconcile of its cluster")
	}
	h.r.forgetRestore(key)

	// Restarted: the cluster holds the keys of the attempt cut short; the next attempt
	// writes over them. Running only once completedAt is recorded.
	for i := 0; i < 60; i++ {
		h.reconcile(rc)
		got = get(t, rc)
		st := got.Status.Restore
		if got.Status.Phase == redisv1alpha1.PhaseRunning {
			g.Expect(st.CompletedAt).NotTo(BeNil(), "Running before the restore was recorded complete")
			break
		}
		g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseCreating), got.Status.Reason)
		err := apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-client"}, &corev1.Service{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "client Service while restoring")
		time.Sleep(100 * time.Millisecond)
	}
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning), got.Status.Reason)
	st := got.Status.Restore
	g.Expect(st.Attempts).To(BeEquivalentTo(2))
	g.Expect(st.Keys).To(BeEquivalentTo(keys + 1))
	g.Expect(st.Reason).To(Equal(ReasonRestoreSucceeded))
	g.Expect(st.StartedAt.Time).NotTo(BeZero())
	g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-client"}, &corev1.Service{})).To(Succeed())
	events := strings.Join(h.events(), "\n")
	g.Expect(events).To(ContainSubstring("Normal RestoreStarted Restoring backup nightly (1 shards, 5001 keys"))
	g.Expect(events).To(ContainSubstring("attempt 2"))
	g.Expect(events).To(ContainSubstring("Normal RestoreSucceeded Restored backup nightly: 5001 keys"))
	g.Expect(events).NotTo(ContainSubstring("ClusterNotEmpty"))

	// Every key is in, on the master owning its slot, with its TTL.
	var total int64
	for _, srv := range servers {
		c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		if role, _ := c.Do(ctx, "role").Slice(); len(role) > 0 && role[0] == "master" {
			n, err := c.DBSize(ctx).Result()
			g.Expect(err).NotTo(HaveOccurred())
			total += n
			for _, k := range []string{"k:0", "k:1", "k:10", "k:4999", "hash"} {
				slot, _ := c.ClusterKeySlot(ctx, k).Result()
				if cnt, _ := c.ClusterCountKeysInSlot(ctx, int(slot)).Result(); cnt == 0 {
					continue
				}
				switch k {
				case "k:0", "k:10":
					g.Expect(c.TTL(ctx, k).Val()).To(BeNumerically(">", 59*time.Minute), k)
				case "k:1", "k:4999":
					g.Expect(c.Get(ctx, k).Val()).To(Equal("v" + strings.TrimPrefix(k, "k:")))
					g.Expect(c.TTL(ctx, k).Val()).To(BeNumerically("<", 0), k)
				}
			}
		}
		c.Close()
	}
	g.Expect(total).To(BeEquivalentTo(keys + 1))
}

// formedToRestore creates a 6-pod cluster "demo" in ns restoring the backup "nightly",
// backed by real redis-servers, and reconciles it until its status.restore satisfies done
// (at most 8 s).
func formedToRestore(t *testing.T, h *harness, ns string, done func(*redisv1alpha1.RestoreStatus) bool) (*redisv1alpha1.RedisCluster, *redisv1alpha1.RedisCluster) {
	t.Helper()
	rc := newCluster(ns, 6)
	rc.Spec.RestoreFrom = &redisv1alpha1.RestoreSource{Backup: "nightly"}
	if err := apiClient.Create(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	startPods(t, rc, redistest.Start(t, 6, redistest.Config{}))
	var got *redisv1alpha1.RedisCluster
	for i := 0; i < 80; i++ {
		h.reconcile(rc)
		if got = get(t, rc); got.Status.Restore != nil && done(got.Status.Restore) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return rc, got
}

// TestRunningRestoreWritesItsProgressEvery5s: while a restore runs, its counters change
// with every key; a status written at each reconcile would queue the next reconcile at
// once (its own watch event), a loop for as long as the restore runs. The progress is
// written at most every 5 s, and the end at once.
func TestRunningRestoreWritesItsProgressEvery5s(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ns := newNamespace(t)
	rc, got := formedToRestore(t, h, ns, func(st *redisv1alpha1.RestoreStatus) bool { return st.Reason == ReasonBackupNotFound })
	g.Expect(got.Status.Restore).NotTo(BeNil(), got.Status.Reason)

	// A restore under way (its goroutine stood in for: the test moves its counters).
	key := client.ObjectKeyFromObject(rc)
	run := &restoreRun{cancel: func() {}, started: time.Now(), done: make(chan struct{})}
	h.r.memoryOf(key).restore = &restoreState{uid: got.UID, backup: "nightly", run: run}
	now := time.Now()
	h.r.now = func() time.Time { return now }
	statusWrites := func() (n int) {
		for _, w := range h.writes() {
			if strings.HasPrefix(w, "patch/status") {
				n++
			}
		}
		return n
	}
	run.progress.Keys.Store(100)
	h.reconcile(rc)
	g.Expect(get(t, rc).Status.Restore.Keys).To(BeEquivalentTo(100))
	statusWrites()
	for i := 0; i < 12; i++ {
		run.progress.Keys.Add(1000)
		now = now.Add(400 * time.Millisecond)
		res := h.reconcile(rc)
		g.Expect(res.RequeueAfter).To(Equal(time.Second))
		g.Expect(statusWrites()).To(BeZero(), "reconcile %d, %v after the last progress written, wrote the status", i, time.Duration(i+1)*400*time.Millisecond)
	}
	now = now.Add(400 * time.Millisecond) // 5.2 s after the last write
	h.reconcile(rc)
	g.Expect(statusWrites()).To(Equal(1))
	g.Expect(get(t, rc).Status.Restore.Keys).To(BeEquivalentTo(12100))

	// The end is written at once.
	run.progress.Keys.Add(5)
	run.finished = now
	close(run.done)
	now = now.Add(100 * time.Millisecond)
	h.reconcile(rc)
	st := get(t, rc).Status.Restore
	g.Expect(st.CompletedAt).NotTo(BeNil())
	g.Expect(st.Keys).To(BeEquivalentTo(12105))
}

// TestRestoreFailsForGoodOnADeterministicCause: a restore whose backup object does not
// have the checksum the backup recorded, or whose store refuses the credentials, fails
// for good: status.restore.failedAt and the cause as reason, one Warning, no further
// attempt, and the cluster turns Failed (without its client Service) instead of being
// retried every 2 minutes forever.
func TestRestoreFailsForGoodOnADeterministicCause(t *testing.T) {
	ctx := context.Background()
	s3srv := redistest.StartS3(t, "127.0.0.1")
	s3 := &backup.S3{Endpoint: s3srv.Endpoint, AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey}
	if err := s3.CreateBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	rdbFile := shardOf(t, 100)
	up, err := s3.Put(ctx, "backups", "t/nightly/shard-0.rdb", bytes.NewReader(rdbFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, secretKey, sha256, reason string
		attempts                        int32
	}{
		{"checksum", s3srv.SecretKey, strings.Repeat("0", 64), ReasonChecksumMismatch, 1},
		{"credentials", "wrong", up.SHA256, ReasonS3AccessDenied, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t)
			ns := newNamespace(t)
			g.Expect(apiClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3-creds"},
				StringData: map[string]string{"accessKeyID": s3srv.AccessKey, "secretAccessKey": c.secretKey}})).To(Succeed())
			b := &redisv1alpha1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
				Spec: redisv1alpha1.RedisClusterBackupSpec{ClusterName: "source", S3: &redisv1alpha1.S3Destination{
					Endpoint: s3srv.Endpoint, Bucket: "backups", Prefix: "t", CredentialsSecret: redisv1alpha1.LocalName{Name: "s3-creds"}}}}
			g.Expect(apiClient.Create(ctx, b)).To(Succeed())
			b.Status = redisv1alpha1.RedisClusterBackupStatus{Phase: redisv1alpha1.BackupSucceeded,
				Shards: []redisv1alpha1.BackupShard{{NodeID: "n0", Slots: "0-16383", Object: "t/nightly/shard-0.rdb", Size: up.Size, SHA256: c.sha256, Keys: 101}}}
			g.Expect(apiClient.Status().Update(ctx, b)).To(Succeed())

			rc, got := formedToRestore(t, h, ns, func(st *redisv1alpha1.RestoreStatus) bool { return st.FailedAt != nil })
			st := got.Status.Restore
			g.Expect(st).NotTo(BeNil(), got.Status.Reason)
			g.Expect(st.FailedAt).NotTo(BeNil(), "not failed for good: %+v", st)
			g.Expect(st.Reason).To(Equal(c.reason), st.Message)
			g.Expect(st.Attempts).To(Equal(c.attempts))
			events := strings.Join(h.events(), "\n")
			g.Expect(events).To(ContainSubstring("Warning RestoreFailedPermanently Restoring backup nightly failed for good: " + c.reason))
			g.Expect(events).NotTo(ContainSubstring("RestoreFailed "))

			// Never tried again; the cluster turns Failed and gets no client Service.
			for i := 0; i < 5; i++ {
				h.reconcile(rc)
			}
			got = get(t, rc)
			g.Expect(got.Status.Restore.Attempts).To(Equal(c.attempts))
			g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseFailed), got.Status.Reason)
			g.Expect(got.Status.Reason).To(ContainSubstring("failed for good: " + c.reason))
			g.Expect(strings.Join(h.events(), "\n")).NotTo(ContainSubstring("RestoreStarted"))
			err := apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-client"}, &corev1.Service{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "client Service of a cluster whose restore failed: %v", err)
		})
	}
}

// TestPermanentRestoreFailure tells the failures no retry cures from the others.
func TestPermanentRestoreFailure(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("reading t/x/shard-0.rdb: %w", &backup.S3Error{Status: 403, Code: "AccessDenied"}), ReasonS3AccessDenied},
		{&backup.S3Error{Status: 401}, ReasonS3AccessDenied},
		{fmt.Errorf("reading t/x/shard-1.rdb: %w", &backup.S3Error{Status: 404, Code: "NoSuchKey"}), ReasonBackupObjectMissing},
		{fmt.Errorf("RDB cut short: %w", fmt.Errorf("%w: object checksum 1, the backup recorded 2", backup.ErrChecksum)), ReasonChecksumMismatch},
		{fmt.Errorf("%w: RDB version 12 is newer than this reader knows (11)", backup.ErrIncompatible), ReasonIncompatibleBackup},
		{&backup.S3Error{Status: 503, Code: "SlowDown"}, ""},
		{fmt.Errorf("RESTORE on 10.0.0.1:6379: %w", errors.New("dial tcp: connection refused")), ""},
		{fmt.Errorf("RESTORE \"k\" on 10.0.0.1:6379: %w", errors.New("OOM command not allowed when used memory > 'maxmemory'")), ""},
	} {
		if got := permanentRestoreFailure(c.err); got != c.want {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
	}
}
