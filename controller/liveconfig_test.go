package controller

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// formTuned forms a 6-pod cluster whose redis.conf takes the user ConfigMap "tuning",
// holding conf, from the start.
func formTuned(t *testing.T, h *harness, conf string) (*redisv1alpha1.RedisCluster, []*redistest.Server) {
	t.Helper()
	ns := newNamespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tuning"}, Data: map[string]string{"redis.conf": conf}}
	if err := apiClient.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	rc := newCluster(ns, 6)
	rc.Spec.Pod = []redisv1alpha1.RedisPodTemplate{{ConfigMap: "tuning"}}
	if err := apiClient.Create(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	h.reconcile(rc)
	h.reconcile(rc)
	servers := redistest.Start(t, 6, redistest.Config{})
	startPods(t, rc, servers)
	h.reconcileUntil(rc, redisv1alpha1.PhaseRunning, 20)
	h.reconcile(rc) // records what the nodes run
	return rc, servers
}

// setUserConf replaces the redis.conf of the user ConfigMap "tuning".
func setUserConf(t *testing.T, ns, conf string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := apiClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "tuning"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["redis.conf"] = conf
	if err := apiClient.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}

// configOn reads one parameter from every server.
func configOn(t *testing.T, servers []*redistest.Server, name string) []string {
	t.Helper()
	var out []string
	for _, s := range servers {
		v, err := plainClient(t, s.Addr).ConfigGet(context.Background(), name).Result()
		if err != nil || len(v) != 2 {
			t.Fatalf("CONFIG GET %s on %s: %v %v", name, s.Addr, v, err)
		}
		out = append(out, v[1].(string))
	}
	return out
}

// plainClient is a client of one server, closed with the test.
func plainClient(t *testing.T, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func renderedRedisConf(t *testing.T, rc *redisv1alpha1.RedisCluster) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := apiClient.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: configMapName(rc.Name)}, cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["redis.conf"]
}

func configuredCondition(t *testing.T, rc *redisv1alpha1.RedisCluster) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(get(t, rc).Status.ClusterConditions, ConditionConfigured)
	if c == nil {
		t.Fatalf("no %s condition", ConditionConfigured)
	}
	return *c
}

