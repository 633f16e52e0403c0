//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// The upgrade suite: a template change on a formed cluster is rolled by the operator, one
// pod at a time, each master failed over to its updated replica before its pod restarts,
// while a client keeps writing.

// writer SETs upg-w-<n> through a cluster client whose slot table is rebuilt from the pods'
// current addresses (restarted pods come back at new ones) until stopped, counting failures.
type writer struct {
	mu     sync.Mutex
	ok     []string
	failed int
	errs   map[string]int
	// maxGap is the longest time between two acknowledged writes.
	maxGap time.Duration
	lastOK time.Time
}

func (w *writer) run(ctx context.Context, ns, name string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	f := redis.NewFactory(redis.Options{})
	defer f.Close()
	c := goredis.NewClusterClient(&goredis.ClusterOptions{
		ClusterSlots: func(ctx context.Context) ([]goredis.ClusterSlot, error) {
			addrs, err := stack.PodAddrs(ctx, ns, selectorOf(name))
			if err != nil {
				return nil, err
			}
			return redis.ClusterSlots(ctx, f, addrs)
		},
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
	defer c.Close()
	// Bounded: at most 20 000 writes (about 7 minutes at this pace) even if never stopped.
	for i := 0; i < 20000; i++ {
		select {
		case <-stop:
			return
		default:
		}
		key := fmt.Sprintf("upg-w-%d", i)
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := c.Set(wctx, key, i, 0).Err()
		cancel()
		w.mu.Lock()
		if err != nil {
			w.failed++
			msg := err.Error()
			if len(msg) > 60 {
				msg = msg[:60]
			}
			w.errs[msg]++
		} else {
			w.ok = append(w.ok, key)
			now := time.Now()
			if !w.lastOK.IsZero() && now.Sub(w.lastOK) > w.maxGap {
				w.maxGap = now.Sub(w.lastOK)
			}
			w.lastOK = now
		}
		w.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUpgradeFailsMastersOverBeforeRestart changes the demo sample's MAXMEMORY (a pod
// template change) and expects Upgrading then Running, every pod on the new revision and
// running with the new setting, every key kept, and the failovers reported as events.
func TestUpgradeFailsMastersOverBeforeRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns, name := "e2e-upgrade", "demo"
	formDemo(ctx, t, ns, nil)
	writeKeys(ctx, t, ns, name, "upg", upgradeKeys)

	w := &writer{errs: map[string]int{}}
	stop, done := make(chan struct{}), make(chan struct{})
	go w.run(ctx, ns, name, stop, done)
	defer func() {
		select {
		case <-done:
		default:
			close(stop)
			<-done
		}
	}()
	time.Sleep(500 * time.Millisecond)

	start := time.Now()
	// A JSON patch: a merge patch would replace the whole pod list.
	rc := getCluster(ctx, t, ns, name)
	g0 := NewWithT(t)
	g0.Expect(rc.Spec.Pod[0].Env[0].Name).To(Equal("MAXMEMORY"))
	g0.Expect(rc.Spec.Pod[0].Volumes.Type).To(Equal(redisv1alpha1.VolumeTypeHostPath))
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(framework.RedisClusterGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	patch := `[{"op":"replace","path":"/spec/pod/0/env/0/value","value":"32mb"}]`
	g0.Expect(kubeClient(t).Patch(ctx, u, client.RawPatch(types.JSONPatchType, []byte(patch)))).To(Succeed())
	if err := stack.WaitForPhase(ctx, ns, name, "Upgrading", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitForPhase(ctx, ns, name, "Running", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	close(stop)
	<-done

	g := NewWithT(t)
	eventuallyFormed(ctx, t, ns, name)
	sts := &appsv1.StatefulSet{}
	g.Expect(kubeClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	g.Expect(sts.Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteStatefulSetStrategyType))
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(6))
	for _, p := range pods {
		g.Expect(p.Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(sts.Status.UpdateRevision), "revision of %s", p.Name)
		c := framework.NodeClient(p.Status.PodIP, "")
		v, err := c.ConfigGet(ctx, "maxmemory").Result()
		c.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v).To(HaveLen(2))
		g.Expect(v[1]).To(Equal("33554432"), "maxmemory on %s", p.Name)
	}
	expectKeys(ctx, t, ns, name, "upg", upgradeKeys, w.ok)

	evs, err := stack.Events(ctx, getCluster(ctx, t, ns, name))
	g.Expect(err).NotTo(HaveOccurred())
	var failovers, restarts []string
	for _, e := range evs {
		switch {
		case e.Reason == "Upgrade" && strings.HasPrefix(e.Message, "Failing over"):
			failovers = append(failovers, e.Message)
		case e.Reason == "Upgrade" && strings.HasPrefix(e.Message, "Restarting"):
			restarts = append(restarts, e.Message)
		}
	}
	g.Expect(failovers).To(HaveLen(3), "one failover per master")
	g.Expect(failovers).To(HaveEach(HaveSuffix("before its restart")))
	g.Expect(restarts).To(HaveLen(6), "one restart per pod")
	t.Logf("upgrade: Upgrading then Running %.1fs after the patch; writes during it: %d ok, %d failed %v, longest write gap %s",
		took.Seconds(), len(w.ok), w.failed, w.errs, w.maxGap.Round(time.Millisecond))
	t.Logf("events: %v; %v", failovers, restarts)
	g.Expect(getCluster(ctx, t, ns, name).Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
}

const upgradeKeys = 200

// brokenKeys are preloaded before the broken upgrade, pipelined.
const brokenKeys = 100000

// preloadKeys writes PREFIX-0 … PREFIX-(n-1), each holding its number, in pipelines of 1000.
func preloadKeys(ctx context.Context, t *testing.T, ns, name, prefix string, n int) {
	t.Helper()
	c, err := stack.RedisClient(ctx, ns, selectorOf(name), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < n; i += 1000 {
		p := c.Pipeline()
		for j := i; j < i+1000 && j < n; j++ {
			p.Set(ctx, fmt.Sprintf("%s-%d", prefix, j), j, 0)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatalf("preloading %s-%d…: %v", prefix, i, err)
		}
	}
}

// countLost reads back PREFIX-0 … PREFIX-(n-1) in pipelines and every key in written,
// returning how many are missing or wrong.
func countLost(ctx context.Context, t *testing.T, ns, name, prefix string, n int, written []string) (preloaded, acked int) {
	t.Helper()
	c, err := stack.RedisClient(ctx, ns, selectorOf(name), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < n; i += 1000 {
		p := c.Pipeline()
		var cmds []*goredis.StringCmd
		for j := i; j < i+1000 && j < n; j++ {
			cmds = append(cmds, p.Get(ctx, fmt.Sprintf("%s-%d", prefix, j)))
		}
		_, _ = p.Exec(ctx)
		for k, cmd := range cmds {
			if v, err := cmd.Int(); err != nil || v != i+k {
				preloaded++
			}
		}
	}
	for i := 0; i < len(written); i += 1000 {
		p := c.Pipeline()
		var cmds []*goredis.StringCmd
		for _, k := range written[i:min(i+1000, len(written))] {
			cmds = append(cmds, p.Get(ctx, k))
		}
		_, _ = p.Exec(ctx)
		for _, cmd := range cmds {
			if cmd.Err() != nil {
				acked++
			}
		}
	}
	return preloaded, acked
}

// TestUpgradeBrokenTemplateThenReverted points the demo cluster at a user ConfigMap with a
// directive Redis does not know, so every pod restarted on the new template crash-loops:
// the roll must stop after the first such pod, say so once, and keep the rest serving.
// Setting the spec back must then bring every pod back Ready on the old revision with no
// pod deleted by hand, and no preloaded key or acknowledged write lost.
func TestUpgradeBrokenTemplateThenReverted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ns, name := "e2e-upgrade-broken", "demo"
	formDemo(ctx, t, ns, nil)
	g := NewWithT(t)
	kc := kubeClient(t)
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-broken-conf"},
		Data: map[string]string{"redis.conf": "maxmemory-policy noeviction\nno-such-directive yes\n"}}
	g.Expect(kc.Create(ctx, bad)).To(Succeed())
	sts := &appsv1.StatefulSet{}
	g.Expect(kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	goodRev := sts.Status.UpdateRevision
	loadStart := time.Now()
	preloadKeys(ctx, t, ns, name, "brk", brokenKeys)
	t.Logf("preloaded %d keys in %.1fs", brokenKeys, time.Since(loadStart).Seconds())

	w := &writer{errs: map[string]int{}}
	stop, done := make(chan struct{}), make(chan struct{})
	go w.run(ctx, ns, name, stop, done)
	defer func() {
		select {
		case <-done:
		default:
			close(stop)
			<-done
		}
	}()
	time.Sleep(500 * time.Millisecond)

	// Break: the user ConfigMap's unknown directive makes redis-server exit at start.
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

	// Stopped means stopped: over the next 20 s no other pod is restarted, exactly one pod
	// runs the broken revision, and the Warning was emitted once.
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
	upgradeEvents := func() (restarts, stopped, replaced []string) {
		evs, err := stack.Events(ctx, getCluster(ctx, t, ns, name))
		g.Expect(err).NotTo(HaveOccurred())
		for _, e := range evs {
			switch {
			case e.Reason == "Upgrade" && strings.HasPrefix(e.Message, "Restarting"):
				restarts = append(restarts, e.Message)
			case e.Reason == "UpgradeStopped":
				g.Expect(e.Type).To(Equal(corev1.EventTypeWarning))
				for i := int32(0); i < max(e.Count, 1); i++ {
					stopped = append(stopped, e.Message)
				}
			case e.Reason == "Upgrade" && strings.HasPrefix(e.Message, "Replacing"):
				replaced = append(replaced, e.Message)
			}
		}
		return
	}
	restarts, stopped, _ := upgradeEvents()
	g.Expect(restarts).To(HaveLen(1), "the roll restarted one pod before stopping")
	g.Expect(stopped).To(HaveLen(1), "one Warning for the stop")
	w.mu.Lock()
	okWhileStopped, failedWhileStopped := len(w.ok), w.failed
	w.mu.Unlock()
	t.Logf("while stopped: %d writes ok, %d failed", okWhileStopped, failedWhileStopped)

	// Revert: the spec as it was. No pod is deleted by hand.
	revert := time.Now()
	g.Expect(kc.Patch(ctx, u, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/pod/0/configmap"}]`)))).To(Succeed())
	if err := stack.WaitForPhase(ctx, ns, name, "Running", 5*time.Minute); err != nil {
		t.Fatalf("%v: %s", err, getCluster(ctx, t, ns, name).Status.Reason)
	}
	recovered := time.Since(revert)
	close(stop)
	<-done

	eventuallyFormed(ctx, t, ns, name)
	g.Expect(kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	g.Expect(sts.Status.UpdateRevision).To(Equal(goodRev), "the StatefulSet is back on the old revision")
	pods, err = stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(6))
	for _, p := range pods {
		g.Expect(framework.PodReady(&p)).To(BeTrue(), "%s Ready", p.Name)
		g.Expect(p.Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(goodRev), "revision of %s", p.Name)
	}
	_, _, replaced := upgradeEvents()
	g.Expect(replaced).To(ContainElement(HavePrefix("Replacing " + onBad[0] + ", which is crash-looping")))
	lostPre, lostAcked := countLost(ctx, t, ns, name, "brk", brokenKeys, w.ok)
	t.Logf("broken template: stopped %.1fs after the patch, Running %.1fs after the revert; %d preloaded keys, %d lost; writes %d ok, %d failed %v, %d acknowledged lost; longest write gap %s; events %v",
		stoppedAfter.Seconds(), recovered.Seconds(), brokenKeys, lostPre, len(w.ok), w.failed, w.errs, lostAcked, w.maxGap.Round(time.Millisecond), replaced)
	g.Expect(lostPre).To(BeZero(), "preloaded keys lost")
	g.Expect(lostAcked).To(BeZero(), "acknowledged writes lost")
}
