package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// newCluster is a cluster without a password (disablePassword): the tests that use it are
// about something else and start redis-servers without one. The password tests set
// spec.passwordSecret (and disablePassword false), and TestSecureDefaults starts from the
// defaults.
func newCluster(ns string, replicas int32) *redisv1alpha1.RedisCluster {
	return &redisv1alpha1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
		Spec: redisv1alpha1.RedisClusterSpec{
			Replicas:          replicas,
			ReplicasPerMaster: ptr.To[int32](1),
			Finalizers:        redisv1alpha1.FinalizersForeground,
			Version:           "7.2",
			DisablePassword:   true,
		},
	}
}

// startPods plays the StatefulSet controller and the kubelet: one pod per redis-server,
// Running and Ready, spread over three Kubernetes nodes.
func startPods(t *testing.T, rc *redisv1alpha1.RedisCluster, servers []*redistest.Server) {
	t.Helper()
	ctx := context.Background()
	for i, srv := range servers {
		host, port, _ := strings.Cut(srv.Addr, ":")
		p, _ := strconv.Atoi(port)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: fmt.Sprintf("%s-%d", rc.Name, i), Labels: redisv1alpha1.SelectorLabels(rc.Name)},
			Spec: corev1.PodSpec{
				NodeName: fmt.Sprintf("node-%d", i%3),
				Containers: []corev1.Container{{Name: "redis", Image: "redis:7.2",
					Ports: []corev1.ContainerPort{{Name: "redis", ContainerPort: int32(p)}}}},
			},
		}
		if err := apiClient.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: host, HostIP: "10.0.0." + strconv.Itoa(i%3+1),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		}
		if err := apiClient.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
}

func get(t *testing.T, rc *redisv1alpha1.RedisCluster) *redisv1alpha1.RedisCluster {
	t.Helper()
	out := &redisv1alpha1.RedisCluster{}
	if err := apiClient.Get(context.Background(), client.ObjectKeyFromObject(rc), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// reconcileUntil reconciles until the phase is reached, at most n times.
func (h *harness) reconcileUntil(rc *redisv1alpha1.RedisCluster, phase redisv1alpha1.RedisClusterPhase, n int) *redisv1alpha1.RedisCluster {
	h.t.Helper()
	for i := 0; i < n; i++ {
		h.reconcile(rc)
		if got := get(h.t, rc); got.Status.Phase == phase {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := get(h.t, rc)
	h.t.Fatalf("phase %q not reached after %d reconciles: phase %q, reason %q", phase, n, got.Status.Phase, got.Status.Reason)
	return nil
}

func TestReconcileFormsClusterThenIdlesWithoutWrites(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	ns := newNamespace(t)
	rc := newCluster(ns, 6)
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())

	// First reconciles: finalizer, None → Creating, objects applied, waiting for pods.
	h.reconcile(rc)
	g.Expect(get(t, rc).Finalizers).To(ContainElement(ForegroundFinalizer))
	h.reconcile(rc)
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseCreating))
	sts := &appsv1.StatefulSet{}
	g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, sts)).To(Succeed())
	g.Expect(*sts.Spec.Replicas).To(BeEquivalentTo(6))
	g.Expect(sts.OwnerReferences).To(HaveLen(1))
	g.Expect(sts.OwnerReferences[0].Kind).To(Equal("RedisCluster"))
	for _, name := range []string{"demo", "demo-client"} {
		g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Service{})).To(Succeed())
	}
	g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-config"}, &corev1.ConfigMap{})).To(Succeed())

	servers := redistest.Start(t, 6, redistest.Config{})
	startPods(t, rc, servers)
	got = h.reconcileUntil(rc, redisv1alpha1.PhaseRunning, 20)

	// The status lists every instance with its role and slots.
	g.Expect(got.Status.Conditions).To(HaveLen(6))
	g.Expect(got.Status.Masters).To(BeEquivalentTo(3))
	g.Expect(got.Status.Replicas).To(BeEquivalentTo(6))
	g.Expect(got.Status.Selector).To(Equal("app.kubernetes.io/instance=demo,app.kubernetes.io/name=redis-cluster"))
	g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	masters, slots := map[string]redisv1alpha1.RedisClusterCondition{}, 0
	for _, c := range got.Status.Conditions {
		g.Expect(c.NodeID).NotTo(BeEmpty(), c.Name)
		g.Expect(c.Status).To(Equal(corev1.ConditionTrue), c.Name+": "+c.Message)
		g.Expect(c.DomainName).To(Equal(c.Name + ".demo." + ns + ".svc.cluster.local"))
		if c.Type == topology.RoleMaster {
			masters[c.NodeID] = c
			rs, err := topology.ParseSlotRanges(c.Slots)
			g.Expect(err).NotTo(HaveOccurred())
			slots += rs.Count()
		}
	}
	g.Expect(slots).To(Equal(topology.SlotCount))
	for _, c := range got.Status.Conditions {
		if c.Type == topology.RoleSlave {
			master, ok := masters[c.MasterNodeID]
			g.Expect(ok).To(BeTrue(), "replica %s follows a master", c.Name)
			g.Expect(master.Hostname).NotTo(Equal(c.Hostname), "replica %s shares a node with its master", c.Name)
		}
	}

	// A key written through the cluster client reads back.
	addrs := redistest.Addrs(servers)
	slotsFactory := redis.NewFactory(redis.Options{})
	defer slotsFactory.Close()
	// go-redis v8 cannot read Redis 7's CLUSTER SLOTS; the slot table comes from CLUSTER NODES.
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs,
		ClusterSlots: func(ctx context.Context) ([]goredis.ClusterSlot, error) {
			return redis.ClusterSlots(ctx, slotsFactory, addrs)
		}})
	defer cc.Close()
	g.Expect(cc.Set(ctx, "greeting", "hello", 0).Err()).To(Succeed())
	g.Expect(cc.Get(ctx, "greeting").Val()).To(Equal("hello"))

	// Idle: nothing to change means no API write and no Redis write.
	h.reconcile(rc) // settles instance transition times written in the same second
	h.writes()
	h.redis.Reset()
	for i := 0; i < 3; i++ {
		h.reconcile(rc)
	}
	g.Expect(h.writes()).To(BeEmpty())
	g.Expect(h.redis.WriteNames()).To(BeEmpty())
	g.Expect(h.redis.Count("cluster nodes")).To(BeNumerically(">=", 18), "the idle reconciles did read Redis")
}

