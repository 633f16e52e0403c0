//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// operatorSources are the paths the operator binary is built from (tests and test helpers
// excluded): a commit that touches none of them builds the same operator.
var operatorSources = []string{"main.go", "api", "controller", "fsm", "internal", "redis", "render", "templates", "go.mod", "go.sum",
	":(exclude)*_test.go", ":(exclude)redis/redistest"}

// upgradeFrom picks the revision of the "previous" operator: E2E_UPGRADE_FROM when set;
// else HEAD when the working tree changes the operator; else the parent of the last commit
// that changed it, so the two binaries always differ.
func upgradeFrom(t *testing.T) (rev, why string) {
	t.Helper()
	if rev := os.Getenv("E2E_UPGRADE_FROM"); rev != "" {
		return rev, "E2E_UPGRADE_FROM"
	}
	if out := git(t, append([]string{"status", "--porcelain", "--"}, operatorSources...)...); out != "" {
		return "HEAD", "the working tree changes the operator"
	}
	last := git(t, append([]string{"log", "-1", "--format=%h", "HEAD", "--"}, operatorSources...)...)
	// A release that changes the pod template on purpose rolls every cluster's pods once:
	// that is an announced write, not one this test is for. Such a release moves
	// testdata/upgrade-baseline to itself, and no older operator is used.
	if base := upgradeBaseline(t); base != "" && exec.Command("git", "-C", framework.RepoRoot(), "merge-base", "--is-ancestor", last+"^", base).Run() == nil {
		return base, "the upgrade baseline (testdata/upgrade-baseline: the last release that changed the pod template)"
	}
	return last + "^", "the operator before " + last + ", the last commit that changed it"
}

// upgradeBaseline is the revision in testdata/upgrade-baseline, "" when there is none.
func upgradeBaseline(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "test", "e2e", "testdata", "upgrade-baseline"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = framework.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// buildOperatorAt builds the operator of rev from `git archive` (no checkout, so the
// repository's worktree and index are left alone) into a temporary directory.
func buildOperatorAt(t *testing.T, rev string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(dir, "src.tar")
	git(t, "archive", "--format=tar", "-o", tar, rev)
	for _, c := range []*exec.Cmd{
		exec.Command("tar", "-xf", tar, "-C", src),
		exec.Command("go", "build", "-o", filepath.Join(dir, "manager"), "."),
	} {
		c.Dir = src
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("building the operator of %s: %s: %v: %s", rev, c, err, out)
		}
	}
	return filepath.Join(dir, "manager")
}

// TestOperatorUpgradeWritesNothing replaces a running operator binary by this tree's with a
// formed cluster serving writes: the new operator reconciles it several times and changes
// nothing, neither an API object (resourceVersions) nor Redis (write commands in INFO
// commandstats), nor restarts a pod, and every acknowledged write is read back.
func TestOperatorUpgradeWritesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g := NewWithT(t)
	const ns, name = "e2e-operator-upgrade", "demo"

	rev, why := upgradeFrom(t)
	start := time.Now()
	oldBin := buildOperatorAt(t, rev)
	t.Logf("old operator: %s (%s), built in %v", rev, why, time.Since(start).Round(time.Second))

	// operator() installs the CRD and builds this tree's bin/manager; its operator watches
	// every namespace, so it stops while this test runs (the next test that needs it
	// restarts it).
	operator(t)
	stopOperator()
	newBin := filepath.Join(framework.RepoRoot(), "bin", "manager")
	flags := func(extra ...string) []string {
		return append([]string{"--namespaces=" + ns, "--health-probe-bind-address=127.0.0.1:0",
			"--leader-elect", "--leader-election-namespace=default", "--leader-election-id=e2e-operator-upgrade",
			"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s"}, extra...)
	}
	oldOp, err := stack.StartOperatorBinary(oldBin, flags("--metrics-bind-address=0")...)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = oldOp.Stop() })
	t.Logf("old operator log: %s", oldOp.Logs)

	testNamespace(ctx, t, ns)
	// No foreground finalizer: the namespace goes at the end whichever operator runs then.
	applyCluster(ctx, t, demoSample, ns, func(u *unstructured.Unstructured) {
		unstructured.RemoveNestedField(u.Object, "spec", "finalizers")
	})
	g.Expect(stack.WaitForPhase(ctx, ns, name, "Running", formTime)).To(Succeed())
	eventuallyFormed(ctx, t, ns, name)

	r := stack.RouterFor(ns, name, "")
	defer r.Close()
	w, err := r.StartWriter(ctx, "opupgrade")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()

	// The old operator has settled: two snapshots 3 s apart agree.
	var before state
	var beforePods map[string]string
	var beforeCR *unstructured.Unstructured
	g.Eventually(func() bool {
		a := snapshot(ctx, t, ns, name)
		time.Sleep(3 * time.Second)
		before, beforePods = snapshot(ctx, t, ns, name), podRuns(ctx, t, ns, name)
		beforeCR, err = stack.GetRedisCluster(ctx, ns, name)
		return err == nil && reflect.DeepEqual(a, before) && beforeCR.GetResourceVersion() == before.cluster
	}, time.Minute, 0).Should(BeTrue(), "the old operator kept writing to a Running cluster")

	g.Expect(oldOp.Stop()).To(Succeed())
	const metricsAddr = "127.0.0.1:18089"
	// Plain HTTP: reconcileCounts scrapes without a token (the old operator may not know the flag).
	newOp, err := stack.StartOperatorBinary(newBin, flags("--metrics-bind-address="+metricsAddr, "--metrics-secure=false", "--sync-period=2s")...)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = newOp.Stop() })
	t.Logf("new operator log: %s", newOp.Logs)
	swapped := time.Now()

	// The initial list, then a resync every 2 s: wait for several reconciles that got
	// through (a Running cluster's ends with a requeue_after, the next routine look).
	var reconciles map[string]int
	g.Eventually(func() int {
		reconciles = reconcileCounts(metricsAddr)
		return reconciles["success"] + reconciles["requeue"] + reconciles["requeue_after"]
	}, 2*time.Minute, 500*time.Millisecond).Should(BeNumerically(">=", 10), "the new operator did not reconcile")
	// And a few resyncs, not only the start's burst.
	time.Sleep(max(0, 8*time.Second-time.Since(swapped)))
	reconciles = reconcileCounts(metricsAddr)
	after, afterPods := snapshot(ctx, t, ns, name), podRuns(ctx, t, ns, name)
	afterCR, err := stack.GetRedisCluster(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("the new operator reconciled %v in %v", reconciles, time.Since(swapped).Round(time.Millisecond))

	rep, acked := w.Stop(), w.Acked()
	w = nil
	lost, err := r.Missing(ctx, acked)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("writer: %s; %d acknowledged keys read back, %d lost", rep, len(acked), len(lost))

	// Each checked apart, so a failure names everything the new operator changed.
	expectSame(t, "failed reconciles", reconciles["error"], 0)
	expectSame(t, "resourceVersions of the rendered objects", after.objects, before.objects)
	expectSame(t, "Redis write commands (INFO commandstats)", after.redisWrites, before.redisWrites)
	expectSame(t, "pods (uid, restarts)", afterPods, beforePods)
	if after.cluster != before.cluster {
		// A newer operator may fill status fields an older one did not know, once; any
		// other change to the RedisCluster is a write the upgrade should not have made.
		added, changed := crChanges(beforeCR, afterCR)
		if len(changed) > 0 {
			t.Errorf("the new operator rewrote the RedisCluster (resourceVersion %s -> %s): changed %v, added %v",
				before.cluster, after.cluster, changed, added)
		} else {
			t.Logf("the new operator added status fields the old one did not write: %v", added)
			time.Sleep(4 * time.Second)
			expectSame(t, "the RedisCluster's resourceVersion after the status fields were added",
				getCluster(ctx, t, ns, name).ResourceVersion, after.cluster)
		}
	}
	if rep.Acked == 0 {
		t.Error("the writer wrote nothing")
	}
	expectSame(t, "acknowledged writes lost", len(lost), 0)
}

