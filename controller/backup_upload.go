package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
	"github.com/hc-middleware/redis-cluster-operator/redis/rdb"
)

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

// uploadCounters are an upload's running totals, which its progress reports read, and
// when the slowest shard's first byte came, its last, and when its object was complete in
// the store (nanoseconds since the cut's
// end), for the log line of a backup's end.
type uploadCounters struct {
	bytes, keys         atomic.Int64
	done                atomic.Int32
	firstByte, lastByte atomic.Int64
	uploaded            atomic.Int64
	since               time.Time
}

// mark raises *latest to the time since the cut's end, if later.
func (c *uploadCounters) mark(latest *atomic.Int64) {
	d := int64(time.Since(c.since))
	for {
		old := latest.Load()
		if d <= old || latest.CompareAndSwap(old, d) {
			return
		}
	}
}

// upload streams every snapshot to the store in parallel, reading each through the RDB
// parser on the way (counting keys and checking the RDB's own CRC64 at its end, so a
// snapshot cut short or corrupted fails the backup; a diskless snapshot's length is known
// only at its end mark), then writes the manifest and marks the backup Succeeded; any
// failure marks it Failed and deletes the objects it wrote.
func (r *BackupReconciler) upload(ctx context.Context, b *redisv1alpha1.RedisClusterBackup, plan *backupPlan, cut *backup.Cut, snaps []*backup.Snapshot) {
	defer r.running.Delete(b.UID)
	c := uploadCounters{since: cut.PauseEnded}
	stop := make(chan struct{})
	go r.reportUpload(ctx, b, &c, stop)
	shards, versions, redisVersions, err := uploadShards(ctx, plan, snaps, &c)
	close(stop)
	if err == nil {
		m := manifest{Cluster: b.Spec.ClusterName, Namespace: b.Namespace, Backup: b.Name, CutStartedAt: cut.PauseBegan,
			CutEndedAt: cut.PauseEnded, RDBVersion: versions[0], RedisVersion: redisVersions[0], Shards: shards}
		raw, _ := json.MarshalIndent(m, "", "  ")
		err = plan.store.PutSmall(ctx, path.Join(plan.dir, "manifest.json"), raw)
	}
	if err != nil {
		for i := range snaps {
			_ = plan.store.Delete(ctx, path.Join(plan.dir, fmt.Sprintf("shard-%d.rdb", i)))
		}
		r.releaseBackupStore(ctx, b)
		reason, msg := failureReason(plan.dest, err)
		r.fail(ctx, b, reason, msg)
		return
	}
	written := time.Since(cut.PauseEnded)
	r.releaseBackupStore(ctx, b)
	now := metav1.Now()
	uerr := r.updateStatus(ctx, b, func(st *redisv1alpha1.RedisClusterBackupStatus) {
		st.Phase, st.Reason, st.Message = redisv1alpha1.BackupSucceeded, ReasonBackupSucceeded, ""
		st.Shards, st.CompletedAt = shards, &now
		st.RDBVersion, st.RedisVersion = int32(versions[0]), redisVersions[0]
		st.Progress = redisv1alpha1.BackupProgress{Shards: int32(len(snaps)), ShardsDone: c.done.Load(), Bytes: c.bytes.Load(), Keys: c.keys.Load()}
		st.Progress.Summary = progressSummary(st.Progress)
	})
	if uerr != nil {
		log.FromContext(ctx).Error(uerr, "Failed to record a successful backup", "backup", b.Name)
		return
	}
	log.FromContext(ctx).Info("Backup succeeded", "backup", b.Name, "keys", c.keys.Load(), "bytes", c.bytes.Load(),
		"writePause", cut.Paused, "sinceCut", map[string]time.Duration{"slowestFirstByte": time.Duration(c.firstByte.Load()),
			"slowestLastByte": time.Duration(c.lastByte.Load()),
			"slowestUploaded": time.Duration(c.uploaded.Load()), "manifestWritten": written, "statusWritten": time.Since(cut.PauseEnded)})
	countBackupEnded(b, "succeeded")
	b.Status.Phase, b.Status.CompletedAt, b.Status.Shards = redisv1alpha1.BackupSucceeded, &now, shards
	b.Status.CutStartedAt = &metav1.MicroTime{Time: cut.PauseBegan}
	observeBackupSucceeded(b)
	r.Recorder.Eventf(b, corev1.EventTypeNormal, ReasonBackupSucceeded, "%d keys, %d bytes in %d objects", c.keys.Load(), c.bytes.Load(), len(snaps))
}

// reportUpload writes the upload's progress to the status every 2 s until stop is closed.
func (r *BackupReconciler) reportUpload(ctx context.Context, b *redisv1alpha1.RedisClusterBackup, c *uploadCounters, stop <-chan struct{}) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			_ = r.updateStatus(ctx, b, func(st *redisv1alpha1.RedisClusterBackupStatus) {
				st.Progress.Bytes, st.Progress.Keys, st.Progress.ShardsDone = c.bytes.Load(), c.keys.Load(), c.done.Load()
				st.Progress.Summary = progressSummary(st.Progress)
			})
		}
	}
}

