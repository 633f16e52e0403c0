//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// Slot migration a user watches and controls: status.progress and the Progress column,
// pause and resume, updateStrategy.maxKeysPerSecond, an abort by setting replicas back,
// and AssignReceive. Each runs on the fault suite's loaded demo cluster (faultKeys keys)
// with its writer, and ends with the fault suite's checks (finish): 0 keys lost.

// withMaxKeysPerSecond sets spec.updateStrategy.maxKeysPerSecond.
func withMaxKeysPerSecond(n int64) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, n, "spec", "updateStrategy", "maxKeysPerSecond")
	}
}

func patchCluster(t *testing.T, ns, patch string) {
	t.Helper()
	if out, err := stack.Kubectl("-n", ns, "patch", "rec/demo", "--type=merge", "-p", patch); err != nil {
		t.Fatalf("kubectl patch %s: %v: %s", patch, err, out)
	}
}

// waitProgress waits until the cluster's status.progress satisfies cond.
func waitProgress(ctx context.Context, t *testing.T, ns, what string, cond func(*redisv1alpha1.OperationProgress) bool) *redisv1alpha1.RedisCluster {
	t.Helper()
	var rc *redisv1alpha1.RedisCluster
	NewWithT(t).Eventually(func() bool {
		rc = getCluster(ctx, t, ns, "demo")
		return rc.Status.Progress != nil && cond(rc.Status.Progress)
	}, 4*time.Minute, 50*time.Millisecond).Should(BeTrue(), what)
	return rc
}

func slotsMoving(p *redisv1alpha1.OperationProgress) bool {
	return p.Operation == redisv1alpha1.PhaseScaling && p.FinishTime == nil && p.SlotsMoved > 0
}

// slotOwners is each pod's own slots, by its CLUSTER NODES.
func slotOwners(ctx context.Context, t *testing.T, ns string) map[string]string {
	t.Helper()
	self, _ := nodesOf(ctx, t, ns)
	out := map[string]string{}
	for pod, n := range self {
		out[pod] = n.Slots.String()
	}
	return out
}

// A scale-out 6 → 8 capped at 2000 keys/s, paused once slots have moved, then resumed:
// kubectl get shows the progress and "paused at"; while paused the slots stay where they
// are, none open and no key on a master that does not own its slot; un-pausing finishes.
func TestMigrationPauseResumeRateLimited(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	g := NewWithT(t)
	f := startFault(ctx, t, "migration-pause", withMaxKeysPerSecond(2000))
	start := time.Now()
	if out, err := stack.Kubectl("-n", f.ns, "scale", "rec/demo", "--replicas=8"); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	moving := waitProgress(ctx, t, f.ns, "slots moving", slotsMoving)
	t.Logf("moving: %+v", *moving.Status.Progress)
	g.Expect(moving.Status.Progress.KeysPerSecond).To(BeNumerically("<=", 3000), "the cap bounds a step's rate from above")
	out, err := stack.Kubectl("-n", f.ns, "get", "rec", "demo")
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("kubectl get rec:\n%s", out)
	g.Expect(out).To(ContainSubstring("PROGRESS"))
	g.Expect(out).To(MatchRegexp(`\d+/4096 slots`))

	patchCluster(t, f.ns, `{"spec":{"pause":true}}`)
	paused := waitProgress(ctx, t, f.ns, "paused in the status", func(p *redisv1alpha1.OperationProgress) bool { return p.Paused })
	g.Expect(paused.Status.Phase).To(Equal(redisv1alpha1.PhaseScaling))
	time.Sleep(3 * time.Second) // the step in flight ends within one group of slots
	g.Expect(f.integrity()).To(Succeed(), "no slot left open, no key on a master that does not own its slot")
	owners := slotOwners(ctx, t, f.ns)
	time.Sleep(3 * time.Second)
	g.Expect(slotOwners(ctx, t, f.ns)).To(Equal(owners), "no slot moves while paused")
	still := getCluster(ctx, t, f.ns, "demo").Status.Progress
	g.Expect(still.SlotsMoved).To(BeNumerically("<", 4096), "paused mid-migration")
	out, _ = stack.Kubectl("-n", f.ns, "get", "rec", "demo")
	t.Logf("paused: %+v\n%s", *still, out)
	g.Expect(out).To(ContainSubstring("paused at"))

	patchCluster(t, f.ns, `{"spec":{"pause":false}}`)
	if err := stack.WaitForPhase(ctx, f.ns, "demo", "Running", 5*time.Minute); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, f.ns, "demo").Status.Reason)
	}
	expectShape(ctx, t, f.ns, "demo", 8, 4, 4096)
	p := getCluster(ctx, t, f.ns, "demo").Status.Progress
	t.Logf("done: %+v", *p)
	g.Expect(p.FinishTime).NotTo(BeNil())
	g.Expect(p.SlotsMoved).To(BeEquivalentTo(4096))
	f.finish("pause and resume mid-migration, 2000 keys/s (6->8)", 0, time.Since(start))
}