func TestPauseFreezesEverything(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc := newCluster(newNamespace(t), 6)
	rc.Spec.Pause = true
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	h.reconcile(rc)
	h.reconcile(rc)
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseNone))
	g.Expect(got.Status.Reason).To(ContainSubstring("spec.pause is true"))
	g.Expect(got.Finalizers).To(BeEmpty(), "not even the finalizer is written while paused")
	g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: "demo"}, &appsv1.StatefulSet{})).NotTo(Succeed())
	g.Expect(h.writes()).To(ConsistOf(ContainSubstring("patch/status")), "the status is the only write")

	got.Spec.Pause = false
	g.Expect(apiClient.Update(ctx, got)).To(Succeed())
	h.reconcile(rc) // finalizer
	h.reconcile(rc)
	g.Expect(get(t, rc).Status.Phase).To(Equal(redisv1alpha1.PhaseCreating))
	g.Expect(get(t, rc).Finalizers).To(ContainElement(ForegroundFinalizer))
	g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: "demo"}, &appsv1.StatefulSet{})).To(Succeed())
}

// formCluster creates a 6-instance cluster on real redis-servers and reconciles it to Running.
func formCluster(t *testing.T, h *harness) *redisv1alpha1.RedisCluster {
	t.Helper()
	rc, _ := formRunning(t, h, redistest.Config{})
	h.reconcile(rc)
	h.writes()
	h.redis.Reset()
	return rc
}

