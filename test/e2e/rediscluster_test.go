//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// The operator's suite: the operator built from this repository runs as its own process
// against the devcluster, with leader election on short leases so a killed operator's
// successor takes over within seconds.

const (
	demoSample = "config/samples/redis_v1alpha1_rediscluster.yaml"
	seedSample = "config/samples/seed_rediscluster.yaml"
	formTime   = 3 * time.Minute
)

var (
	operatorOnce sync.Once
	operatorProc *framework.Operator
	operatorErr  error
)

// operator starts the operator once for the run and returns it.
func operator(t *testing.T) *framework.Operator {
	t.Helper()
	operatorOnce.Do(func() {
		crds := filepath.Join(framework.RepoRoot(), "config", "crd", "bases")
		if out, err := stack.Kubectl("apply", "--server-side", "-f", crds); err != nil {
			operatorErr = fmt.Errorf("failed to install the CRD: %w: %s", err, out)
			return
		}
		// Retried: right after creation the CRD has no conditions for kubectl wait to read.
		var waitErr error
		for i := 0; i < 60; i++ {
			if _, waitErr = stack.Kubectl("wait", "--for=condition=established", "--timeout=5s", "crd/redisclusters.redis.middleware.hc.cn", "crd/redisclusterbackups.redis.middleware.hc.cn", "crd/redisclusterbackupschedules.redis.middleware.hc.cn"); waitErr == nil {
				break
			}
			time.Sleep(time.Second)
		}
		if waitErr != nil {
			operatorErr = fmt.Errorf("the CRD is not established: %w", waitErr)
			return
		}
		// Metrics over plain HTTP on loopback, for TestOperatorMetrics.
		operatorProc, operatorErr = stack.StartOperator(
			"--metrics-bind-address="+operatorMetricsAddr, "--metrics-secure=false", "--health-probe-bind-address=127.0.0.1:0",
			"--leader-elect", "--leader-election-namespace=default",
			"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s",
			"--create-timeout=5m", "--zap-log-level=info", "--backup-store-image="+operatorImage)
	})
	if operatorErr != nil {
		t.Fatalf("failed to start the operator: %v", operatorErr)
	}
	if err := operatorProc.EnsureRunning(); err != nil {
		t.Fatalf("failed to restart the operator: %v", err)
	}
	t.Logf("operator log: %s", operatorProc.Logs)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := os.ReadFile(operatorProc.Logs)
			tail := string(logs)
			if len(tail) > 6000 {
				tail = tail[len(tail)-6000:]
			}
			t.Logf("operator log tail:\n%s", tail)
		}
	})
	return operatorProc
}

// stopOperator ends the operator started by operator(), if any; TestMain calls it after
// every test has run.
func stopOperator() {
	if operatorProc != nil && operatorProc.Running() {
		_ = operatorProc.Stop()
	}
}

// formDemo starts the operator if needed, creates namespace ns (deleted when the test
// ends), applies the demo sample into it after mutate edits it, and waits until the
// cluster "demo" is Running and formed.
func formDemo(ctx context.Context, t *testing.T, ns string, mutate func(*unstructured.Unstructured)) {
	t.Helper()
	operator(t)
	testNamespace(ctx, t, ns)
	applyCluster(ctx, t, demoSample, ns, mutate)
	if err := stack.WaitForPhase(ctx, ns, "demo", "Running", formTime); err != nil {
		t.Fatal(err)
	}
	eventuallyFormed(ctx, t, ns, "demo")
}

// testNamespace creates namespace ns for t and deletes it when t ends. When t failed, its
// pods' redis.log and nodes.conf are kept first (framework.KeepPodLogs) and the last lines
// of each log printed, so that a failure in CI says what Redis saw.
func testNamespace(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	cleanup, err := stack.CreateNamespace(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logPods(t, ns, 25)
		}
		cleanup()
	})
}

// logPods keeps the pods' files of ns and logs the last n lines of each pod's redis.log
// that contain one of words (any line when there are none).
func logPods(t *testing.T, ns string, n int, words ...string) {
	t.Helper()
	if dir, err := stack.KeepPodLogs(ns); err != nil {
		t.Logf("pods of %s: %v", ns, err)
	} else {
		t.Logf("pods' redis.log and nodes.conf of %s kept in %s", ns, dir)
	}
	lines, err := stack.PodLogLines(ns, n, words...)
	if err != nil {
		t.Logf("pods of %s: %v", ns, err)
	}
	for _, l := range lines {
		t.Log(l)
	}
}