// The default (no cap on keys per second): a plain scale-out 6 → 8 and back to 6 with the
// writer running, for the longest write gap the default gives.
func TestMigrationDefaultRateWriteGap(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	f := startFault(ctx, t, "migration-default", nil)
	start := time.Now()
	resize(ctx, t, f.ns, "demo", 8)
	expectShape(ctx, t, f.ns, "demo", 8, 4, 4096)
	t.Logf("out: %+v", *getCluster(ctx, t, f.ns, "demo").Status.Progress)
	resize(ctx, t, f.ns, "demo", 6)
	expectShape(ctx, t, f.ns, "demo", 6, 3, 5461)
	t.Logf("in: %+v", *getCluster(ctx, t, f.ns, "demo").Status.Progress)
	f.finish("default rate, 6->8->6", 0, time.Since(start))
}

// An abort: a scale-out 6 → 8 (capped at 2000 keys/s) set back to 6 with `kubectl scale`
// once slots have moved. The slots go back to the old masters, the new nodes are removed
// and the StatefulSet shrinks to 6; every key is kept.
func TestMigrationAbortScaleOut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	f := startFault(ctx, t, "migration-abort", withMaxKeysPerSecond(2000))
	start := time.Now()
	if out, err := stack.Kubectl("-n", f.ns, "scale", "rec/demo", "--replicas=8"); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	moving := waitProgress(ctx, t, f.ns, "slots moving", slotsMoving)
	t.Logf("aborting at %+v", *moving.Status.Progress)
	if out, err := stack.Kubectl("-n", f.ns, "scale", "rec/demo", "--replicas=6"); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	took := backToRunning(ctx, t, f.ns, start, 5*time.Minute)
	expectShape(ctx, t, f.ns, "demo", 6, 3, 5461)
	NewWithT(t).Expect(statefulSetReplicas(ctx, t, f.ns, "demo")).To(BeEquivalentTo(6))
	t.Logf("after the abort: %+v", *getCluster(ctx, t, f.ns, "demo").Status.Progress)
	f.finish("abort: 6->8 set back to 6 mid-migration", 0, took)
}

// AssignReceive end to end: 6 → 8 with one entry giving the new master 3000 slots from
// demo-0 and demo-1; demo-2 keeps every slot it had.
func TestMigrationAssignReceive(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	g := NewWithT(t)
	f := startFault(ctx, t, "migration-assign", nil)
	before := slotOwners(ctx, t, f.ns)
	start := time.Now()
	patchCluster(t, f.ns, `{"spec":{"replicas":8,"updateStrategy":{"type":"AssignReceive","assignStrategies":[{"slots":3000,"fromReplicas":"demo-0,demo-1"}]}}}`)
	if err := stack.WaitForPhase(ctx, f.ns, "demo", "Scaling", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitForPhase(ctx, f.ns, "demo", "Running", 5*time.Minute); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, f.ns, "demo").Status.Reason)
	}
	took := time.Since(start)
	after := slotOwners(ctx, t, f.ns)
	g.Expect(after["demo-2"]).To(Equal(before["demo-2"]), "demo-2 gives nothing")
	var counts []string
	newMasters := 0
	self, _ := nodesOf(ctx, t, f.ns)
	for pod, n := range self {
		counts = append(counts, fmt.Sprintf("%s=%d", pod, n.Slots.Count()))
		if (pod == "demo-6" || pod == "demo-7") && n.Master {
			newMasters++
			g.Expect(n.Slots.Count()).To(Equal(3000))
		}
	}
	t.Logf("slots: %s", strings.Join(counts, " "))
	g.Expect(newMasters).To(Equal(1))
	g.Expect(getCluster(ctx, t, f.ns, "demo").Status.Masters).To(BeEquivalentTo(4))
	g.Expect(getCluster(ctx, t, f.ns, "demo").Status.Progress.SlotsMoved).To(BeEquivalentTo(3000))
	f.finish("AssignReceive 6->8: 3000 slots from demo-0 and demo-1", 0, took)
}