// formRunning creates a 6-pod cluster, starts its pods on real servers (cfg) and reconciles
// until it is Running.
func formRunning(t *testing.T, h *harness, cfg redistest.Config) (*redisv1alpha1.RedisCluster, []*redistest.Server) {
	t.Helper()
	rc := newCluster(newNamespace(t), 6)
	if err := apiClient.Create(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	h.reconcile(rc)
	h.reconcile(rc)
	servers := redistest.Start(t, 6, cfg)
	startPods(t, rc, servers)
	h.reconcileUntil(rc, redisv1alpha1.PhaseRunning, 20)
	return rc, servers
}

// update edits the cluster's spec on the server.
func update(t *testing.T, rc *redisv1alpha1.RedisCluster, edit func(*redisv1alpha1.RedisClusterSpec)) {
	t.Helper()
	got := get(t, rc)
	edit(&got.Spec)
	if err := apiClient.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
}

func liveStatefulSet(t *testing.T, rc *redisv1alpha1.RedisCluster) *appsv1.StatefulSet {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := apiClient.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: rc.Name}, sts); err != nil {
		t.Fatal(err)
	}
	return sts
}

func TestPausedFormedClusterWritesNothingButItsStatus(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	rc := formCluster(t, h)
	before := liveStatefulSet(t, rc)

	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Pause = true; s.Version = "7.4"; s.Replicas = 8 })
	for i := 0; i < 3; i++ {
		h.reconcile(rc)
	}
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	g.Expect(got.Status.Reason).To(ContainSubstring("spec.pause is true"))
	g.Expect(h.writes()).To(HaveEach(ContainSubstring("patch/status")))
	g.Expect(h.redis.WriteNames()).To(BeEmpty())
	g.Expect(liveStatefulSet(t, rc).ResourceVersion).To(Equal(before.ResourceVersion))
}

func TestFormedClusterUpgradesOnTemplateChange(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	rc := formCluster(t, h)
	before := liveStatefulSet(t, rc)
	g.Expect(before.Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteStatefulSetStrategyType), "the operator, not the StatefulSet controller, restarts pods")

	// A new version and config: Upgrading applies the template and the ConfigMap. envtest
	// runs no StatefulSet controller, so no update revision appears and no pod is deleted.
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) {
		s.Version = "7.4"
		s.Pod = []redisv1alpha1.RedisPodTemplate{{Env: []corev1.EnvVar{{Name: "MAXMEMORY", Value: "32mb"}}}}
	})
	h.reconcileUntil(rc, redisv1alpha1.PhaseUpgrading, 5)
	for i := 0; i < 3; i++ {
		h.reconcile(rc)
	}
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseUpgrading))
	g.Expect(got.Status.Reason).To(ContainSubstring("new revision"))
	sts := liveStatefulSet(t, rc)
	g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix(":7.4"))
	g.Expect(sts.Spec.Template.Spec.Containers[0].Image).NotTo(Equal(before.Spec.Template.Spec.Containers[0].Image))
	g.Expect(sts.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--maxmemory"))
	g.Expect(h.redis.WriteNames()).To(BeEmpty())
	g.Expect(h.events()).To(ContainElement(ContainSubstring("Running -> Upgrading")))
	pods := &corev1.PodList{}
	g.Expect(apiClient.List(context.Background(), pods, client.InNamespace(rc.Namespace))).To(Succeed())
	for _, p := range pods.Items {
		g.Expect(p.DeletionTimestamp).To(BeNil(), "no pod is restarted before the StatefulSet has an update revision")
	}

	// A size change while Upgrading is no refusal any more: the upgrade keeps the
	// StatefulSet's size (Scaling applies it once the cluster is Running again).
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Replicas = 8 })
	h.reconcile(rc)
	h.reconcile(rc)
	g.Expect(get(t, rc).Status.Phase).To(Equal(redisv1alpha1.PhaseUpgrading))
	g.Expect(*liveStatefulSet(t, rc).Spec.Replicas).To(BeEquivalentTo(6))
	g.Expect(h.redis.WriteNames()).To(BeEmpty())
}

func TestFormedClusterScalesOutStatefulSetFirst(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	rc := formCluster(t, h)

	// Scaling out: the StatefulSet gets the new size at once; no Redis write until the
	// new pods run (envtest runs no StatefulSet controller, so they never do here).
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Replicas = 8 })
	h.reconcileUntil(rc, redisv1alpha1.PhaseScaling, 5)
	h.reconcile(rc)
	h.reconcile(rc)
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseScaling))
	g.Expect(got.Status.Reason).To(ContainSubstring("6/8 pods running"))
	g.Expect(*liveStatefulSet(t, rc).Spec.Replicas).To(BeEquivalentTo(8))
	g.Expect(h.redis.WriteNames()).To(BeEmpty())
	g.Expect(h.events()).To(ContainElement(ContainSubstring("Running -> Scaling")))
}

