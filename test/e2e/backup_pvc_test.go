//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// TestBackupToAPVCAndRestoreIntoAnotherShape backs the 3-master demo (100,000 keys, a
// writer running) up to a PersistentVolumeClaim, in a namespace that enforces the
// restricted Pod Security Standard (the store pods must be admitted), and restores it
// by the operator into a cluster of 5 masters. Before: a backup naming a claim that does
// not exist waits with PVCNotFound, naming spec.pvc.claimName, and a Warning. After:
// the files on the volume are the objects the status names, with their sizes and
// SHA-256; the store pods are gone; every key loaded and every write acknowledged
// before the cut is in the restored cluster, none sent after the cut is; deleting the
// backup (deletionPolicy Delete) deletes its files.
func TestBackupToAPVCAndRestoreIntoAnotherShape(t *testing.T) {
	ctx := context.Background()
	const ns = "backup-pvc"
	formDemo(ctx, t, ns, nil)
	// The demo's pods use hostPath volumes, admitted before the label; every pod created
	// from now on (the store pods, the restored cluster's) must meet restricted.
	if _, err := stack.Kubectl("label", "ns", ns, "pod-security.kubernetes.io/enforce=restricted"); err != nil {
		t.Fatal(err)
	}
	r := stack.RouterFor(ns, "demo", "")
	defer r.Close()
	if err := r.Load(ctx, "pk", backupKeys); err != nil {
		t.Fatal(err)
	}
	w, err := r.StartWriter(ctx, "wr")
	if err != nil {
		t.Fatal(err)
	}

	missingClaim(ctx, t, ns)
	if _, err := stack.ApplyYAML(ctx, ns, `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: backups, namespace: `+ns+`}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`); err != nil {
		t.Fatal(err)
	}
	logs := watchStoreLogs(ctx, t, ns)
	time.Sleep(time.Second)
	b, took := takeBackupTo(ctx, t, ns, "topvc", "demo", "pvc: {claimName: backups, prefix: e2e}\n  deletionPolicy: Delete")
	t.Logf("backup to the claim in %v (the store pod's start included): pause %s, %d keys, %d bytes",
		took.Round(time.Millisecond), b.Status.WritePause, b.Status.Progress.Keys, b.Status.Progress.Bytes)
	time.Sleep(time.Second) // writes after the cut
	rep := w.Stop()
	t.Logf("writer: %v", rep)
	volume := claimDir(ctx, t, ns, "backups")
	filesAreTheObjects(t, volume, b)
	storePodsGone(ctx, t, ns)

	applyCluster(ctx, t, demoSample, ns, func(u *unstructured.Unstructured) {
		u.SetName("r5")
		_ = unstructured.SetNestedField(u.Object, int64(5), "spec", "replicas")
		_ = unstructured.SetNestedField(u.Object, int64(0), "spec", "replicasPerMaster")
		_ = unstructured.SetNestedField(u.Object, "256mb", "spec", "pod", "0", "env", "0", "value")
		pod, _, _ := unstructured.NestedSlice(u.Object, "spec", "pod")
		_ = unstructured.SetNestedField(pod[0].(map[string]any), "emptyDir", "volumes", "type") // restricted refuses hostPath
		_ = unstructured.SetNestedSlice(u.Object, pod, "spec", "pod")
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"backup": "topvc"}, "spec", "restoreFrom")
	})
	restoredByOperator(ctx, t, ns, "r5", 5)
	storePodsGone(ctx, t, ns)
	t.Logf("the store pods' logs, read with kubectl logs while they ran:\n%s", logs())
	// The restore's store pod lives for the restore, long enough to be read; the backup's
	// can live under a second once ready, and its log goes with it, so its PUT lines are
	// not required here: the files on the volume, with the status' sizes and SHA-256
	// (above), are what proves its uploads.
	for _, want := range []string{"serving /backup on :8080 (HTTPS)", "GET /objects/e2e/" + ns + "/topvc/shard-0.rdb: 200"} {
		if !strings.Contains(logs(), want) {
			t.Errorf("the store pods' logs (kubectl logs) have no %q:\n%s", want, logs())
		}
	}

	rr := stack.RouterFor(ns, "r5", "")
	defer rr.Close()
	var want []string
	for i := 0; i < backupKeys; i++ {
		want = append(want, fmt.Sprint("pk:", i))
	}
	before, after := splitAtCut(w, b)
	// A writer that wrote nothing on either side of the cut would prove nothing.
	if len(before) == 0 || len(after) == 0 {
		t.Fatalf("the writer had %d writes acknowledged before the cut and %d sent after it; both must be some", len(before), len(after))
	}
	missing, err := rr.Missing(ctx, append(want, before...))
	if err != nil || len(missing) > 0 {
		t.Fatalf("r5: %d keys missing (%v), e.g. %v", len(missing), err, missing[:min(5, len(missing))])
	}
	noneAfterCut(ctx, t, rr, "r5", after)
	var acked []string
	for _, rec := range w.Records() {
		if !rec.Acked.IsZero() {
			acked = append(acked, rec.Key)
		}
	}
	if lost, err := r.Missing(ctx, acked); err != nil || len(lost) > 0 {
		t.Fatalf("demo: %d of %d acknowledged writes lost (%v)", len(lost), len(acked), err)
	}
	addrs, err := stack.PodAddrs(ctx, ns, redisv1alpha1.SelectorString("r5"))
	if err != nil {
		t.Fatal(err)
	}
	password, err := stack.Password(ctx, ns, "r5")
	if err != nil {
		t.Fatal(err)
	}
	clusterCheck(t, "r5", addrs[0], password)
	t.Logf("r5: %d keys loaded and %d writes acknowledged before the cut present, %d sent after it absent; the demo lost none of its %d acknowledged writes, longest gap %v; cluster check OK",
		backupKeys, len(before), len(after), len(acked), rep.LongestGap)

	// The store pods' key pairs: in Secrets owned by the backup and by the restored cluster.
	for secret, owner := range map[string]string{"topvc-backup-store-tls": "RedisClusterBackup/topvc", "r5-restore-store-tls": "RedisCluster/r5"} {
		out, err := stack.Kubectl("get", "secret", secret, "-n", ns, "-o", "jsonpath={.type} {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}")
		if err != nil || out != "kubernetes.io/tls "+owner {
			t.Fatalf("the store pod's key pair %s: %q %v, want kubernetes.io/tls owned by %s", secret, out, err, owner)
		}
	}

	// deletionPolicy Delete: the files go with the backup, through a store pod again.
	began := time.Now()
	if _, err := stack.Kubectl("delete", "recb", "topvc", "-n", ns, "--timeout=90s"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(volume, "e2e", ns, "topvc")); !os.IsNotExist(err) {
		t.Fatalf("the backup's files are still on the volume after it was deleted: %v", err)
	}
	storePodsGone(ctx, t, ns)
	t.Logf("deleting the backup deleted its files from the volume in %v", time.Since(began).Round(time.Millisecond))
	// Its store pod's key pair goes with it, by garbage collection.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		out, err := stack.Kubectl("get", "secret", "-n", ns, "topvc-backup-store-tls", "--ignore-not-found", "-o", "name")
		if err == nil && out == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted backup's key pair outlived it by a minute: %q %v", out, err)
		}
	}
}

