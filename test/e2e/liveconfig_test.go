//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// Live configuration on the demo cluster, its redis.conf tuned by the user ConfigMap
// demo-tuning, loaded with faultKeys keys and a writer running throughout:
//   - maxmemory and maxmemory-policy changed: every node reports the new values, no pod
//     restarts (UIDs and restart counts unchanged), the phase never leaves Running (watched);
//   - then a directive that needs a restart (databases): the pods roll through Upgrading,
//     each restarted once, and come back with it;
//
// with no pre-loaded key and no acknowledged write lost, and the longest write gap logged.
// It also runs docs/usage.md's `kubectl wait` for Ready.
func TestLiveConfigChangesNoPod(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ns, name := "e2e-liveconfig", "demo"
	g := NewWithT(t)
	kc := kubeClient(t)

	operator(t)
	testNamespace(ctx, t, ns)
	tuning := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-tuning"},
		Data: map[string]string{"redis.conf": "maxmemory 200mb\nmaxmemory-policy noeviction\n"}}
	g.Expect(kc.Create(ctx, tuning)).To(Succeed())
	applyCluster(ctx, t, demoSample, ns, func(u *unstructured.Unstructured) {
		pods, _, _ := unstructured.NestedSlice(u.Object, "spec", "pod")
		pod := pods[0].(map[string]any)
		pod["configmap"] = "demo-tuning"
		delete(pod, "env") // MAXMEMORY's --maxmemory argument would win over redis.conf
		_ = unstructured.SetNestedSlice(u.Object, pods, "spec", "pod")
	})
	g.Expect(stack.WaitForPhase(ctx, ns, name, "Running", formTime)).To(Succeed())
	eventuallyFormed(ctx, t, ns, name)

	// docs/usage.md's form of `kubectl wait` for Ready, exactly.
	out, err := stack.Kubectl("wait", "-n", ns, "--for=jsonpath={.status.clusterConditions[?(@.type==\"Ready\")].status}=True", "rec/"+name, "--timeout=60s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("condition met"))

	r := stack.RouterFor(ns, name, "")
	t.Cleanup(r.Close)
	g.Expect(r.Load(ctx, "pre", faultKeys)).To(Succeed())
	expectOnEveryPod(ctx, t, ns, name, "maxmemory", "209715200")
	before := podRuns(ctx, t, ns, name)

	phases := watchPhases(ctx, t, ns, name)
	w, err := r.StartWriter(ctx, "w")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	time.Sleep(time.Second)

	// Live: CONFIG SET on every node. The user ConfigMap is watched, so the edit is acted
	// on at once rather than at the Running resync (30 s): the log line says how soon.
	start := time.Now()
	setConf(ctx, t, ns, "demo-tuning", "maxmemory 300mb\nmaxmemory-policy allkeys-lru\n")
	g.Eventually(func(g Gomega) {
		expectOnEveryPodG(ctx, g, ns, name, "maxmemory", "314572800")
		expectOnEveryPodG(ctx, g, ns, name, "maxmemory-policy", "allkeys-lru")
	}, 2*time.Minute, time.Second).Should(Succeed())
	took := time.Since(start)
	time.Sleep(3 * time.Second) // a few reconciles more, to see nothing else happens
	g.Expect(podRuns(ctx, t, ns, name)).To(Equal(before), "no pod replaced or restarted")
	rc := getCluster(ctx, t, ns, name)
	c := meta.FindStatusCondition(rc.Status.ClusterConditions, "Configured")
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Reason).To(Equal("AppliedLive"), c.Message)
	g.Expect(configEvents(ctx, t, ns, name, "ConfigApplied")).To(ContainElement(ContainSubstring(`maxmemory-policy "allkeys-lru"`)))
	g.Expect(phases.seen()).To(Equal([]string{"Running"}), "the phase while the settings changed")

	rep := w.Stop()
	acked := w.Acked()
	w = nil
	lostPre, err := r.Missing(ctx, keyNames("pre", faultKeys))
	g.Expect(err).NotTo(HaveOccurred())
	lostAcked, err := r.Missing(ctx, acked)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("LIVECONFIG live maxmemory+maxmemory-policy: on every node %.1fs after the ConfigMap edit; pre-loaded keys lost %d/%d, acknowledged writes lost %d/%d, longest write gap %v; writer: %v",
		took.Seconds(), len(lostPre), faultKeys, len(lostAcked), len(acked), rep.LongestGap, rep)
	g.Expect(lostPre).To(BeEmpty())
	g.Expect(lostAcked).To(BeEmpty())
	g.Expect(stack.Integrity(ctx, ns, name, "")).To(Succeed())

	// Restart: databases cannot change on a running server; the pods roll, safely.
	w, err = r.StartWriter(ctx, "w2")
	g.Expect(err).NotTo(HaveOccurred())
	time.Sleep(time.Second)
	start = time.Now()
	setConf(ctx, t, ns, "demo-tuning", "maxmemory 300mb\nmaxmemory-policy allkeys-lru\ndatabases 4\n")
	g.Expect(stack.WaitForPhase(ctx, ns, name, "Upgrading", 2*time.Minute)).To(Succeed())
	g.Expect(stack.WaitForPhase(ctx, ns, name, "Running", 5*time.Minute)).To(Succeed())
	took = time.Since(start)
	eventuallyFormed(ctx, t, ns, name)
	expectOnEveryPod(ctx, t, ns, name, "databases", "4")
	expectOnEveryPod(ctx, t, ns, name, "maxmemory", "314572800")
	after := podRuns(ctx, t, ns, name)
	for pod, run := range before {
		g.Expect(after[pod]).NotTo(Equal(run), "pod %s restarted", pod)
	}
	g.Expect(configEvents(ctx, t, ns, name, "ConfigRestart")).To(ContainElement(ContainSubstring("databases")))
	restarts, _, _ := upgradeEvents(ctx, t, ns, name)
	g.Expect(restarts).To(HaveLen(6), "one restart per pod")
	g.Eventually(func() string {
		c := meta.FindStatusCondition(getCluster(ctx, t, ns, name).Status.ClusterConditions, "Configured")
		return c.Reason
	}, 30*time.Second, time.Second).Should(Equal("Restarted"))

	rep = w.Stop()
	acked = w.Acked()
	w = nil
	lostPre, err = r.Missing(ctx, keyNames("pre", faultKeys))
	g.Expect(err).NotTo(HaveOccurred())
	lostAcked, err = r.Missing(ctx, acked)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("LIVECONFIG restart (databases): Upgrading then Running %.1fs after the ConfigMap edit; pre-loaded keys lost %d/%d, acknowledged writes lost %d/%d, longest write gap %v; writer: %v",
		took.Seconds(), len(lostPre), faultKeys, len(lostAcked), len(acked), rep.LongestGap, rep)
	g.Expect(lostPre).To(BeEmpty())
	g.Expect(lostAcked).To(BeEmpty())
	g.Expect(stack.Integrity(ctx, ns, name, "")).To(Succeed())
}