func TestForegroundDeletionWaitsForPods(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc := newCluster(newNamespace(t), 6)
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	h.reconcile(rc)
	h.reconcile(rc)
	servers := redistest.Start(t, 6, redistest.Config{})
	startPods(t, rc, servers)

	g.Expect(apiClient.Delete(ctx, get(t, rc))).To(Succeed())
	h.reconcile(rc)
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseDeleting))
	g.Expect(got.Status.Reason).To(ContainSubstring("Waiting for 6 pod(s)"))
	sts := liveStatefulSet(t, rc)
	g.Expect(sts.DeletionTimestamp).NotTo(BeNil(), "the StatefulSet is being deleted")
	g.Expect(sts.Finalizers).To(ContainElement(metav1.FinalizerDeleteDependents), "in the foreground")

	// The pods go (here by hand: envtest has no StatefulSet controller); then the CR goes.
	g.Expect(apiClient.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(rc.Namespace), client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(func() int {
		pods := &corev1.PodList{}
		_ = apiClient.List(ctx, pods, client.InNamespace(rc.Namespace))
		return len(pods.Items)
	}).Should(BeZero())
	h.reconcile(rc)
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(rc), &redisv1alpha1.RedisCluster{})).To(Succeed(),
		"the StatefulSet is still there, so is the RedisCluster")
	// The garbage collector would now remove the StatefulSet; envtest has none, so do it here.
	sts = liveStatefulSet(t, rc)
	sts.Finalizers = nil
	g.Expect(apiClient.Update(ctx, sts)).To(Succeed())
	h.reconcile(rc)
	err := apiClient.Get(ctx, client.ObjectKeyFromObject(rc), &redisv1alpha1.RedisCluster{})
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	g.Expect(err).To(HaveOccurred(), "the RedisCluster is gone")
}

func TestOrphanDeletionKeepsThePods(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc := newCluster(newNamespace(t), 6)
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	h.reconcile(rc)
	h.reconcile(rc)

	// kubectl delete --cascade=orphan
	g.Expect(apiClient.Delete(ctx, get(t, rc), client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
	h.reconcile(rc)
	got := &redisv1alpha1.RedisCluster{}
	if err := apiClient.Get(ctx, client.ObjectKeyFromObject(rc), got); err == nil {
		// envtest has no garbage collector to finish the orphaning; ours must be gone.
		g.Expect(got.Finalizers).NotTo(ContainElement(ForegroundFinalizer))
	}
	g.Expect(liveStatefulSet(t, rc).DeletionTimestamp).To(BeNil(), "the StatefulSet is left alone")
}

// The garbage collector may finish an orphaning delete (owner reference off, orphan
// finalizer off) before the operator reconciles it: the StatefulSet, no longer ours, is kept.
func TestOrphanDeletionFinishedByTheGarbageCollectorKeepsThePods(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc := newCluster(newNamespace(t), 6)
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	h.reconcile(rc)
	h.reconcile(rc)

	g.Expect(apiClient.Delete(ctx, get(t, rc), client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
	// What the garbage collector does, before the operator looks.
	sts := liveStatefulSet(t, rc)
	sts.OwnerReferences = nil
	g.Expect(apiClient.Update(ctx, sts)).To(Succeed())
	cur := get(t, rc)
	controllerutil.RemoveFinalizer(cur, metav1.FinalizerOrphanDependents)
	g.Expect(apiClient.Update(ctx, cur)).To(Succeed())

	h.reconcile(rc)
	got := &redisv1alpha1.RedisCluster{}
	if err := apiClient.Get(ctx, client.ObjectKeyFromObject(rc), got); err == nil {
		g.Expect(got.Finalizers).NotTo(ContainElement(ForegroundFinalizer))
	}
	g.Expect(liveStatefulSet(t, rc).DeletionTimestamp).To(BeNil(), "the orphaned StatefulSet is left alone")
}
