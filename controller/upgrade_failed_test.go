package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// An upgrade stopped on a crash-looping pod outlives --upgrade-timeout and the cluster
// goes Failed. Setting the spec back then must still roll the bad pod back by itself: the
// set-back template is applied in Failed, the failing pod (now on an outdated revision) is
// replaced, and once it is back the cluster recovers to Running with every key.
func TestSpecSetBackRecoversAnUpgradeThatTimedOutWhileStopped(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc, servers := formRunning(t, h, redistest.Config{NodeTimeout: time.Second})
	cc := clusterClient(t, redistest.Addrs(servers))
	for i := 0; i < 300; i++ {
		g.Expect(cc.Set(ctx, fmt.Sprintf("k-%d", i), i, 0).Err()).To(Succeed())
	}
	enterUpgrade(t, h, rc, "7.4")
	h.reconcile(rc)
	gone := deletedPods(t, rc)
	g.Expect(gone).To(HaveLen(1), get(t, rc).Status.Reason)
	bad, _ := ordinal(rc.Name, gone[0])
	servers[bad].Stop()
	recreatePod(t, rc, gone[0], servers[bad].Addr, "rev-new", true)
	h.reconcile(rc)
	g.Expect(get(t, rc).Status.Reason).To(ContainSubstring("Upgrade stopped: pod " + gone[0]))

	// The stop outlives the upgrade timeout (1 min in the harness): Failed.
	later := time.Now().Add(2 * time.Minute)
	h.r.now = func() time.Time { return later }
	h.reconcileUntil(rc, redisv1alpha1.PhaseFailed, 3)
	for i := 0; i < 3; i++ {
		h.reconcile(rc)
	}
	g.Expect(deletedPods(t, rc)).To(BeEmpty(), "Failed deletes nothing before the spec changes")

	// The spec is set back: the template is applied in Failed, the StatefulSet controller
	// computes the old revision again, and the failing pod is replaced.
	h.events()
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Version = "7.2" })
	h.reconcile(rc)
	g.Expect(liveStatefulSet(t, rc).Spec.Template.Spec.Containers[0].Image).To(HaveSuffix(":7.2"), "the set-back template is applied in Failed")
	setRevision(t, rc, "rev-old")
	h.reconcile(rc)
	g.Expect(deletedPods(t, rc)).To(ConsistOf(gone[0]), get(t, rc).Status.Reason)
	var replaced []string
	for _, e := range h.events() {
		if strings.Contains(e, "Replacing "+gone[0]+", which is crash-looping") {
			replaced = append(replaced, e)
		}
	}
	g.Expect(replaced).To(HaveLen(1))

	back, err := redistest.StartIn(servers[bad].Dir, redistest.Config{NodeTimeout: time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(back.Stop)
	recreatePod(t, rc, gone[0], back.Addr, "rev-old", false)
	h.reconcileUntil(rc, redisv1alpha1.PhaseRunning, 60)
	addrs := redistest.Addrs(servers)
	addrs[bad] = back.Addr
	check := clusterClient(t, addrs)
	for i := 0; i < 300; i++ {
		g.Expect(check.Get(ctx, fmt.Sprintf("k-%d", i)).Int()).To(Equal(i))
	}
}