// A change of live directives in the user ConfigMap reaches every node with CONFIG SET,
// with no new pod template and the phase Running throughout; a value Redis refuses
// changes nothing anywhere and says which directive; a node restarted since is given
// the settings again, and only it; a directive that needs a restart starts Upgrading.
func TestLiveConfiguration(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	rc, servers := formTuned(t, h, "maxmemory 100mb\nmaxmemory-policy allkeys-lru\n")
	g.Expect(configOn(t, servers, "maxmemory")).To(HaveEach("104857600"))
	got := get(t, rc)
	g.Expect(got.Status.LiveConfig).NotTo(BeNil())
	g.Expect(got.Status.LiveConfig.Settings).To(Equal(map[string]string{"maxmemory": "100mb", "maxmemory-policy": "allkeys-lru", "repl-diskless-sync-delay": "0"}))
	g.Expect(got.Status.LiveConfig.Nodes).To(HaveLen(6))
	g.Expect(configuredCondition(t, rc).Status).To(Equal(metav1.ConditionTrue))
	sts := liveStatefulSet(t, rc)
	h.events()

	// A live change: CONFIG SET on every node, nothing else.
	setUserConf(t, rc.Namespace, "maxmemory 200mb\nmaxmemory-policy volatile-lru\nhz 20\n")
	h.redis.Reset()
	for i := 0; i < 3; i++ {
		h.reconcile(rc)
		g.Expect(get(t, rc).Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	}
	g.Expect(configOn(t, servers, "maxmemory")).To(HaveEach("209715200"))
	g.Expect(configOn(t, servers, "maxmemory-policy")).To(HaveEach("volatile-lru"))
	g.Expect(configOn(t, servers, "hz")).To(HaveEach("20"))
	g.Expect(liveStatefulSet(t, rc).ResourceVersion).To(Equal(sts.ResourceVersion), "the StatefulSet is not re-applied")
	g.Expect(renderedRedisConf(t, rc)).To(ContainSubstring("maxmemory 200mb"), "a pod that starts later reads the new value")
	c := configuredCondition(t, rc)
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Reason).To(Equal(ConfiguredLive))
	g.Expect(c.Message).To(And(ContainSubstring("maxmemory"), ContainSubstring("hz"), ContainSubstring("no restart")))
	g.Expect(h.events()).To(ContainElement(And(ContainSubstring(ReasonConfigApplied), ContainSubstring(`maxmemory-policy "volatile-lru"`))))
	// The 3 changed settings and the rendered default repl-diskless-sync-delay go together.
	g.Expect(h.redis.Count("config set")).To(Equal(4*2+6*4), "4 settings tried on one node and set back, then set on each of 6 nodes, once")

	// An unchanged cluster sends no CONFIG command.
	h.redis.Reset()
	h.reconcile(rc)
	g.Expect(h.redis.Count("config set") + h.redis.Count("config get")).To(BeZero())

	// A value Redis refuses: nothing changes, the directive is named.
	setUserConf(t, rc.Namespace, "maxmemory 300mb\nmaxmemory-policy bogus\n")
	h.reconcile(rc)
	h.reconcile(rc)
	got = get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	g.Expect(got.Status.Reason).To(And(ContainSubstring("maxmemory-policy"), ContainSubstring("bogus"), ContainSubstring("spec.pod[0].configmap")))
	g.Expect(warnings(h.events(), ReasonConfigRefused)).To(ConsistOf(ContainSubstring(`maxmemory-policy "bogus"`)), "one Warning")
	g.Expect(configOn(t, servers, "maxmemory")).To(HaveEach("209715200"), "the trial node was set back")
	g.Expect(configOn(t, servers, "hz")).To(HaveEach("20"))
	g.Expect(renderedRedisConf(t, rc)).NotTo(ContainSubstring("bogus"), "a pod that starts later must not read it")
	g.Expect(configuredCondition(t, rc).Reason).To(Equal(ConfiguredRefused))

	// Set right again; hz left redis.conf and goes back to its default.
	setUserConf(t, rc.Namespace, "maxmemory 300mb\nmaxmemory-policy allkeys-lru\n")
	h.reconcile(rc)
	got = get(t, rc)
	g.Expect(got.Status.Reason).NotTo(ContainSubstring("bogus"))
	g.Expect(configOn(t, servers, "maxmemory")).To(HaveEach("314572800"))
	g.Expect(configOn(t, servers, "hz")).To(HaveEach("10"))
	g.Expect(configuredCondition(t, rc).Status).To(Equal(metav1.ConditionTrue))

	// A node restarted with older values gets the settings again, and only it.
	g.Expect(plainClient(t, servers[2].Addr).ConfigSet(context.Background(), "maxmemory", "1mb").Err()).To(Succeed())
	pod := &corev1.Pod{}
	g.Expect(apiClient.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: "demo-2"}, pod)).To(Succeed())
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "redis", RestartCount: 1, Ready: true}}
	g.Expect(apiClient.Status().Update(context.Background(), pod)).To(Succeed())
	h.redis.Reset()
	h.reconcile(rc)
	g.Expect(configOn(t, servers, "maxmemory")).To(HaveEach("314572800"))
	g.Expect(h.redis.Count("config set")).To(Equal(3), "maxmemory, maxmemory-policy and repl-diskless-sync-delay on demo-2 alone")
	g.Expect(get(t, rc).Status.LiveConfig.Nodes).To(ContainElement(HavePrefix("demo-2/")))
	g.Expect(strings.Join(get(t, rc).Status.LiveConfig.Nodes, " ")).To(ContainSubstring("/1"))

	// A directive that needs a restart rolls the pods.
	setUserConf(t, rc.Namespace, "maxmemory 300mb\nmaxmemory-policy allkeys-lru\nappendonly no\n")
	h.reconcileUntil(rc, redisv1alpha1.PhaseUpgrading, 3)
	g.Expect(liveStatefulSet(t, rc).Spec.Template.Annotations["redis.middleware.hc.cn/config-hash"]).NotTo(Equal(sts.Spec.Template.Annotations["redis.middleware.hc.cn/config-hash"]))
	c = configuredCondition(t, rc)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(ConfiguredRestartRequired))
	g.Expect(c.Message).To(ContainSubstring("appendonly"))
	g.Expect(h.events()).To(ContainElement(And(ContainSubstring(ReasonConfigRestart), ContainSubstring("appendonly"))))
}

// Degraded is True while the cluster serves with a master whose replica is gone.
func TestDegradedWhenAShardHasNoReplica(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	rc, servers := formRunning(t, h, redistest.Config{})
	h.reconcile(rc)
	c := meta.FindStatusCondition(get(t, rc).Status.ClusterConditions, ConditionDegraded)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))

	var replica, master string
	byID := map[string]string{}
	for _, ic := range get(t, rc).Status.Conditions {
		byID[ic.NodeID] = ic.Name
	}
	for i, ic := range get(t, rc).Status.Conditions {
		if ic.Type == topology.RoleSlave {
			replica, master = ic.Name, byID[ic.MasterNodeID]
			servers[i].Stop()
			break
		}
	}
	h.reconcile(rc)
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	c = meta.FindStatusCondition(got.Status.ClusterConditions, ConditionDegraded)
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "replica %s stopped: %s", replica, c.Message)
	g.Expect(c.Message).To(ContainSubstring(master))
}