// missingClaim: a backup naming a claim that does not exist waits, Pending with
// PVCNotFound naming spec.pvc.claimName, with a Warning; it is deleted afterwards.
func missingClaim(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	if _, err := stack.ApplyYAML(ctx, ns, `apiVersion: redis.middleware.hc.cn/v1alpha1
kind: RedisClusterBackup
metadata: {name: noclaim, namespace: `+ns+`}
spec: {clusterName: demo, pvc: {claimName: absent}}
`); err != nil {
		t.Fatal(err)
	}
	var b redisv1alpha1.RedisClusterBackup
	for deadline := time.Now().Add(30 * time.Second); b.Status.Reason != "PVCNotFound"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a backup to a missing claim: %+v", b.Status)
		}
		if out, err := stack.Kubectl("get", "recb", "noclaim", "-n", ns, "-o", "json"); err == nil {
			_ = json.Unmarshal([]byte(out), &b)
		}
	}
	if b.Status.Phase != redisv1alpha1.BackupPending || !strings.Contains(b.Status.Message, "spec.pvc.claimName") {
		t.Fatalf("a backup to a missing claim: %+v", b.Status)
	}
	out, err := stack.Kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=noclaim,type=Warning", "-o", "jsonpath={.items[*].message}")
	if err != nil || !strings.Contains(out, "PVCNotFound: spec.pvc.claimName") {
		t.Fatalf("no Warning for the missing claim: %q %v", out, err)
	}
	t.Logf("a backup to a missing claim: %s: %s; Warning: %s", b.Status.Reason, b.Status.Message, out)
	if _, err := stack.Kubectl("delete", "recb", "noclaim", "-n", ns); err != nil {
		t.Fatal(err)
	}
}

