//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// The fleet tests run operators of their own, held to their namespaces, so the suite's
// shared operator is stopped first (the next test that needs it starts it again).

// ownOperator installs the CRD (through the shared operator, then stopped) and starts an
// operator process with args, stopped by PID when the test ends.
func ownOperator(t *testing.T, args ...string) *framework.Operator {
	t.Helper()
	operator(t)
	stopOperator()
	op, err := stack.StartOperator(append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("operator pid %d, log: %s", op.PID(), op.Logs)
	t.Cleanup(func() { _ = op.Stop() })
	return op
}

// formIn creates namespace ns (deleted when the test ends), applies the demo sample into
// it and waits until it is Running and formed.
func formIn(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	testNamespace(ctx, t, ns)
	applyCluster(ctx, t, demoSample, ns, noPassword(nil))
	if err := stack.WaitForPhase(ctx, ns, "demo", "Running", formTime); err != nil {
		t.Fatal(err)
	}
	eventuallyFormed(ctx, t, ns, "demo")
}

// annotateClientService changes spec.clientService.annotations of the demo cluster in ns
// and returns how long it took until Service demo-client carried the new value: the
// change-to-action latency of a spec change the operator acts on without touching Redis.
func annotateClientService(ctx context.Context, t *testing.T, ns, value string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	patchSpec(ctx, t, ns, "demo", fmt.Sprintf(`{"clientService":{"annotations":{"e2e.fleet/round":%q}}}`, value))
	c := kubeClient(t)
	for time.Since(start) < timeout {
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-client"}, svc); err == nil && svc.Annotations["e2e.fleet/round"] == value {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("Service %s/demo-client did not get annotation e2e.fleet/round=%s within %v", ns, value, timeout)
	return 0
}

// podAddrs is "ip:6379" of the demo cluster's pods in ns.
func podAddrs(ctx context.Context, t *testing.T, ns string) []string {
	t.Helper()
	addrs, err := stack.PodAddrs(ctx, ns, selectorOf("demo"))
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// logLine is the part of one JSON line of the operator's log the tests read.
type logLine struct {
	TS      string `json:"ts"` // RFC 3339, to the second
	Msg     string `json:"msg"`
	Cluster struct {
		Namespace string `json:"namespace"`
	} `json:"RedisCluster"`
}

// operatorLog parses the operator's JSON log; lines that are not JSON are skipped.
func operatorLog(t *testing.T, path string) []logLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []logLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// logSays reports whether any line of the operator's log holds msg, whatever the case
// (leader election logs through klog, not as JSON).
func logSays(t *testing.T, path, msg string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(strings.ToLower(string(b)), strings.ToLower(msg))
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// TestFleetStuckClusterIsolation: with every redis-server of cluster A stopped (SIGSTOP:
// the process holds its sockets and never answers), a spec change to cluster B is acted
// upon while A's reconciles go on timing out. B's change-to-action latency with and
// without A stuck is logged, not asserted (the machine is shared).
func TestFleetStuckClusterIsolation(t *testing.T) {
	ctx := context.Background()
	nsA, nsB := "e2e-fleet-stuck-a", "e2e-fleet-stuck-b"
	// A short health check keeps A's reconciles coming, each waiting on its stopped nodes.
	op := ownOperator(t, "--namespaces="+nsA+","+nsB, "--health-check-interval=2s", "--zap-log-level=debug")
	formIn(ctx, t, nsA)
	formIn(ctx, t, nsB)

	const rounds = 3
	var free, stuck []time.Duration
	for i := 0; i < rounds; i++ {
		free = append(free, annotateClientService(ctx, t, nsB, fmt.Sprintf("free-%d", i), time.Minute))
	}

	var pids []int
	for _, p := range podNames(ctx, t, nsA) {
		pid, err := stack.PodPID(nsA, p)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	resume := func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("failed to stop redis-server %d: %v", pid, err)
		}
	}
	stoppedAt := time.Now()
	// Let A's reconciles start hanging on its stopped nodes before B is changed.
	waitForReconcileOf(t, op.Logs, nsA, stoppedAt.Add(2*time.Second), time.Minute)

	for i := 0; i < rounds; i++ {
		stuck = append(stuck, annotateClientService(ctx, t, nsB, fmt.Sprintf("stuck-%d", i), time.Minute))
	}
	bDone := time.Now()
	if err := stack.WaitForPhase(ctx, nsB, "demo", "Running", time.Minute); err != nil {
		t.Fatal(err)
	}
	// A is still stopped and still reconciled (each one waiting on its nodes) after B's
	// changes were all acted upon: B was not queued behind A.
	waitForReconcileOf(t, op.Logs, nsA, bDone, time.Minute)
	for _, pid := range pids {
		if state := procState(t, pid); state != "T" {
			t.Fatalf("redis-server %d of A is in state %q, not stopped, after B's changes", pid, state)
		}
	}
	t.Logf("B change-to-action (client Service annotation), %d rounds: A healthy %v (median %v), A stopped %v (median %v)",
		rounds, free, median(free), stuck, median(stuck))

	resume()
	if err := stack.WaitForPhase(ctx, nsA, "demo", "Running", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	eventuallyFormed(ctx, t, nsA, "demo")
	eventuallyFormed(ctx, t, nsB, "demo")
}

// waitForReconcileOf waits until the operator's debug log has a "Decided" line of a
// cluster in ns stamped after since.
func waitForReconcileOf(t *testing.T, logs, ns string, since time.Time, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, l := range operatorLog(t, logs) {
			// The stamp has whole seconds: a line of the second after since's is later.
			ts, err := time.Parse(time.RFC3339, l.TS)
			if err == nil && l.Msg == "Decided" && l.Cluster.Namespace == ns && !ts.Before(since.Truncate(time.Second).Add(time.Second)) {
				return
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("no reconcile of a cluster in %s after %s within %v", ns, since.Format(time.TimeOnly), timeout)
}

func podNames(ctx context.Context, t *testing.T, ns string) []string {
	t.Helper()
	pods, err := stack.Pods(ctx, ns, selectorOf("demo"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// procState is the state letter of /proc/PID/stat ("T" stopped).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])[0]
}

// TestFleetLeaderHandover: two operators with --leader-elect and a 4 s lease; the leader
// is killed (SIGKILL by PID), the standby takes the lease and acts on a spec change, and
// the Redis cluster saw no write and no epoch change across the handover.
func TestFleetLeaderHandover(t *testing.T) {
	ctx := context.Background()
	ns := "e2e-fleet-leader"
	const lease = 4 * time.Second
	args := []string{"--namespaces=" + ns, "--leader-elect", "--leader-election-namespace=default",
		"--leader-election-id=e2e-fleet-leader", "--leader-elect-lease-duration=" + lease.String(),
		"--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s"}
	first := ownOperator(t, args...)
	second, err := stack.StartOperator(append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Stop() })
	formIn(ctx, t, ns)

	const acquired = "successfully acquired lease"
	leader, standby := first, second
	switch a, b := logSays(t, first.Logs, acquired), logSays(t, second.Logs, acquired); {
	case a && b:
		t.Fatal("both operators say they acquired the lease")
	case b:
		leader, standby = second, first
	case !a:
		t.Fatal("no operator says it acquired the lease, yet the cluster formed")
	}
	addrs := podAddrs(ctx, t, ns)
	before, err := framework.ReadStats(ctx, addrs, "")
	if err != nil {
		t.Fatal(err)
	}

	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	took := annotateClientService(ctx, t, ns, "after-handover", lease+time.Minute)
	if !logSays(t, standby.Logs, acquired) {
		t.Fatalf("the standby acted but its log does not say it acquired the lease (log %s)", standby.Logs)
	}
	t.Logf("leader pid %d killed; the standby (pid %d) acted on a spec change %v after the kill (lease %v)", leader.PID(), standby.PID(), took, lease)
	if err := stack.WaitForPhase(ctx, ns, "demo", "Running", time.Minute); err != nil {
		t.Fatal(err)
	}
	eventuallyFormed(ctx, t, ns, "demo")
	// A few health checks of the new leader, at its default 30 s interval, fall in here.
	time.Sleep(time.Until(killed.Add(lease + 35*time.Second)))
	after, err := framework.ReadStats(ctx, addrs, "")
	if err != nil {
		t.Fatal(err)
	}
	d := framework.Delta(before, after)
	t.Logf("across the handover: %d Redis commands, %d writes %v, epochs changed on %v", d.Commands, d.Writes, d.WritesByCommand, d.EpochChanged)
	if d.Writes != 0 || len(d.EpochChanged) != 0 {
		t.Fatalf("the handover wrote to Redis: %d writes %v, epochs changed on %v", d.Writes, d.WritesByCommand, d.EpochChanged)
	}
}
