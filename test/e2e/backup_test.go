//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

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
// keeps writing, then restores the backup's objects into new clusters of 3 and 5 masters:
// every key loaded is there with its TTL, every write acknowledged before the pause began
// is there, none sent after it ended is, and redis-cli --cluster check passes.
func TestBackupCutAndRestoreIntoOtherShapes(t *testing.T) {
	ctx := context.Background()
	const ns = "backup"
	formDemo(ctx, t, ns, nil)
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
	if _, err := stack.ApplyYAML(ctx, ns, `apiVersion: redis.middleware.hc.cn/v1alpha1
kind: RedisClusterBackup
metadata: {name: first, namespace: `+ns+`}
spec:
  clusterName: demo
  s3: {endpoint: "`+s3srv.Endpoint+`", bucket: backups, prefix: e2e, credentialsSecret: {name: s3-creds}}
`); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	var b redisv1alpha1.RedisClusterBackup
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out, err := stack.Kubectl("get", "recb", "first", "-n", ns, "-o", "json")
		if err == nil {
			_ = json.Unmarshal([]byte(out), &b)
		}
		if b.Status.Phase == redisv1alpha1.BackupSucceeded || b.Status.Phase == redisv1alpha1.BackupFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backup not done: %+v", b.Status)
		}
		time.Sleep(500 * time.Millisecond)
	}
	took := time.Since(began)
	if b.Status.Phase != redisv1alpha1.BackupSucceeded {
		t.Fatalf("backup %s: %s", b.Status.Reason, b.Status.Message)
	}
	out, _ := stack.Kubectl("get", "recb", "-n", ns)
	t.Logf("backup in %v (includes polling):\n%s", took.Round(time.Millisecond), out)
	t.Logf("status: pause %s, %d keys, %d bytes", b.Status.WritePause, b.Status.Progress.Keys, b.Status.Progress.Bytes)
	time.Sleep(time.Second) // writes after the cut
	rep := w.Stop()
	t.Logf("writer: %v", rep)
	cutStart, cutEnd := b.Status.CutStartedAt.Time, b.Status.CutEndedAt.Time

	for _, shape := range []struct {
		name    string
		masters int
	}{{"r3", 3}, {"r5", 5}} {
		applyCluster(ctx, t, demoSample, ns, func(u *unstructured.Unstructured) {
			u.SetName(shape.name)
			_ = unstructured.SetNestedField(u.Object, int64(shape.masters), "spec", "replicas")
			_ = unstructured.SetNestedField(u.Object, int64(0), "spec", "replicasPerMaster")
			_ = unstructured.SetNestedField(u.Object, "256mb", "spec", "pod", "0", "env", "0", "value")
		})
	}
	for _, shape := range []struct {
		name    string
		masters int
	}{{"r3", 3}, {"r5", 5}} {
		if err := stack.WaitForPhase(ctx, ns, shape.name, "Running", formTime); err != nil {
			t.Fatal(err)
		}
		addrs, err := stack.PodAddrs(ctx, ns, redisv1alpha1.SelectorString(shape.name))
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
		var p backup.Progress
		began := time.Now()
		// The new cluster has its own generated password (Secret NAME-auth).
		pw, err := stack.Password(ctx, ns, shape.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := backup.Restore(ctx, backup.RestoreTarget{Addrs: addrs, Dialer: backup.Dialer{Passwords: []string{pw}}}, sources, &p); err != nil {
			t.Fatal(err)
		}
		d := time.Since(began)
		t.Logf("%s (%d masters): restored %d keys, %d bytes in %v: %.0f keys/s, %.1f MB/s", shape.name, shape.masters,
			p.Keys.Load(), p.Bytes.Load(), d.Round(time.Millisecond), float64(p.Keys.Load())/d.Seconds(), float64(p.Bytes.Load())/d.Seconds()/1e6)

		rr := stack.RouterFor(ns, shape.name, "")
		var want []string
		for i := 0; i < backupKeys; i++ {
			want = append(want, fmt.Sprint("bk:", i))
		}
		for k := range ttls {
			want = append(want, k)
		}
		var before, after []string
		for _, rec := range w.Records() {
			switch {
			case !rec.Acked.IsZero() && rec.Acked.Before(cutStart):
				before = append(before, rec.Key)
			case rec.Sent.After(cutEnd):
				after = append(after, rec.Key)
			}
		}
		want = append(want, before...)
		missing, err := rr.Missing(ctx, want)
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) > 0 {
			t.Fatalf("%s: %d keys missing, e.g. %v", shape.name, len(missing), missing[:min(5, len(missing))])
		}
		absent, err := rr.Missing(ctx, after)
		if err != nil {
			t.Fatal(err)
		}
		if len(absent) != len(after) {
			t.Fatalf("%s: %d writes sent after the cut ended are in the backup", shape.name, len(after)-len(absent))
		}
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
		cli := exec.Command("redis-cli", "--cluster", "check", addrs[0])
		cli.Env = append(os.Environ(), "REDISCLI_AUTH="+pw)
		check, err := cli.CombinedOutput()
		if err != nil || !strings.Contains(string(check), "[OK] All 16384 slots covered") {
			t.Fatalf("%s: redis-cli --cluster check: %v\n%s", shape.name, err, check)
		}
		t.Logf("%s: %d keys acknowledged before the cut present, %d sent after it absent, cluster check OK", shape.name, len(before), len(after))
	}
}