// applyCluster applies a RedisCluster manifest into ns after mutate edits it; the demo
// sample runs E2E_SERVER's server when it is set (withMatrixServer), before mutate.
func applyCluster(ctx context.Context, t *testing.T, file, ns string, mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), file))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	if ns != "" {
		u.SetNamespace(ns)
	}
	if file == demoSample {
		if err := withMatrixServer(u); err != nil {
			t.Fatal(err)
		}
	}
	if mutate != nil {
		mutate(u)
	}
	out, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stack.ApplyYAML(ctx, "", string(out)); err != nil {
		t.Fatalf("failed to apply %s: %v", file, err)
	}
	return u
}

// noPassword is a mutate for a test about something else than the password (the fault
// suite, re-applying over kept data, the fleet, upgrade rolls) whose raw clients dial
// without one: it sets spec.disablePassword, as a user opting out writes it, after mutate.
// The secure default (a generated password) is what TestRedisClusterLifecycle, the
// restricted, security, exporter, TLS, healing, scale and live-configuration tests run.
func noPassword(mutate func(*unstructured.Unstructured)) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		if mutate != nil {
			mutate(u)
		}
		_ = unstructured.SetNestedField(u.Object, true, "spec", "disablePassword")
	}
}

// pw is the password of cluster ns/name as its clients need it (framework's Password):
// the generated one, spec.passwordSecret's, or "" for a cluster without one. An error
// reads as "": the client's NOAUTH then says what went wrong.
func pw(ctx context.Context, ns, name string) string {
	p, _ := stack.Password(ctx, ns, name)
	return p
}

