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
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// These tests play the StatefulSet controller (revisions in its status and the pods'
// controller-revision-hash labels) and the kubelet (pod statuses) around real
// redis-servers, and drive the upgrade through a lagging replica, a pod that crash-loops
// on the new template, and the spec set back.

// setRevision plays the StatefulSet controller: the update revision is rev, computed for
// the current generation.
func setRevision(t *testing.T, rc *redisv1alpha1.RedisCluster, rev string) {
	t.Helper()
	sts := liveStatefulSet(t, rc)
	sts.Status.ObservedGeneration = sts.Generation
	sts.Status.Replicas, sts.Status.ReadyReplicas = 6, 6
	sts.Status.CurrentRevision, sts.Status.UpdateRevision = rev, rev
	if err := apiClient.Status().Update(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
}

// labelPods puts every pod on revision rev.
func labelPods(t *testing.T, rc *redisv1alpha1.RedisCluster, rev string) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := apiClient.List(context.Background(), pods, client.InNamespace(rc.Namespace)); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		p.Labels[appsv1.ControllerRevisionHashLabelKey] = rev
		if err := apiClient.Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
}

// enterUpgrade puts every pod on rev-old and sets spec.version: Upgrading applies the new
// template, and the "StatefulSet controller" computes rev-new.
func enterUpgrade(t *testing.T, h *harness, rc *redisv1alpha1.RedisCluster, version string) {
	t.Helper()
	setRevision(t, rc, "rev-old")
	labelPods(t, rc, "rev-old")
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Version = version })
	h.reconcileUntil(rc, redisv1alpha1.PhaseUpgrading, 5)
	h.reconcile(rc)
	setRevision(t, rc, "rev-new")
}

// deletedPods lists the pods that were asked to go (graceful deletion leaves them with a
// deletionTimestamp: envtest has no kubelet to finish it).
func deletedPods(t *testing.T, rc *redisv1alpha1.RedisCluster) []string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := apiClient.List(context.Background(), pods, client.InNamespace(rc.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			out = append(out, p.Name)
		}
	}
	return out
}

// recreatePod plays the StatefulSet controller and the kubelet for a deleted pod: it is
// removed for good and created again on rev at addr, Ready or crash-looping.
func recreatePod(t *testing.T, rc *redisv1alpha1.RedisCluster, name, addr, rev string, crashing bool) {
	t.Helper()
	ctx := context.Background()
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: name}}
	if err := apiClient.Delete(ctx, old, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func() bool {
		return apiClient.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Pod{}) != nil
	}, 10*time.Second, 50*time.Millisecond).Should(BeTrue())
	host, port, _ := strings.Cut(addr, ":")
	p, _ := strconv.Atoi(port)
	labels := redisv1alpha1.SelectorLabels(rc.Name)
	labels[appsv1.ControllerRevisionHashLabelKey] = rev
	ord, _ := ordinal(rc.Name, name)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", ord%3), Containers: []corev1.Container{{Name: "redis", Image: "redis:7.2",
			Ports: []corev1.ContainerPort{{Name: "redis", ContainerPort: int32(p)}}}}},
	}
	if err := apiClient.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	ready := corev1.ConditionTrue
	cs := corev1.ContainerStatus{Name: "redis", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	if crashing {
		ready = corev1.ConditionFalse
		cs = corev1.ContainerStatus{Name: "redis", RestartCount: 3,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: host, HostIP: "10.0.0." + strconv.Itoa(ord%3+1),
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}},
		ContainerStatuses: []corev1.ContainerStatus{cs}}
	if err := apiClient.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// replicaAndMaster finds a replica among the servers and its master, by CLUSTER NODES.
func replicaAndMaster(t *testing.T, servers []*redistest.Server) (replica, master int) {
	t.Helper()
	for r, m := range mastersOf(t, servers) {
		return r, m
	}
	t.Fatal("no replica among the servers")
	return 0, 0
}

// mastersOf maps each replica among the servers to its master (indexes into servers), by
// CLUSTER NODES.
func mastersOf(t *testing.T, servers []*redistest.Server) map[int]int {
	t.Helper()
	ids := map[string]int{}
	masterOf := map[int]string{}
	for i, s := range servers {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr})
		nodes, err := topology.ParseClusterNodes(c.ClusterNodes(context.Background()).Val())
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.Myself {
				ids[n.ID] = i
				if n.Replica {
					masterOf[i] = n.MasterID
				}
			}
		}
	}
	out := map[int]int{}
	for r, id := range masterOf {
		out[r] = ids[id]
	}
	return out
}

