//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// TestAtomicSlotMigration runs the demo cluster on Valkey 9.1, where every node moves slots
// itself (CLUSTER MIGRATESLOTS), with the fault suite's 100,000 keys and writer, on one
// cluster: a scale-out 6->8 and a scale-in 8->6 undisturbed, then a scale-out with the
// operator SIGKILLed while the servers' jobs run (the restarted operator adopts them), then
// a scale-in with the target of a running job failed over to its replica (the job fails,
// the slots stay with their source, the next one goes to the promoted replica). No key and
// no acknowledged write may be lost; each part's longest write gap is logged. The servers'
// own logs (CLUSTER GETSLOTMIGRATIONS) must show the moves, and no job a second start of
// the same slots failed.
func TestAtomicSlotMigration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	op := operator(t)
	began := time.Now()
	f := startFault(ctx, t, "asm", withServer("valkey/valkey", "9.1"))
	expectServer(ctx, t, f.ns, "demo", "valkey 9.1.2")
	f.w.TakeLongestGap()

	out := resize(ctx, t, f.ns, "demo", 8)
	expectShape(ctx, t, f.ns, "demo", 8, 4, 4096)
	gapOut := f.w.TakeLongestGap()
	in := resize(ctx, t, f.ns, "demo", 6)
	expectShape(ctx, t, f.ns, "demo", 6, 3, 5461)
	gapIn := f.w.TakeLongestGap()
	exports := asmJobs(ctx, t, f.ns, "EXPORT", "success", kept)
	if exports == 0 {
		t.Fatal("no slot migration job in the servers' logs: the slots did not move with CLUSTER MIGRATESLOTS")
	}
	t.Logf("ASM: scale-out 6->8 %.1fs (longest write gap %v), scale-in 8->6 %.1fs (gap %v); %d export jobs succeeded",
		out.Seconds(), gapOut, in.Seconds(), gapIn, exports)

	// The operator SIGKILLed while a job runs. Each job's snapshot is slowed to 300 µs a key
	// (rdb-key-save-delay, a test setting the slot migration's child honours), about 2.5 s
	// for the ~8,300 keys each source gives, so the kill lands while jobs run rather than
	// after them.
	slowSnapshots(ctx, t, f.ns, 300)
	start := time.Now()
	if out, err := stack.Kubectl("-n", f.ns, "scale", "rec/demo", "--replicas=8"); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	waitForJob(ctx, t, f.ns, "EXPORT")
	g := NewWithT(t)
	g.Expect(op.Kill()).To(Succeed())
	g.Eventually(op.Running, 10*time.Second, 100*time.Millisecond).Should(BeFalse())
	t.Logf("operator SIGKILLed while the servers move slots")
	g.Expect(op.Restart()).To(Succeed())
	if err := stack.WaitForObservedPhase(ctx, f.ns, "demo", "Running", 4*time.Minute); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, f.ns, "demo").Status.Reason)
	}
	expectShape(ctx, t, f.ns, "demo", 8, 4, 4096)
	t.Logf("ASM: scale-out 6->8 with the operator killed mid-move %.1fs (gap %v)", time.Since(start).Seconds(), f.w.TakeLongestGap())

	// The target of a running job failed over. The leaving master's three jobs (~8,300 keys
	// each, one snapshot at a time) are slowed to 500 µs a key, about 12 s in all, so the
	// failover, which takes a second or two, lands while one runs.
	failedBefore := asmJobs(ctx, t, f.ns, "IMPORT", "failed", kept)
	slowSnapshots(ctx, t, f.ns, 500)
	start = time.Now()
	if out, err := stack.Kubectl("-n", f.ns, "scale", "rec/demo", "--replicas=6"); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	target := waitForJob(ctx, t, f.ns, "IMPORT")
	failOverMaster(ctx, t, f.ns, target, "imports slots")
	if err := stack.WaitForObservedPhase(ctx, f.ns, "demo", "Running", 4*time.Minute); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, f.ns, "demo").Status.Reason)
	}
	expectShape(ctx, t, f.ns, "demo", 6, 3, 5461)
	slowSnapshots(ctx, t, f.ns, 0)
	t.Logf("ASM: scale-in 8->6 with a target failed over mid-move %.1fs (gap %v)", time.Since(start).Seconds(), f.w.TakeLongestGap())
	// The import whose target failed over failed on the kept pods (the slots stayed with
	// their source, and moved again to the promoted replica): the failover did land
	// mid-move. (The source's side of it went with the leaving pod.)
	if n := asmJobs(ctx, t, f.ns, "IMPORT", "failed", kept) - failedBefore; n < 1 {
		t.Errorf("no import job failed: the failover did not land while a job ran")
	} else {
		t.Logf("%d import job(s) failed when their target failed over, and the slots moved again", n)
	}
	f.finish("Valkey 9.1 atomic slot migration: 6->8->6, 6->8 operator killed, 8->6 target failed over", 0, time.Since(began))
}