func kubeClient(t *testing.T) client.Client {
	t.Helper()
	c, err := stack.Client()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// getCluster reads a RedisCluster as the typed API object.
func getCluster(ctx context.Context, t *testing.T, ns, name string) *redisv1alpha1.RedisCluster {
	t.Helper()
	u, err := stack.GetRedisCluster(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	rc := &redisv1alpha1.RedisCluster{}
	data, _ := u.MarshalJSON()
	if err := yaml.Unmarshal(data, rc); err != nil {
		t.Fatal(err)
	}
	return rc
}

// patchSpec merge-patches the RedisCluster's spec, as `kubectl patch --type merge` does.
func patchSpec(ctx context.Context, t *testing.T, ns, name, specJSON string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(framework.RedisClusterGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	if err := kubeClient(t).Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"spec":`+specJSON+`}`))); err != nil {
		t.Fatalf("failed to patch spec with %s: %v", specJSON, err)
	}
}

func statefulSetReplicas(ctx context.Context, t *testing.T, ns, name string) int32 {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := kubeClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts); err != nil {
		t.Fatal(err)
	}
	return *sts.Spec.Replicas
}

func selectorOf(name string) string {
	return "app.kubernetes.io/instance=" + name + ",app.kubernetes.io/name=redis-cluster"
}

// eventuallyFormed waits until expectFormed holds: right after a bootstrap some links are
// still connecting, and the status follows within a reconcile or two.
func eventuallyFormed(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		expectFormed(ctx, g, ns, name, getCluster(ctx, t, ns, name))
	}, 30*time.Second, 500*time.Millisecond).Should(Succeed())
}

// expectFormed checks the cluster from Redis itself and from the status: every node says
// ok with all slots, 3 masters with one replica each, and the status agrees with Redis.
func expectFormed(ctx context.Context, g Gomega, ns, name string, rc *redisv1alpha1.RedisCluster) {
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(6))
	for _, p := range pods {
		c := framework.NodeClient(p.Status.PodIP, pw(ctx, ns, name))
		info, err := topology.ParseClusterInfo(c.ClusterInfo(ctx).Val())
		c.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info.OK()).To(BeTrue(), "cluster_state on %s", p.Name)
		g.Expect(info.SlotsAssigned).To(Equal(topology.SlotCount), "slots assigned seen by %s", p.Name)
	}
	g.Expect(rc.Status.Conditions).To(HaveLen(6))
	g.Expect(rc.Status.Masters).To(BeEquivalentTo(3))
	g.Expect(rc.Status.Replicas).To(BeEquivalentTo(6))
	replicasOf, covered := map[string]int{}, 0
	byPod := map[string]corev1.Pod{}
	for _, p := range pods {
		byPod[p.Name] = p
	}
	for _, c := range rc.Status.Conditions {
		p := byPod[c.Name]
		g.Expect(c.Instance).To(Equal(net.JoinHostPort(p.Status.PodIP, "6379")), c.Name)
		g.Expect(c.Hostname).To(Equal(p.Spec.NodeName), c.Name)
		g.Expect(c.HostIP).To(Equal(p.Status.HostIP), c.Name)
		g.Expect(c.Status).To(Equal(corev1.ConditionTrue), c.Name+": "+c.Message)
		switch c.Type {
		case topology.RoleMaster:
			rs, err := topology.ParseSlotRanges(c.Slots)
			g.Expect(err).NotTo(HaveOccurred())
			covered += rs.Count()
		case topology.RoleSlave:
			replicasOf[c.MasterNodeID]++
			g.Expect(c.Slots).To(BeEmpty())
		default:
			g.Expect(c.Type).To(BeElementOf(topology.RoleMaster, topology.RoleSlave), c.Name)
		}
	}
	g.Expect(covered).To(Equal(topology.SlotCount))
	for _, c := range rc.Status.Conditions {
		if c.Type == topology.RoleMaster {
			g.Expect(replicasOf[c.NodeID]).To(Equal(1), "replicas of %s", c.Name)
		}
	}
}

// TestRedisClusterLifecycle follows one cluster through the phases: the demo sample forms,
// serves keys from any node, idles, freezes a resize while paused, resizes once un-paused
// and back without losing anything, and is
// deleted in the foreground.
func TestRedisClusterLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns, name := "e2e-lifecycle", "demo"
	start := time.Now()
	formDemo(ctx, t, ns, nil)
	t.Logf("Running and formed %.1fs after apply", time.Since(start).Seconds())
	rc := getCluster(ctx, t, ns, name)
	g.Expect(meta.IsStatusConditionTrue(rc.Status.ClusterConditions, "Ready")).To(BeTrue())
	g.Expect(rc.Status.ObservedGeneration).To(Equal(rc.Generation))
	out, err := stack.Kubectl("get", "rec", "-n", ns, name, "--no-headers")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Fields(out)).To(HaveExactElements("demo", "6", "6", "3", "Running", Not(BeEmpty())))

	t.Run("a key written through one node reads back through another", func(t *testing.T) {
		g := NewWithT(t)
		pods, err := stack.Pods(ctx, ns, selectorOf(name))
		g.Expect(err).NotTo(HaveOccurred())
		first := framework.NewClusterClient([]string{net.JoinHostPort(pods[0].Status.PodIP, "6379")}, pw(ctx, ns, name))
		defer first.Close()
		last := framework.NewClusterClient([]string{net.JoinHostPort(pods[5].Status.PodIP, "6379")}, pw(ctx, ns, name))
		defer last.Close()
		for i := 0; i < 50; i++ {
			g.Expect(first.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err()).To(Succeed())
		}
		for i := 0; i < 50; i++ {
			g.Expect(last.Get(ctx, fmt.Sprintf("key-%d", i)).Int()).To(Equal(i))
		}
		// The sample's env MAXMEMORY: 64mb reached Redis as maxmemory.
		node := framework.NodeClient(pods[0].Status.PodIP, pw(ctx, ns, name))
		defer node.Close()
		g.Expect(node.ConfigGet(ctx, "maxmemory").Val()).To(Equal([]interface{}{"maxmemory", "67108864"}))
	})

	t.Run("events tell the phase changes and the Redis actions", func(t *testing.T) {
		g := NewWithT(t)
		evs, err := stack.Events(ctx, rc)
		g.Expect(err).NotTo(HaveOccurred())
		var seen []string
		for _, e := range evs {
			seen = append(seen, e.Type+"/"+e.Reason+": "+e.Message)
		}
		g.Expect(seen).To(ContainElement(HavePrefix("Normal/PhaseChanged: None -> Creating")))
		g.Expect(seen).To(ContainElement(HavePrefix("Normal/PhaseChanged: Creating -> Running")))
		g.Expect(seen).To(ContainElement(HavePrefix("Normal/RedisAction: AddSlots")))
		g.Expect(seen).To(ContainElement(HavePrefix("Normal/RedisAction: Replicate")))
	})

	t.Run("an idle reconcile writes nothing, to the API server or to Redis", func(t *testing.T) {
		g := NewWithT(t)
		before := snapshot(ctx, t, ns, name)
		var bootstrapWrites int64
		for _, n := range before.redisWrites {
			bootstrapWrites += n
		}
		g.Expect(bootstrapWrites).To(BeNumerically(">", 0), "commandstats shows the bootstrap's writes, so a new one would show")
		// A metadata-only change wakes the reconciler without asking for anything.
		u, err := stack.GetRedisCluster(ctx, ns, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kubeClient(t).Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"e2e/poke":"1"}}}`)))).To(Succeed())
		poked := getCluster(ctx, t, ns, name).ResourceVersion
		time.Sleep(5 * time.Second)
		after := snapshot(ctx, t, ns, name)
		g.Expect(after.cluster).To(Equal(poked), "the status was not rewritten")
		g.Expect(after.objects).To(Equal(before.objects), "no object was re-applied")
		g.Expect(after.redisWrites).To(Equal(before.redisWrites), "no Redis write command was sent")
	})

	t.Run("pause freezes a replicas change until it is lifted", func(t *testing.T) {
		g := NewWithT(t)
		patchSpec(ctx, t, ns, name, `{"pause":true}`)
		g.Eventually(func() string { return getCluster(ctx, t, ns, name).Status.Reason }, 30*time.Second, 200*time.Millisecond).
			Should(ContainSubstring("spec.pause is true"))
		patchSpec(ctx, t, ns, name, `{"replicas":8}`)
		g.Consistently(func() string {
			rc := getCluster(ctx, t, ns, name)
			return fmt.Sprintf("%s %d", rc.Status.Phase, statefulSetReplicas(ctx, t, ns, name))
		}, 6*time.Second, 500*time.Millisecond).Should(Equal("Running 6"))

		patchSpec(ctx, t, ns, name, `{"pause":false}`)
		// Un-paused, the change is made: Scaling migrates slots to the new master, then back.
		g.Expect(stack.WaitForPhase(ctx, ns, name, "Scaling", 30*time.Second)).To(Succeed())
		g.Expect(stack.WaitForPhase(ctx, ns, name, "Running", 4*time.Minute)).To(Succeed())
		g.Expect(statefulSetReplicas(ctx, t, ns, name)).To(BeEquivalentTo(8))
		g.Expect(getCluster(ctx, t, ns, name).Status.Masters).To(BeEquivalentTo(4))

		patchSpec(ctx, t, ns, name, `{"replicas":6}`)
		// Scaling can last less than one poll on the way back: wait for Running with the
		// new size observed.
		g.Expect(stack.WaitForObservedPhase(ctx, ns, name, "Running", 4*time.Minute)).To(Succeed())
		eventuallyFormed(ctx, t, ns, name)
		c, err := stack.RedisClient(ctx, ns, selectorOf(name), "")
		g.Expect(err).NotTo(HaveOccurred())
		defer c.Close()
		g.Expect(c.Get(ctx, "key-7").Int()).To(Equal(7))
	})

	t.Run("finalizers foreground: the CR goes only after its pods", func(t *testing.T) {
		g := NewWithT(t)
		u, err := stack.GetRedisCluster(ctx, ns, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kubeClient(t).Delete(ctx, u)).To(Succeed())
		sawDeleting := false
		g.Eventually(func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(framework.RedisClusterGVK)
			getErr := kubeClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
			if apierrors.IsNotFound(getErr) {
				// The CR is gone: no pod may be left behind it (listed after the Get).
				pods, err := stack.Pods(ctx, ns, selectorOf(name))
				if err != nil {
					return err
				}
				if len(pods) != 0 {
					return StopTrying(fmt.Sprintf("the RedisCluster went while %d pods remained", len(pods)))
				}
				return nil
			}
			if getErr != nil {
				return getErr
			}
			pods, err := stack.Pods(ctx, ns, selectorOf(name))
			if err != nil {
				return err
			}
			if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase == "Deleting" {
				sawDeleting = true
			}
			return fmt.Errorf("still there with %d pods", len(pods))
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
		g.Expect(sawDeleting).To(BeTrue(), "the phase showed Deleting while the pods went")
	})
}