// clusterClient is a cluster-aware client over addrs; its slot table comes from CLUSTER
// NODES (go-redis v8 cannot parse Redis 7's CLUSTER SLOTS).
func clusterClient(t *testing.T, addrs []string) *goredis.ClusterClient {
	f := redis.NewFactory(redis.Options{})
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs,
		ClusterSlots: func(ctx context.Context) ([]goredis.ClusterSlot, error) { return redis.ClusterSlots(ctx, f, addrs) }})
	t.Cleanup(func() { c.Close(); f.Close() })
	return c
}

func TestUpgradeWaitsForSyncStopsOnCrashLoopAndRollsBack(t *testing.T) {
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

	// 1. A replica that has not processed its master's latest writes holds the roll back.
	r, _ := replicaAndMaster(t, servers)
	paused := goredis.NewClient(&goredis.Options{Addr: servers[r].Addr})
	defer paused.Close()
	g.Expect(paused.Do(ctx, "client", "pause", "20000", "write").Err()).To(Succeed())
	for i := 0; i < 300; i++ {
		g.Expect(cc.Set(ctx, fmt.Sprintf("late-%d", i), i, 0).Err()).To(Succeed())
	}
	h.reconcile(rc)
	got := get(t, rc)
	g.Expect(got.Status.Reason).To(ContainSubstring(fmt.Sprintf("Waiting for replica demo-%d to catch up with its master", r)))
	g.Expect(got.Status.Reason).To(ContainSubstring("bytes behind its master"))
	g.Expect(got.Status.Reason).To(ContainSubstring("before restarting the next pod"))
	g.Expect(deletedPods(t, rc)).To(BeEmpty(), "no pod restarts while a replica lags")
	g.Expect(paused.Do(ctx, "client", "unpause").Err()).To(Succeed())

	// 2. Caught up: the first replica is restarted.
	h.reconcile(rc)
	gone := deletedPods(t, rc)
	g.Expect(gone).To(HaveLen(1), get(t, rc).Status.Reason)
	bad, _ := ordinal(rc.Name, gone[0])

	// 3. It comes back on rev-new and crash-loops (its Redis does not run): the roll stops,
	// says so once, and deletes nothing more.
	servers[bad].Stop()
	recreatePod(t, rc, gone[0], servers[bad].Addr, "rev-new", true)
	h.events()
	for i := 0; i < 4; i++ {
		h.reconcile(rc)
	}
	got = get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseUpgrading))
	g.Expect(got.Status.Reason).To(ContainSubstring(fmt.Sprintf("Upgrade stopped: pod %s on the new template is crash-looping (container redis, last exit code 1)", gone[0])))
	g.Expect(deletedPods(t, rc)).To(BeEmpty())
	var warnings []string
	for _, e := range h.events() {
		if strings.HasPrefix(e, "Warning "+ReasonUpgradeStopped) {
			warnings = append(warnings, e)
		}
	}
	g.Expect(warnings).To(HaveLen(1), "one Warning for a lasting stop")

	// 4. The spec is set back: the StatefulSet's update revision is the old one again, and
	// the failing pod, now outdated, is replaced although the cluster is not whole.
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Version = "7.2" })
	h.reconcile(rc)
	setRevision(t, rc, "rev-old")
	h.reconcile(rc)
	g.Expect(deletedPods(t, rc)).To(ConsistOf(gone[0]), get(t, rc).Status.Reason)
	g.Expect(h.events()).To(ContainElement(ContainSubstring("Replacing " + gone[0] + ", which is crash-looping")))

	// 5. It comes back on the old template with its nodes.conf (its keys are re-synced from
	// its master): healed, synced, Running, every key there.
	back, err := redistest.StartIn(servers[bad].Dir, redistest.Config{NodeTimeout: time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(back.Stop)
	recreatePod(t, rc, gone[0], back.Addr, "rev-old", false)
	h.reconcileUntil(rc, redisv1alpha1.PhaseRunning, 60)
	g.Expect(deletedPods(t, rc)).To(BeEmpty())
	addrs := redistest.Addrs(servers)
	addrs[bad] = back.Addr
	check := clusterClient(t, addrs)
	for _, prefix := range []string{"k", "late"} {
		for i := 0; i < 300; i++ {
			g.Expect(check.Get(ctx, fmt.Sprintf("%s-%d", prefix, i)).Int()).To(Equal(i))
		}
	}
	c := goredis.NewClient(&goredis.Options{Addr: back.Addr})
	defer c.Close()
	rep, err := topology.ParseReplication(c.Info(ctx, "replication").Val())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.InSync()).To(BeTrue(), "the replaced pod is a replica in sync again: %+v", rep)
}