// setConf replaces the redis.conf of a user ConfigMap.
func setConf(ctx context.Context, t *testing.T, ns, name, conf string) {
	t.Helper()
	kc := kubeClient(t)
	cm := &corev1.ConfigMap{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["redis.conf"] = conf
	if err := kc.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
}

func expectOnEveryPod(ctx context.Context, t *testing.T, ns, name, param, want string) {
	t.Helper()
	expectOnEveryPodG(ctx, NewWithT(t), ns, name, param, want)
}

// expectOnEveryPodG checks CONFIG GET param on every pod of the cluster.
func expectOnEveryPodG(ctx context.Context, g Gomega, ns, name, param, want string) {
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(6))
	for _, p := range pods {
		c := framework.NodeClient(p.Status.PodIP, pw(ctx, ns, name))
		v, err := c.ConfigGet(ctx, param).Result()
		c.Close()
		g.Expect(err).NotTo(HaveOccurred(), p.Name)
		g.Expect(v).To(HaveLen(2))
		g.Expect(v[1]).To(Equal(want), "%s on %s", param, p.Name)
	}
}

// configEvents lists the messages of the cluster's events with reason.
func configEvents(ctx context.Context, t *testing.T, ns, name, reason string) []string {
	t.Helper()
	evs, err := stack.Events(ctx, getCluster(ctx, t, ns, name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// phaseWatch records every distinct phase a watch of the RedisCluster delivers, in order.
type phaseWatch struct {
	mu     sync.Mutex
	phases []string
}

func (p *phaseWatch) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.phases...)
}

// watchPhases watches the RedisCluster from now until the test ends: every status write
// the operator makes is an event of the watch, so no phase, however brief, is missed.
func watchPhases(ctx context.Context, t *testing.T, ns, name string) *phaseWatch {
	t.Helper()
	cfg, err := stack.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: framework.RedisClusterGVK.Group, Version: framework.RedisClusterGVK.Version, Resource: "redisclusters"}
	wctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	watch, err := dc.Resource(gvr).Namespace(ns).Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	p := &phaseWatch{}
	go func() {
		defer watch.Stop()
		for ev := range watch.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				p.mu.Lock()
				p.phases = append(p.phases, fmt.Sprintf("watch %s: %v", ev.Type, ev.Object))
				p.mu.Unlock()
				continue
			}
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			p.mu.Lock()
			if n := len(p.phases); n == 0 || p.phases[n-1] != phase {
				p.phases = append(p.phases, phase)
			}
			p.mu.Unlock()
		}
	}()
	return p
}