// TestOperatorKilledMidBootstrapFinishesIt kills the operator once the StatefulSet exists,
// leaves the cluster half-formed (slots assigned and config epochs set by one step of the
// operator's own bootstrap, no meets yet: what a crash after that step leaves), restarts
// the operator and expects it to finish the job.
func TestOperatorKilledMidBootstrapFinishesIt(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	op := operator(t)
	ns, name := "e2e-crash", "demo"
	testNamespace(ctx, t, ns)

	applyCluster(ctx, t, demoSample, ns, noPassword(nil))
	g.Eventually(func() error {
		return kubeClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &appsv1.StatefulSet{})
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	g.Expect(op.Kill()).To(Succeed())
	g.Eventually(op.Running, 10*time.Second, 100*time.Millisecond).Should(BeFalse())

	g.Expect(stack.WaitForPodsReady(ctx, ns, selectorOf(name), 6, 2*time.Minute)).To(Succeed())
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	var members []topology.Member
	for _, p := range pods {
		members = append(members, topology.Member{Pod: p.Name, Addr: net.JoinHostPort(p.Status.PodIP, "6379"), K8sNode: p.Spec.NodeName})
	}
	f := redis.NewFactory(redis.Options{})
	defer f.Close()
	st, err := redis.Observe(ctx, f, members)
	g.Expect(err).NotTo(HaveOccurred())
	if !st.Formed(3, 1) {
		p, err := redis.BootstrapStep(ctx, f, members, 3, 1)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Done).To(BeFalse())
		t.Logf("left the cluster half-formed: %d actions, phase %s", len(p.Actions), p.Phase)
	}
	st, err = redis.Observe(ctx, f, members)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Formed(3, 1)).To(BeFalse(), "the cluster is half-formed before the restart")

	g.Expect(op.Restart()).To(Succeed())
	g.Expect(stack.WaitForPhase(ctx, ns, name, "Running", formTime)).To(Succeed())
	eventuallyFormed(ctx, t, ns, name)
}

