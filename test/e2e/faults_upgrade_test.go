//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// A broken template, then reverted: the spec points the demo cluster at a user ConfigMap
// with a directive Redis does not know, so a pod restarted on the new template crash-loops.
// The roll must stop after that first pod, say so once, and keep the rest serving; setting
// the spec back must bring every pod back Ready on the old revision with no pod deleted by
// hand, and no pre-loaded key or acknowledged write lost.
func TestFaultBrokenTemplateReverted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	f := startFault(ctx, t, "fault-broken-template", nil)
	g := NewWithT(t)
	kc := kubeClient(t)
	ns, name := f.ns, "demo"
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-broken-conf"},
		Data: map[string]string{"redis.conf": "maxmemory-policy noeviction\nno-such-directive yes\n"}}
	g.Expect(kc.Create(ctx, bad)).To(Succeed())
	sts := &appsv1.StatefulSet{}
	g.Expect(kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	goodRev := sts.Status.UpdateRevision

	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(framework.RedisClusterGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	start := time.Now()
	g.Expect(kc.Patch(ctx, u, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/spec/pod/0/configmap","value":"demo-broken-conf"}]`)))).To(Succeed())
	var reason string
	g.Eventually(func() string {
		reason = getCluster(ctx, t, ns, name).Status.Reason
		return reason
	}, 3*time.Minute, time.Second).Should(ContainSubstring("Upgrade stopped: pod "))
	stoppedAfter := time.Since(start)
	t.Logf("stopped %.1fs after the patch: %s", stoppedAfter.Seconds(), reason)
	g.Expect(reason).To(ContainSubstring("on the new template is crash-looping"))

	// Stopped means stopped: 20 s later no other pod was restarted, one pod runs the
	// broken revision, and the Warning was emitted once.
	time.Sleep(20 * time.Second)
	g.Expect(getCluster(ctx, t, ns, name).Status.Phase).To(Equal(redisv1alpha1.PhaseUpgrading))
	g.Expect(kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	badRev := sts.Status.UpdateRevision
	g.Expect(badRev).NotTo(Equal(goodRev))
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	var onBad []string
	for _, p := range pods {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] == badRev {
			onBad = append(onBad, p.Name)
		}
	}
	g.Expect(onBad).To(HaveLen(1), "pods on the broken revision")
	g.Expect(reason).To(ContainSubstring("pod " + onBad[0] + " on the new template"))
	restarts, stopped, _ := upgradeEvents(ctx, t, ns, name)
	g.Expect(restarts).To(HaveLen(1), "the roll restarted one pod before stopping")
	g.Expect(stopped).To(HaveLen(1), "one Warning for the stop")

	// Revert: the spec as it was. No pod is deleted by hand.
	revert := time.Now()
	g.Expect(kc.Patch(ctx, u, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/pod/0/configmap"}]`)))).To(Succeed())
	if err := stack.WaitForPhase(ctx, ns, name, "Running", 5*time.Minute); err != nil {
		t.Fatalf("%v: %s", err, getCluster(ctx, t, ns, name).Status.Reason)
	}
	took := backToRunning(ctx, t, ns, revert, 2*time.Minute)
	g.Expect(kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	g.Expect(sts.Status.UpdateRevision).To(Equal(goodRev), "the StatefulSet is back on the old revision")
	pods, err = stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(6))
	for _, p := range pods {
		g.Expect(framework.PodReady(&p)).To(BeTrue(), "%s Ready", p.Name)
		g.Expect(p.Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(goodRev), "revision of %s", p.Name)
	}
	_, _, replaced := upgradeEvents(ctx, t, ns, name)
	g.Expect(replaced).To(ContainElement(HavePrefix("Replacing " + onBad[0] + ", which is crash-looping")))
	t.Logf("broken template: stopped %.1fs after the patch, Running %.1fs after the revert; %v", stoppedAfter.Seconds(), took.Seconds(), replaced)
	f.finish("broken template, then reverted", 0, took)
}

// upgradeEvents lists the cluster's Upgrade restarts, UpgradeStopped Warnings (counting
// repeats the recorder folded into one Event) and rollback replacements.
func upgradeEvents(ctx context.Context, t *testing.T, ns, name string) (restarts, stopped, replaced []string) {
	t.Helper()
	evs, err := stack.Events(ctx, getCluster(ctx, t, ns, name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		switch {
		case e.Reason == "Upgrade" && strings.HasPrefix(e.Message, "Restarting"):
			restarts = append(restarts, e.Message)
		case e.Reason == "UpgradeStopped" && e.Type == corev1.EventTypeWarning:
			for i := int32(0); i < max(e.Count, 1); i++ {
				stopped = append(stopped, e.Message)
			}
		case e.Reason == "Upgrade" && strings.HasPrefix(e.Message, "Replacing"):
			replaced = append(replaced, e.Message)
		}
	}
	return restarts, stopped, replaced
}

// A reshard someone else started and abandoned (SETSLOT IMPORTING/MIGRATING by hand and
// half of the slot's keys MIGRATEd), then at once an upgrade: a template change that rolls
// every pod. The open slot keeps the cluster from being whole, which the roll waits for:
// the slot must be finished first (as redis-cli --cluster fix does), then the roll goes
// through; it must not wait for ever.
func TestFaultForeignOpenSlotThenUpgrade(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	f := startFault(ctx, t, "fault-foreign-upgrade", nil)
	g := NewWithT(t)
	kc := kubeClient(t)
	ns, name := f.ns, "demo"
	sts := &appsv1.StatefulSet{}
	g.Expect(kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	oldRev := sts.Status.UpdateRevision
	start := time.Now()
	slot := openForeignSlot(ctx, t, ns)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(framework.RedisClusterGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	patch := `[{"op":"replace","path":"/spec/pod/0/env/0/value","value":"96mb"}]`
	g.Expect(kc.Patch(ctx, u, client.RawPatch(types.JSONPatchType, []byte(patch)))).To(Succeed())
	g.Eventually(func() string { return string(getCluster(ctx, t, ns, name).Status.Phase) }, time.Minute, 100*time.Millisecond).
		Should(Equal(string(redisv1alpha1.PhaseUpgrading)))
	if err := stack.WaitForPhase(ctx, ns, name, "Running", 8*time.Minute); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, ns, name).Status.Reason)
	}
	took := backToRunning(ctx, t, ns, start, 2*time.Minute)
	g.Expect(kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	newRev := sts.Status.UpdateRevision
	g.Expect(newRev).NotTo(Equal(oldRev))
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(6))
	for _, p := range pods {
		g.Expect(p.Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(newRev), "revision of %s", p.Name)
	}
	restarts, _, _ := upgradeEvents(ctx, t, ns, name)
	evs, err := stack.Events(ctx, getCluster(ctx, t, ns, name))
	g.Expect(err).NotTo(HaveOccurred())
	var fixed []string
	for _, e := range evs {
		if strings.Contains(e.Message, fmt.Sprintf("Slot %d:", slot)) {
			fixed = append(fixed, e.Message)
		}
	}
	g.Expect(fixed).NotTo(BeEmpty(), "a FixSlot event for slot %d", slot)
	t.Logf("slot %d: %v; %d pods restarted on the new template", slot, fixed, len(restarts))
	f.finish(fmt.Sprintf("foreign open slot, then upgrade (all 6 pods rolled in %.1fs)", took.Seconds()), 0, took)
}