func expectSame(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s changed across the operator upgrade:\n got  %v\n want %v", what, got, want)
	}
}

// crChanges compares two versions of a RedisCluster: the status fields only the newer has
// (added), and every other difference in spec, labels, annotations, finalizers or status
// (changed).
func crChanges(old, cur *unstructured.Unstructured) (added, changed []string) {
	for _, f := range []string{"spec"} {
		if !reflect.DeepEqual(old.Object[f], cur.Object[f]) {
			changed = append(changed, f)
		}
	}
	if !reflect.DeepEqual(old.GetLabels(), cur.GetLabels()) {
		changed = append(changed, "metadata.labels")
	}
	if !reflect.DeepEqual(old.GetAnnotations(), cur.GetAnnotations()) {
		changed = append(changed, "metadata.annotations")
	}
	if !reflect.DeepEqual(old.GetFinalizers(), cur.GetFinalizers()) {
		changed = append(changed, "metadata.finalizers")
	}
	oldStatus, _, _ := unstructured.NestedMap(old.Object, "status")
	curStatus, _, _ := unstructured.NestedMap(cur.Object, "status")
	for k, v := range curStatus {
		ov, had := oldStatus[k]
		switch {
		case !had:
			added = append(added, fmt.Sprintf("status.%s=%v", k, v))
		case !reflect.DeepEqual(ov, v):
			changed = append(changed, fmt.Sprintf("status.%s: %v -> %v", k, ov, v))
		}
	}
	for k := range oldStatus {
		if _, ok := curStatus[k]; !ok {
			changed = append(changed, "status."+k+" removed")
		}
	}
	return added, changed
}

// podRuns is "uid restarts" per pod of the cluster: a replaced or restarted pod changes it.
func podRuns(ctx context.Context, t *testing.T, ns, name string) map[string]string {
	t.Helper()
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]string{}
	for _, p := range pods {
		restarts := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		runs[p.Name] = fmt.Sprintf("%s %d", p.UID, restarts)
	}
	return runs
}

// reconcileCounts reads controller-runtime's controller_runtime_reconcile_total of the
// RedisCluster controller from the operator's metrics, by result; nil until it answers.
func reconcileCounts(addr string) map[string]int {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "controller_runtime_reconcile_total{") || !strings.Contains(line, `controller="rediscluster"`) {
			continue
		}
		i := strings.Index(line, `result="`)
		j := strings.LastIndex(line, " ")
		if i < 0 || j < 0 {
			continue
		}
		result := line[i+len(`result="`):]
		result = result[:strings.Index(result, `"`)]
		n, err := strconv.ParseFloat(line[j+1:], 64)
		if err == nil {
			counts[result] = int(n)
		}
	}
	return counts
}
