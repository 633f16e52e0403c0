//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// The StatefulSet scaled by hand: `kubectl scale sts demo --replicas=4` on the 6-pod
// cluster, with the writer running. The StatefulSet controller may delete demo-4 and
// demo-5 before the operator notices; the operator puts the StatefulSet back to 6 (the
// size the RedisCluster holds) with a Warning Reverted, the pods come back (empty: the
// demo uses emptyDir) and healing joins them. No key and no acknowledged write may be lost.
func TestFaultStatefulSetScaledByHand(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	g := NewWithT(t)
	f := startFault(ctx, t, "fault-scale-sts", nil)
	start := time.Now()
	if _, err := stack.Kubectl("-n", f.ns, "scale", "sts", "demo", "--replicas=4"); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() int32 { return statefulSetReplicas(ctx, t, f.ns, "demo") }, 30*time.Second, 100*time.Millisecond).
		Should(BeEquivalentTo(6), "the operator puts the StatefulSet back")
	t.Logf("StatefulSet back at 6 pods %.1fs after kubectl scale", time.Since(start).Seconds())
	time.Sleep(2 * time.Second) // pods the StatefulSet controller deleted are seen going
	took := backToRunning(ctx, t, f.ns, start, faultRecovery)
	evs, err := stack.Events(ctx, getCluster(ctx, t, f.ns, "demo"))
	g.Expect(err).NotTo(HaveOccurred())
	var reverted []string
	for _, e := range evs {
		if e.Type == "Warning" && e.Reason == "Reverted" {
			reverted = append(reverted, e.Message)
		}
	}
	g.Expect(reverted).To(ContainElement(ContainSubstring("resized to 4 pods outside the operator")))
	t.Logf("events: %v", reverted)
	f.finish("StatefulSet scaled by hand 6->4", 0, took)
}