// TestSeedSampleIsAcceptedAndLeftAlone applies the original document's RedisCluster word
// for word: the API server accepts it, and its pause: true keeps the operator's hands off.
func TestSeedSampleIsAcceptedAndLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	operator(t)
	ns, name := "kube-system", "example000-redis-cluster"
	out, err := stack.Kubectl("apply", "-f", filepath.Join(framework.RepoRoot(), seedSample))
	g.Expect(err).NotTo(HaveOccurred(), out)

	g.Eventually(func() string { return getCluster(ctx, t, ns, name).Status.Reason }, time.Minute, 200*time.Millisecond).
		Should(ContainSubstring("spec.pause is true"))
	rc := getCluster(ctx, t, ns, name)
	g.Expect(rc.Status.Phase).To(Equal(redisv1alpha1.PhaseNone))
	g.Expect(rc.Spec.Version).To(Equal("3.2.8"))
	g.Consistently(func() bool {
		err := kubeClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &appsv1.StatefulSet{})
		return client.IgnoreNotFound(err) == nil && err != nil
	}, 5*time.Second, 500*time.Millisecond).Should(BeTrue(), "no StatefulSet is created while paused")

	// Deleting it is honoured even while paused; with no pod, the finalizer goes at once.
	out, err = stack.Kubectl("delete", "-f", filepath.Join(framework.RepoRoot(), seedSample), "--wait=true", "--timeout=60s")
	g.Expect(err).NotTo(HaveOccurred(), out)
}

// state is what an idle reconcile must leave untouched.
type state struct {
	cluster     string            // the RedisCluster's resourceVersion
	objects     map[string]string // kind/name → resourceVersion of the rendered objects
	redisWrites map[string]int64  // node → calls of write commands (INFO commandstats)
}

// redisWriteCommands are the commandstats entries of the commands that change a cluster.
var redisWriteCommands = []string{"cluster|meet", "cluster|addslots", "cluster|addslotsrange", "cluster|delslots",
	"cluster|replicate", "cluster|setslot", "cluster|forget", "cluster|failover", "cluster|set-config-epoch",
	"cluster|reset", "migrate", "config|set", "config|rewrite"}

func snapshot(ctx context.Context, t *testing.T, ns, name string) state {
	t.Helper()
	st := state{cluster: getCluster(ctx, t, ns, name).ResourceVersion, objects: map[string]string{}, redisWrites: map[string]int64{}}
	c := kubeClient(t)
	for key, obj := range map[string]client.Object{
		"StatefulSet/" + name:           &appsv1.StatefulSet{},
		"Service/" + name:               &corev1.Service{},
		"Service/" + name + "-client":   &corev1.Service{},
		"ConfigMap/" + name + "-config": &corev1.ConfigMap{},
	} {
		objName := key[strings.Index(key, "/")+1:]
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: objName}, obj); err != nil {
			t.Fatal(err)
		}
		st.objects[key] = obj.GetResourceVersion()
	}
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		node := framework.NodeClient(p.Status.PodIP, pw(ctx, ns, name))
		stats := node.Info(ctx, "commandstats").Val()
		node.Close()
		for _, line := range strings.Split(stats, "\n") {
			for _, cmd := range redisWriteCommands {
				var calls int64
				if _, err := fmt.Sscanf(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=%d", &calls); err == nil {
					st.redisWrites[p.Name] += calls
				}
			}
		}
	}
	return st
}