// slowSnapshots sets rdb-key-save-delay (microseconds a key) on every pod.
func slowSnapshots(ctx context.Context, t *testing.T, ns string, us int) {
	t.Helper()
	for pod, ip := range podIPs(ctx, t, ns, "demo") {
		c := framework.NodeClient(ip, "")
		err := c.ConfigSet(ctx, "rdb-key-save-delay", fmt.Sprint(us)).Err()
		c.Close()
		if err != nil {
			t.Fatalf("%s: CONFIG SET rdb-key-save-delay: %v", pod, err)
		}
	}
}

// failOverMaster promotes the replica of the master pod with CLUSTER FAILOVER; doing says
// what the master was doing, for the log.
func failOverMaster(ctx context.Context, t *testing.T, ns, pod, doing string) {
	t.Helper()
	self, addrs := nodesOf(ctx, t, ns)
	replica := ""
	for p, n := range self {
		if n.Replica && n.MasterID == self[pod].ID {
			replica = p
		}
	}
	if replica == "" {
		t.Fatalf("the master %s has no replica", pod)
	}
	attempts := failOverUntilPromoted(ctx, t, addrs[replica])
	t.Logf("CLUSTER FAILOVER on %s, replica of %s which %s: promoted after %d attempt(s)", replica, pod, doing, attempts)
}

// kept: the pods a resize back to 6 keeps.
func kept(pod string) bool { return pod < "demo-6" }

// asmJobs counts, over the pods in, the servers' slot migration jobs of this operation and
// state, and fails the test on a job that failed because the same slots were started
// twice.
func asmJobs(ctx context.Context, t *testing.T, ns, operation, state string, in func(pod string) bool) int {
	t.Helper()
	n := 0
	for pod, ip := range podIPs(ctx, t, ns, "demo") {
		if !in(pod) {
			continue
		}
		for _, j := range jobsOf(ctx, t, pod, ip) {
			if strings.Contains(j.Message, "already") {
				t.Errorf("%s: job %s %s: %s", pod, j.Name, j.State, j.Message)
			}
			if j.Operation == operation && j.State == state {
				n++
			}
		}
	}
	return n
}

func jobsOf(ctx context.Context, t *testing.T, pod, ip string) []redis.SlotMigration {
	c := framework.NodeClient(ip, "")
	defer c.Close()
	reply, err := c.Do(ctx, "cluster", "getslotmigrations").Result()
	if err != nil {
		return nil // restarting, or a replica being promoted
	}
	jobs, err := redis.ParseSlotMigrations(reply)
	if err != nil {
		t.Fatalf("%s: %v", pod, err)
	}
	return jobs
}

// waitForJob waits until some pod runs a slot migration job of this operation and returns
// the pod.
func waitForJob(ctx context.Context, t *testing.T, ns, operation string) string {
	t.Helper()
	pod := ""
	NewWithT(t).Eventually(func() bool {
		self, _ := nodesOf(ctx, t, ns)
		for p, ip := range podIPs(ctx, t, ns, "demo") {
			// A master's job only: a replica lists its master's jobs too, and the
			// failover this is for needs the master (CI once picked a replica).
			if n, ok := self[p]; !ok || !n.Master {
				continue
			}
			for _, j := range jobsOf(ctx, t, p, ip) {
				if j.Operation == operation && !j.Finished() {
					pod = p
					return true
				}
			}
		}
		return false
	}, 3*time.Minute, 20*time.Millisecond).Should(BeTrue(), fmt.Sprintf("an %s job runs", operation))
	return pod
}