// watchStoreLogs reads, every 200 ms until the test ends, the logs of the store pods of
// ns with kubectl logs (they live only while used); logs returns every line seen.
func watchStoreLogs(ctx context.Context, t *testing.T, ns string) (logs func() string) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var lines []string
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			out, _ := stack.Kubectl("logs", "-n", ns, "-l", redisv1alpha1.LabelName+"=redis-backup-store", "--tail=-1")
			mu.Lock()
			for _, l := range strings.Split(out, "\n") {
				if l != "" && !seen[l] {
					seen[l] = true
					lines = append(lines, l)
				}
			}
			mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
}

// claimDir is the host directory of the devcluster's volume bound to claim (the
// provisioner's volumes are hostPath directories of this machine).
func claimDir(ctx context.Context, t *testing.T, ns, claim string) string {
	t.Helper()
	pv, err := stack.Kubectl("get", "pvc", claim, "-n", ns, "-o", "jsonpath={.spec.volumeName}")
	if err != nil || pv == "" {
		t.Fatalf("claim %s: no volume (%v)", claim, err)
	}
	dir, err := stack.Kubectl("get", "pv", strings.TrimSpace(pv), "-o", "jsonpath={.spec.hostPath.path}")
	if err != nil || dir == "" {
		t.Fatalf("volume %s: no hostPath (%v)", pv, err)
	}
	return strings.TrimSpace(dir)
}

// filesAreTheObjects: the volume holds PREFIX/NAMESPACE/NAME/shard-N.rdb, one per shard
// with the size and SHA-256 of the status, and manifest.json, and nothing else under it.
func filesAreTheObjects(t *testing.T, volume string, b redisv1alpha1.RedisClusterBackup) {
	t.Helper()
	dir := filepath.Join(volume, "e2e", b.Namespace, b.Name)
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != len(b.Status.Shards)+1 {
		t.Fatalf("%s holds %d entries (%v), want %d shards and the manifest", dir, len(entries), err, len(b.Status.Shards))
	}
	for i, sh := range b.Status.Shards {
		if want := fmt.Sprintf("e2e/%s/%s/shard-%d.rdb", b.Namespace, b.Name, i); sh.Object != want {
			t.Fatalf("shard %d is %s, want %s", i, sh.Object, want)
		}
		f, err := os.Open(filepath.Join(volume, sh.Object))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		f.Close()
		if err != nil || n != sh.Size || hex.EncodeToString(h.Sum(nil)) != sh.SHA256 {
			t.Fatalf("%s: %d bytes (%v), status says %d bytes, SHA-256 %s", sh.Object, n, err, sh.Size, sh.SHA256)
		}
	}
	var m struct {
		Backup string                      `json:"backup"`
		Shards []redisv1alpha1.BackupShard `json:"shards"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil || json.Unmarshal(raw, &m) != nil || m.Backup != b.Name || len(m.Shards) != len(b.Status.Shards) {
		t.Fatalf("manifest.json: %s (%v)", raw, err)
	}
	t.Logf("the volume holds %d shard files with the status' sizes and SHA-256, and the manifest, under %s", len(b.Status.Shards), dir)
}

// storePodsGone waits (30 s at most) until ns has no store pod (their key pairs' Secrets
// stay with their owners).
func storePodsGone(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	sel := redisv1alpha1.LabelName + "=redis-backup-store"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		out, err := stack.Kubectl("get", "pods", "-n", ns, "-l", sel, "-o", "name")
		if err == nil && strings.TrimSpace(out) == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("store pods left: %s %v", out, err)
		}
	}
}