func TestPodFailure(t *testing.T) {
	now := time.Now()
	created := metav1.NewTime(now.Add(-time.Hour))
	pod := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-10 * time.Second))}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		edit(p)
		return p
	}
	cases := map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"starting": {pod(func(p *corev1.Pod) {}), ""},
		"ready": {pod(func(p *corev1.Pod) {
			p.Status.Conditions[0].Status = corev1.ConditionTrue
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "redis", RestartCount: 5}}
		}), ""},
		"unschedulable": {pod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"})
		}), "is Pending: it cannot be scheduled (0/3 nodes are available)"},
		"restarting between back-offs": {pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "redis", RestartCount: 1,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}), "is crash-looping (container redis)"},
		"image": {pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "redis",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
		}), "cannot pull its image (container redis)"},
		"not ready too long": {pod(func(p *corev1.Pod) { p.CreationTimestamp = created }), "has not been Ready for more than 2m0s"},
		"not ready lately": {pod(func(p *corev1.Pod) {
			p.CreationTimestamp = created
			p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-time.Minute))
		}), ""},
	}
	for name, c := range cases {
		if got := podFailure(c.pod, now); got != c.want {
			t.Errorf("%s: podFailure = %q, want %q", name, got, c.want)
		}
	}
}

// The old master of a shard, failed over to a replica on a newer server, is the next pod to
// restart; if that newer master refused it a partial resync, it asks for a full sync its
// server cannot load and never catches up. Such a replica (its server cannot read its
// master's RDB) is not waited for: it is restarted onto the new server, which can. A
// lagging replica whose server reads its master's still holds the roll.
func TestUpgradeRestartsAReplicaThatCannotLoadItsMaster(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc, servers := formRunning(t, h, redistest.Config{NodeTimeout: time.Second})
	cc := clusterClient(t, redistest.Addrs(servers))
	enterUpgrade(t, h, rc, "8.0")

	// The first replica by ordinal is the next pod to restart; it lags its master.
	first, master := -1, -1
	masters := mastersOf(t, servers)
	for i := range servers {
		if m, ok := masters[i]; ok {
			first, master = i, m
			break
		}
	}
	g.Expect(first).NotTo(Equal(-1))
	paused := goredis.NewClient(&goredis.Options{Addr: servers[first].Addr})
	defer paused.Close()
	g.Expect(paused.Do(ctx, "client", "pause", "20000", "write").Err()).To(Succeed())
	defer paused.Do(ctx, "client", "unpause")
	for i := 0; i < 300; i++ {
		g.Expect(cc.Set(ctx, fmt.Sprintf("late-%d", i), i, 0).Err()).To(Succeed())
	}
	pod := fmt.Sprintf("%s-%d", rc.Name, first)
	h.reconcile(rc)
	g.Expect(get(t, rc).Status.Reason).To(ContainSubstring("Waiting for replica " + pod + " to catch up"))
	g.Expect(deletedPods(t, rc)).To(BeEmpty(), "a lagging replica that can load its master's sync holds the roll")

	// Its master runs Redis 8.0 (RDB 12) as far as the operator learnt; it runs 7.0 (RDB 10).
	pods := &corev1.PodList{}
	g.Expect(apiClient.List(ctx, pods, client.InNamespace(rc.Namespace))).To(Succeed())
	learnt := map[string]topology.Server{}
	for i := range pods.Items {
		srv := topology.Server{Name: topology.ServerRedis, Version: "7.0.15"}
		if pods.Items[i].Name == fmt.Sprintf("%s-%d", rc.Name, master) {
			srv.Version = "8.0.2"
		}
		learnt[processID(&pods.Items[i])] = srv
	}
	h.r.memory(rc).servers = learnt
	h.reconcile(rc)
	g.Expect(deletedPods(t, rc)).To(ConsistOf(pod), get(t, rc).Status.Reason)
}
