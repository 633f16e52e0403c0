//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// backupKeys is how many keys the backup test loads (the goal is 1,000,000; the
// demo's 64 MB maxmemory and CI's budget hold this many).
const backupKeys = 100000

// TestBackupCutAndRestoreIntoOtherShapes loads keys (strings, some with TTLs, a key of
// every other type and a 200,000-member sorted set) into the 3-master demo while a
// writer runs, backs it up with a RedisClusterBackup to a real S3 server (versitygw),
// keeps writing, then restores the backup into new clusters: one of 3 masters from the
// test process (redis/backup.Restore), one of 5 masters by the operator itself
// (spec.restoreFrom), which must not be Running (nor have its client Service) before
// status.restore says every key is in. In both, every key loaded is there with its TTL,
// every write acknowledged before the pause began is there, none sent after it ended is,
// and redis-cli --cluster check passes.
func TestBackupCutAndRestoreIntoOtherShapes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "backup"
	formDemo(ctx, t, ns, nil)
	s3srv, s3 := s3Store(ctx, t, ns)

	r := stack.RouterFor(ns, "demo", "")
	defer r.Close()
	began := time.Now()
	if err := r.Load(ctx, "bk", backupKeys); err != nil {
		t.Fatal(err)
	}
	ttls := map[string]bool{}
	for i := 0; i < 1000; i++ {
		k := fmt.Sprint("ttl:", i)
		if err := r.Do(ctx, k, "set", k, framework.Value(k), "px", 3600000+i).Err(); err != nil {
			t.Fatal(err)
		}
		ttls[k] = true
	}
	for _, cmd := range [][]any{{"rpush", "list", "a", "b"}, {"hset", "hash", "f", "v"}, {"sadd", "set", "m"}, {"xadd", "stream", "*", "f", "v"}} {
		if err := r.Do(ctx, cmd[1].(string), cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for start := 0; start < 200000; start += 2000 {
		args := []any{"zadd", "zbig"}
		for i := start; i < start+2000; i++ {
			args = append(args, i, fmt.Sprint("member-", i))
		}
		if err := r.Do(ctx, "zbig", args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("loaded %d keys in %v", backupKeys+1005, time.Since(began).Round(time.Millisecond))

	w, err := r.StartWriter(ctx, "wr")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	b, took := takeBackup(ctx, t, ns, "first", "demo", s3srv.Endpoint)
	out, _ := stack.Kubectl("get", "recb", "-n", ns)
	t.Logf("backup in %v (includes polling):\n%s", took.Round(time.Millisecond), out)
	t.Logf("status: pause %s, %d keys, %d bytes", b.Status.WritePause, b.Status.Progress.Keys, b.Status.Progress.Bytes)
	snapshotsDiskless(ctx, t, &b)
	time.Sleep(time.Second) // writes after the cut
	rep := w.Stop()
	t.Logf("writer: %v", rep)

	shapes := []struct {
		name     string
		masters  int
		operator bool // restored by the operator (spec.restoreFrom), else from the test process
	}{{"r5", 5, true}, {"r3", 3, false}} // r5 first: its phases are watched from its creation
	for _, shape := range shapes {
		applyCluster(ctx, t, demoSample, ns, func(u *unstructured.Unstructured) {
			u.SetName(shape.name)
			_ = unstructured.SetNestedField(u.Object, int64(shape.masters), "spec", "replicas")
			_ = unstructured.SetNestedField(u.Object, int64(0), "spec", "replicasPerMaster")
			_ = unstructured.SetNestedField(u.Object, "256mb", "spec", "pod", "0", "env", "0", "value")
			if shape.operator {
				_ = unstructured.SetNestedMap(u.Object, map[string]any{"backup": "first"}, "spec", "restoreFrom")
			}
		})
	}
	for _, shape := range shapes {
		if shape.operator {
			restoredByOperator(ctx, t, ns, shape.name, shape.masters)
		} else if err := stack.WaitForPhase(ctx, ns, shape.name, "Running", formTime); err != nil {
			t.Fatal(err)
		}
		addrs, err := stack.PodAddrs(ctx, ns, redisv1alpha1.SelectorString(shape.name))
		if err != nil {
			t.Fatal(err)
		}
		// The operator generates a password by default (Secret NAME-auth).
		password, err := stack.Password(ctx, ns, shape.name)
		if err != nil {
			t.Fatal(err)
		}
		var sources []func() (io.ReadCloser, error)
		for _, sh := range b.Status.Shards {
			sources = append(sources, func() (io.ReadCloser, error) {
				rc, err := s3.Get(ctx, "backups", sh.Object)
				if err != nil {
					return nil, err
				}
				return backup.VerifyingReader(rc, sh.SHA256), nil
			})
		}
		if !shape.operator {
			var p backup.Progress
			began := time.Now()
			if err := backup.Restore(ctx, backup.RestoreTarget{Addrs: addrs, Dialer: backup.Dialer{Passwords: []string{password}}}, sources, &p); err != nil {
				t.Fatal(err)
			}
			d := time.Since(began)
			t.Logf("%s (%d masters): restored %d keys, %d bytes in %v: %.0f keys/s, %.1f MB/s", shape.name, shape.masters,
				p.Keys.Load(), p.Bytes.Load(), d.Round(time.Millisecond), float64(p.Keys.Load())/d.Seconds(), float64(p.Bytes.Load())/d.Seconds()/1e6)
		}

		rr := stack.RouterFor(ns, shape.name, "")
		var want []string
		for i := 0; i < backupKeys; i++ {
			want = append(want, fmt.Sprint("bk:", i))
		}
		for k := range ttls {
			want = append(want, k)
		}
		before, after := splitAtCut(w, b)
		want = append(want, before...)
		missing, err := rr.Missing(ctx, want)
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) > 0 {
			t.Fatalf("%s: %d keys missing, e.g. %v", shape.name, len(missing), missing[:min(5, len(missing))])
		}
		noneAfterCut(ctx, t, rr, shape.name, after)
		for k := range ttls {
			ms, err := rr.Do(ctx, k, "pttl", k).Int64()
			if err != nil || ms <= 0 || ms > 3601000 {
				t.Fatalf("%s: key %s has PTTL %d (%v)", shape.name, k, ms, err)
			}
		}
		if n, err := rr.Do(ctx, "zbig", "zcard", "zbig").Int64(); err != nil || n != 200000 {
			t.Fatalf("%s: zbig has %d members (%v)", shape.name, n, err)
		}
		for _, k := range []string{"list", "hash", "set", "stream"} {
			if n, err := rr.Do(ctx, k, "exists", k).Int64(); err != nil || n != 1 {
				t.Fatalf("%s: %s missing (%v)", shape.name, k, err)
			}
		}
		rr.Close()
		if err := stack.Integrity(ctx, ns, shape.name, ""); err != nil {
			t.Fatal(err)
		}
		clusterCheck(t, shape.name, addrs[0], password)
		t.Logf("%s: %d keys acknowledged before the cut present, %d sent after it absent, cluster check OK", shape.name, len(before), len(after))
	}
}

// restoredByOperator waits until the RedisCluster created with spec.restoreFrom is
// Running, checking every poll that it is not Running, and has no client Service, before
// status.restore records every key in; it logs the restore's figures.
func restoredByOperator(ctx context.Context, t *testing.T, ns, name string, masters int) {
	t.Helper()
	deadline := time.Now().Add(formTime + 3*time.Minute)
	var rc redisv1alpha1.RedisCluster
	var phases []string
	sawRestoring := false
	for {
		out, err := stack.Kubectl("get", "rec", name, "-n", ns, "-o", "json")
		if err == nil {
			rc = redisv1alpha1.RedisCluster{}
			_ = json.Unmarshal([]byte(out), &rc)
		}
		st := rc.Status.Restore
		done := st != nil && st.CompletedAt != nil
		if p := string(rc.Status.Phase); len(phases) == 0 || phases[len(phases)-1] != p {
			phases = append(phases, p)
		}
		if rc.Status.Phase == redisv1alpha1.PhaseRunning {
			if !done {
				t.Fatalf("%s is Running before its restore completed: %+v", name, st)
			}
			break
		}
		if st != nil && st.StartedAt != nil && !done {
			sawRestoring = true
			if _, err := stack.Kubectl("get", "svc", name+"-client", "-n", ns); err == nil {
				// The restore may have completed (and the cluster turned Running, and got
				// its Service) between the two reads: only a Service seen while the
				// status, read again after it, still says restoring is a violation.
				again := redisv1alpha1.RedisCluster{}
				out, err := stack.Kubectl("get", "rec", name, "-n", ns, "-o", "json")
				if err != nil || json.Unmarshal([]byte(out), &again) != nil || again.Status.Restore == nil || again.Status.Restore.CompletedAt == nil {
					t.Fatalf("%s has its client Service while restoring: %+v", name, again.Status.Restore)
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not Running: phases %v, reason %q, restore %+v", name, phases, rc.Status.Reason, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	st := rc.Status.Restore
	formed := meta.FindStatusCondition(rc.Status.ClusterConditions, "Formed")
	if formed == nil || formed.LastTransitionTime.Before(st.CompletedAt) {
		t.Fatalf("%s: Formed (Running) at %v, before the restore completed at %v", name, formed, st.CompletedAt)
	}
	if st.Reason != "RestoreSucceeded" || st.Attempts != 1 {
		t.Fatalf("%s: restore %+v", name, st)
	}
	if _, err := stack.Kubectl("get", "svc", name+"-client", "-n", ns); err != nil {
		t.Fatalf("%s: no client Service once Running: %v", name, err)
	}
	out, err := stack.Kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name="+name+",involvedObject.kind=RedisCluster", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var events corev1.EventList
	if err := json.Unmarshal([]byte(out), &events); err != nil {
		t.Fatal(err)
	}
	var figures string
	succeeded := false
	for _, e := range events.Items {
		if strings.HasPrefix(e.Reason, "Restore") {
			figures += "\n  " + e.Reason + ": " + e.Message
			succeeded = succeeded || e.Reason == "RestoreSucceeded"
		}
	}
	if !succeeded {
		t.Fatalf("%s: no RestoreSucceeded event:%s", name, figures)
	}
	t.Logf("%s (%d masters) restored by the operator: phases %v (observed the restore under way: %v), %d keys, %d bytes, %d expired skipped, attempt %d%s",
		name, masters, phases, sawRestoring, st.Keys, st.Bytes, st.Expired, st.Attempts, figures)
}

// s3Store starts the S3 server pods reach (versitygw on the devcluster's host address), with
// a bucket "backups", and the Secret s3-creds in ns a RedisClusterBackup names.
func s3Store(ctx context.Context, t *testing.T, ns string) (*redistest.S3Server, *backup.S3) {
	t.Helper()
	s3srv := redistest.StartS3(t, "198.18.0.1")
	s3 := &backup.S3{Endpoint: s3srv.Endpoint, AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey}
	if err := s3.CreateBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	if _, err := stack.ApplyYAML(ctx, ns, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: s3-creds, namespace: %s}
stringData: {accessKeyID: %s, secretAccessKey: %s}
`, ns, s3srv.AccessKey, s3srv.SecretKey)); err != nil {
		t.Fatal(err)
	}
	return s3srv, s3
}

// takeBackup applies the RedisClusterBackup name of cluster to the store at endpoint and
// waits, polling every 200 ms, until it is done: it must have Succeeded. took is from the
// apply to the poll that saw it Succeeded.
func takeBackup(ctx context.Context, t *testing.T, ns, name, cluster, endpoint string) (b redisv1alpha1.RedisClusterBackup, took time.Duration) {
	t.Helper()
	return takeBackupTo(ctx, t, ns, name, cluster, `s3: {endpoint: "`+endpoint+`", bucket: backups, prefix: e2e, credentialsSecret: {name: s3-creds}}`)
}

// snapshotsDiskless fails the test unless b's BackupStarted event says every master gave
// a diskless snapshot, as the pods' repl-diskless-sync-delay 0 allows.
func snapshotsDiskless(ctx context.Context, t *testing.T, b *redisv1alpha1.RedisClusterBackup) {
	t.Helper()
	// Events are recorded asynchronously: a few seconds at most.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		events, err := stack.Events(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.Reason != "BackupStarted" {
				continue
			}
			if !strings.HasSuffix(e.Message, "; snapshots diskless") {
				t.Fatalf("backup %s: %s, want every snapshot diskless", b.Name, e.Message)
			}
			t.Logf("backup %s: %s", b.Name, e.Message)
			return
		}
	}
	t.Fatalf("backup %s has no BackupStarted event", b.Name)
}

// takeBackupTo is takeBackup to the destination dest, a line of the spec ("pvc: {...}").
func takeBackupTo(ctx context.Context, t *testing.T, ns, name, cluster, dest string) (b redisv1alpha1.RedisClusterBackup, took time.Duration) {
	t.Helper()
	if _, err := stack.ApplyYAML(ctx, ns, `apiVersion: redis.middleware.hc.cn/v1alpha1
kind: RedisClusterBackup
metadata: {name: `+name+`, namespace: `+ns+`}
spec:
  clusterName: `+cluster+`
  `+dest+`
`); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	deadline := began.Add(3 * time.Minute)
	for b.Status.Phase != redisv1alpha1.BackupSucceeded && b.Status.Phase != redisv1alpha1.BackupFailed {
		if time.Now().After(deadline) {
			t.Fatalf("backup %s not done: %+v", name, b.Status)
		}
		time.Sleep(200 * time.Millisecond)
		if out, err := stack.Kubectl("get", "recb", name, "-n", ns, "-o", "json"); err == nil {
			_ = json.Unmarshal([]byte(out), &b)
		}
	}
	took = time.Since(began)
	if b.Status.Phase != redisv1alpha1.BackupSucceeded {
		t.Fatalf("backup %s: %s: %s", name, b.Status.Reason, b.Status.Message)
	}
	return b, took
}

// splitAtCut is the writer's keys acknowledged before the backup's cut began (the backup
// must hold them) and those sent after it ended (it must not).
func splitAtCut(w *framework.Writer, b redisv1alpha1.RedisClusterBackup) (before, after []string) {
	cutStart, cutEnd := b.Status.CutStartedAt.Time, b.Status.CutEndedAt.Time
	for _, rec := range w.Records() {
		switch {
		case !rec.Acked.IsZero() && rec.Acked.Before(cutStart):
			before = append(before, rec.Key)
		case rec.Sent.After(cutEnd):
			after = append(after, rec.Key)
		}
	}
	return before, after
}

// noneAfterCut fails the test when the restored cluster holds any key written after the cut.
func noneAfterCut(ctx context.Context, t *testing.T, rr *framework.Router, name string, after []string) {
	t.Helper()
	absent, err := rr.Missing(ctx, after)
	if err != nil {
		t.Fatal(err)
	}
	if len(absent) != len(after) {
		t.Fatalf("%s: %d writes sent after the cut ended are in the backup", name, len(after)-len(absent))
	}
}

// clusterCheck runs redis-cli --cluster check against the node at addr.
func clusterCheck(t *testing.T, name, addr, password string) {
	t.Helper()
	cli := exec.Command("redis-cli", "--cluster", "check", addr)
	cli.Env = append(cli.Environ(), "REDISCLI_AUTH="+password)
	check, err := cli.CombinedOutput()
	if err != nil || !strings.Contains(string(check), "[OK] All 16384 slots covered") {
		t.Fatalf("%s: redis-cli --cluster check: %v\n%s", name, err, check)
	}
}

// TestBackupScheduleKeepsTheLastTwo: a RedisClusterBackupSchedule every 10 s with keep 2
// on the demo (keys loaded, a writer running) against a real S3 server: once three of its
// backups succeeded, exactly the last two exist, and the bucket holds exactly their objects
// (listed); the operator's metrics give the last success, its duration and size. A
// schedule more often than every 10 s is refused at apply time. Deleting the schedule
// leaves its backups; deleting them (deletionPolicy Delete) empties the bucket.
func TestBackupScheduleKeepsTheLastTwo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "backup-schedule"
	formDemo(ctx, t, ns, nil)
	s3srv, s3 := s3Store(ctx, t, ns)
	r := stack.RouterFor(ns, "demo", "")
	defer r.Close()
	if err := r.Load(ctx, "sk", 10000); err != nil {
		t.Fatal(err)
	}
	w, err := r.StartWriter(ctx, "wr")
	if err != nil {
		t.Fatal(err)
	}
	schedule := func(every string) string {
		return `apiVersion: redis.middleware.hc.cn/v1alpha1
kind: RedisClusterBackupSchedule
metadata: {name: often, namespace: ` + ns + `}
spec:
  clusterName: demo
  every: ` + every + `
  keep: 2
  s3: {endpoint: "` + s3srv.Endpoint + `", bucket: backups, prefix: sched, credentialsSecret: {name: s3-creds}}
`
	}
	if _, err := stack.ApplyYAML(ctx, ns, schedule("1s")); err == nil || !strings.Contains(err.Error(), "spec.every: at least 10s") {
		t.Fatalf("a schedule every 1s: %v", err)
	}
	began := time.Now()
	if _, err := stack.ApplyYAML(ctx, ns, schedule("10s")); err != nil {
		t.Fatal(err)
	}

	seen := map[string]bool{}
	var kept []string
	var objects []string
	for deadline := time.Now().Add(90 * time.Second); ; {
		var list redisv1alpha1.RedisClusterBackupList
		out, err := stack.Kubectl("get", "recb", "-n", ns, "-l", redisv1alpha1.ScheduleLabel+"=often", "-o", "json")
		if err == nil {
			_ = json.Unmarshal([]byte(out), &list)
		}
		kept, objects = nil, nil
		busy := false
		for _, b := range list.Items {
			seen[b.Name] = true
			switch b.Status.Phase {
			case redisv1alpha1.BackupSucceeded:
				kept = append(kept, b.Name)
			case redisv1alpha1.BackupFailed:
				t.Fatalf("backup %s failed: %s: %s", b.Name, b.Status.Reason, b.Status.Message)
			default:
				busy = true
			}
		}
		if len(seen) >= 3 && len(kept) == 2 && !busy {
			if objects, err = s3.List(ctx, "backups", "sched/"+ns+"/"); err != nil {
				t.Fatal(err)
			}
			want := 0
			for _, name := range kept {
				for _, o := range objects {
					if strings.HasPrefix(o, "sched/"+ns+"/"+name+"/") {
						want++
					}
				}
			}
			if want == len(objects) && len(objects) == 2*4 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: backups seen %v, Succeeded now %v, objects %q", time.Since(began).Round(time.Second), seen, kept, objects)
		}
		time.Sleep(500 * time.Millisecond)
	}
	took := time.Since(began)
	rep := w.Stop()
	out, _ := stack.Kubectl("get", "recbs,recb", "-n", ns)
	t.Logf("after %v, %d backups taken: kept %v; the bucket holds exactly their %d objects: %q\n%s\nwriter: %v",
		took.Round(time.Millisecond), len(seen), kept, len(objects), objects, out, rep)
	var acked []string
	for _, rec := range w.Records() {
		if !rec.Acked.IsZero() {
			acked = append(acked, rec.Key)
		}
	}
	if missing, err := r.Missing(ctx, acked); err != nil || len(missing) > 0 || rep.Failed > 0 {
		t.Fatalf("writer %v: %d acknowledged writes lost (%v)", rep, len(missing), err)
	}
	var sc redisv1alpha1.RedisClusterBackupSchedule
	out, err = stack.Kubectl("get", "recbs", "often", "-n", ns, "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &sc) != nil {
		t.Fatalf("schedule: %v", err)
	}
	if sc.Status.Kept != 2 || !slices.Contains(kept, sc.Status.LastSuccessfulBackup) || sc.Status.NextScheduleTime == nil {
		t.Fatalf("schedule status %+v, kept %v", sc.Status, kept)
	}
	last := clusterMetric(t, "redis_operator_backup_last_success_timestamp_seconds", ns, "")
	size := clusterMetric(t, "redis_operator_backup_last_size_bytes", ns, "")
	took2 := clusterMetric(t, "redis_operator_backup_last_duration_seconds", ns, "")
	if last < float64(began.Unix()) || size <= 0 || took2 <= 0 || took2 > 30 {
		t.Fatalf("metrics: last success %v (schedule applied at %d), size %v, duration %v", last, began.Unix(), size, took2)
	}
	t.Logf("metrics: last success at %v, %v bytes, %.3f s", time.Unix(int64(last), 0).UTC(), size, took2)

	// The schedule goes, its backups stay; deleting them deletes their objects.
	if _, err := stack.Kubectl("delete", "recbs", "often", "-n", ns); err != nil {
		t.Fatal(err)
	}
	if out, err := stack.Kubectl("get", "recb", "-n", ns, "-l", redisv1alpha1.ScheduleLabel+"=often", "-o", "name"); err != nil || strings.Count(out, "redisclusterbackup") < 2 {
		t.Fatalf("backups after the schedule was deleted: %q %v", out, err)
	}
	if _, err := stack.Kubectl("delete", "recb", "-n", ns, "-l", redisv1alpha1.ScheduleLabel+"=often", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	if objects, err := s3.List(ctx, "backups", "sched/"); err != nil || len(objects) != 0 {
		t.Fatalf("objects left after their backups were deleted: %q %v", objects, err)
	}
	t.Logf("deleting the backups deleted their objects: the bucket is empty")
}