// uploadShards uploads every snapshot at once (uploadShard) and returns, by shard, its
// manifest entry and the RDB and Redis versions its header names; the error joins every
// shard's.
func uploadShards(ctx context.Context, plan *backupPlan, snaps []*backup.Snapshot, c *uploadCounters) ([]redisv1alpha1.BackupShard, []int, []string, error) {
	shards := make([]redisv1alpha1.BackupShard, len(snaps))
	versions := make([]int, len(snaps))
	redisVersions := make([]string, len(snaps))
	var wg sync.WaitGroup
	errs := make([]error, len(snaps))
	for i, s := range snaps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shard, hdr, err := uploadShard(ctx, plan, i, s, c)
			if err != nil {
				errs[i] = err
				return
			}
			versions[i], redisVersions[i] = hdr.Version, hdr.Aux["redis-ver"]
			if redisVersions[i] == "" {
				redisVersions[i] = hdr.Server() // Valkey 8 and later write only valkey-ver
			}
			shards[i] = shard
			c.done.Add(1)
		}()
	}
	wg.Wait()
	return shards, versions, redisVersions, errors.Join(errs...)
}

// uploadShard streams snapshot i to PREFIX/NAMESPACE/NAME/shard-i.rdb, through the RDB
// parser on the way, and closes it.
func uploadShard(ctx context.Context, plan *backupPlan, i int, s *backup.Snapshot, c *uploadCounters) (redisv1alpha1.BackupShard, *rdb.Header, error) {
	defer s.Close()
	obj := path.Join(plan.dir, fmt.Sprintf("shard-%d.rdb", i))
	if err := s.Open(2 * time.Minute); err != nil {
		return redisv1alpha1.BackupShard{}, nil, err
	}
	c.mark(&c.firstByte)
	pr, pw := io.Pipe()
	var n int64
	var hdr *rdb.Header
	scanned := make(chan error, 1)
	go func() {
		h, err := rdb.Scan(pr, func(*rdb.Entry) error { n++; c.keys.Add(1); return nil })
		hdr = h
		_, _ = io.Copy(io.Discard, pr)
		scanned <- err
	}()
	up, err := plan.store.Put(ctx, obj, io.TeeReader(&untilEOF{r: s, eof: func() { c.mark(&c.lastByte) }}, pw), func(n int64) { c.bytes.Add(n) })
	c.mark(&c.uploaded)
	pw.Close()
	serr := <-scanned
	switch {
	case err != nil:
		return redisv1alpha1.BackupShard{}, nil, fmt.Errorf("uploading the snapshot of %s: %w", s.Shard.Addr, err)
	case serr != nil:
		return redisv1alpha1.BackupShard{}, nil, fmt.Errorf("the snapshot of %s does not read as an RDB file: %w", s.Shard.Addr, serr)
	case up.Size != s.Size:
		return redisv1alpha1.BackupShard{}, nil, sizeMismatch(s, up.Size)
	}
	return redisv1alpha1.BackupShard{NodeID: s.Shard.NodeID, Slots: s.Shard.Slots.String(),
		ReplicationOffset: s.Shard.Offset, Object: obj, Size: up.Size, SHA256: up.SHA256, Keys: n}, hdr, nil
}

// sizeMismatch is the error of an upload that holds other than the snapshot's bytes: a
// disk snapshot's length is announced before it, a diskless one's counted up to its end
// mark (-1 when the upload ended before the mark).
func sizeMismatch(s *backup.Snapshot, uploaded int64) error {
	if s.Shard.Diskless {
		return fmt.Errorf("the upload of %s holds %d bytes, its diskless snapshot %d up to its end mark", s.Shard.Addr, uploaded, s.Size)
	}
	return fmt.Errorf("the snapshot of %s has %d bytes, the master announced %d", s.Shard.Addr, uploaded, s.Size)
}

func progressSummary(p redisv1alpha1.BackupProgress) string {
	return fmt.Sprintf("%d/%d shards, %.1f MiB", p.ShardsDone, p.Shards, float64(p.Bytes)/(1<<20))
}

// releaseBackupStore deletes the store pod of a backup to a PersistentVolumeClaim, once
// its objects are written (or the backup failed): the claim is free again.
func (r *BackupReconciler) releaseBackupStore(ctx context.Context, b *redisv1alpha1.RedisClusterBackup) {
	if b.Spec.PVC == nil {
		return
	}
	if err := r.releaseStore(ctx, b.Namespace, backupStorePod(b)); err != nil {
		log.FromContext(ctx).Error(err, "Failed to delete the store pod", "backup", b.Name, "pod", backupStorePod(b))
	}
}

// untilEOF reads r and calls eof once when r ends.
type untilEOF struct {
	r    io.Reader
	eof  func()
	seen bool
}

func (u *untilEOF) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	if err == io.EOF && !u.seen {
		u.seen = true
		u.eof()
	}
	return n, err
}
