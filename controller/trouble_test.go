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
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// Tests for what the operator does when someone else changes its objects or the spec asks
// for something only the running cluster can judge: it never fights, never takes over an
// object it does not own, and says so with a Warning event and the status reason.

// formClusterOn is formCluster that returns the servers too, with a spec edit before the
// CR is created.
func formClusterOn(t *testing.T, h *harness, cfg redistest.Config, edit func(*redisv1alpha1.RedisCluster)) (*redisv1alpha1.RedisCluster, []*redistest.Server) {
	t.Helper()
	rc := newCluster(newNamespace(t), 6)
	if edit != nil {
		edit(rc)
	}
	if err := apiClient.Create(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	h.reconcile(rc)
	h.reconcile(rc)
	servers := redistest.Start(t, 6, cfg)
	startPods(t, rc, servers)
	h.reconcileUntil(rc, redisv1alpha1.PhaseRunning, 20)
	h.reconcile(rc)
	h.writes()
	h.events()
	h.redis.Reset()
	return rc, servers
}

// keyClient writes and reads keys on a Redis Cluster by following MOVED redirections
// with one plain client per node. (go-redis v8's ClusterClient races with itself under
// the race detector once its one-minute node GC fires, which a loaded machine reaches.)
type keyClient struct {
	password string
	first    string
	clients  map[string]*goredis.Client
}

func newKeyClient(t *testing.T, servers []*redistest.Server, password string) *keyClient {
	t.Helper()
	kc := &keyClient{password: password, first: servers[0].Addr, clients: map[string]*goredis.Client{}}
	t.Cleanup(func() {
		for _, c := range kc.clients {
			_ = c.Close()
		}
	})
	return kc
}

// do runs cmd on the node owning the key, found by following MOVED answers.
func (kc *keyClient) do(cmd func(*goredis.Client) error) error {
	addr := kc.first
	for hop := 0; ; hop++ {
		c, ok := kc.clients[addr]
		if !ok {
			c = goredis.NewClient(&goredis.Options{Addr: addr, Password: kc.password})
			kc.clients[addr] = c
		}
		err := cmd(c)
		moved, found := strings.CutPrefix(fmt.Sprint(err), "MOVED ")
		if err == nil || !found || hop == 3 {
			return err
		}
		_, addr, _ = strings.Cut(moved, " ")
	}
}

// writeKeys writes n keys through the cluster and returns them.
func writeKeys(t *testing.T, kc *keyClient, n int) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys := map[string]string{}
	for i := 0; i < n; i++ {
		k, v := fmt.Sprintf("key:%d", i), strconv.Itoa(i)
		if err := kc.do(func(c *goredis.Client) error { return c.Set(ctx, k, v, 0).Err() }); err != nil {
			t.Fatalf("failed to write %s: %v", k, err)
		}
		keys[k] = v
	}
	return keys
}

// lostKeys reads every key back and counts those missing or changed.
func lostKeys(t *testing.T, kc *keyClient, keys map[string]string) int {
	t.Helper()
	ctx := context.Background()
	lost := 0
	for k, v := range keys {
		var got string
		err := kc.do(func(c *goredis.Client) (err error) { got, err = c.Get(ctx, k).Result(); return err })
		if err != nil || got != v {
			lost++
		}
	}
	return lost
}

// scaleStatefulSet resizes the StatefulSet through its scale subresource under another
// field manager, as `kubectl scale sts` does.
func scaleStatefulSet(t *testing.T, rc *redisv1alpha1.RedisCluster, n int32) {
	t.Helper()
	sts := liveStatefulSet(t, rc)
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	if err := apiClient.SubResource("scale").Update(context.Background(), sts, client.WithSubResourceBody(scale), client.FieldOwner("kubectl-scale")); err != nil {
		t.Fatal(err)
	}
	if got := *liveStatefulSet(t, rc).Spec.Replicas; got != n {
		t.Fatalf("the StatefulSet has %d replicas after scaling to %d", got, n)
	}
}

// startPodsAt is startPods for pods of ordinals first, first+1, … (the StatefulSet
// controller creating the pods of a StatefulSet scaled out by hand).
func startPodsAt(t *testing.T, rc *redisv1alpha1.RedisCluster, first int, servers []*redistest.Server) {
	t.Helper()
	ctx := context.Background()
	for i, srv := range servers {
		host, port, _ := strings.Cut(srv.Addr, ":")
		p, _ := strconv.Atoi(port)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: fmt.Sprintf("%s-%d", rc.Name, first+i), Labels: redisv1alpha1.SelectorLabels(rc.Name)},
			Spec: corev1.PodSpec{NodeName: "node-0", Containers: []corev1.Container{{Name: "redis", Image: "redis:7.2",
				Ports: []corev1.ContainerPort{{Name: "redis", ContainerPort: int32(p)}}}}},
		}
		if err := apiClient.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: host, HostIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if err := apiClient.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
}

func warnings(events []string, reason string) []string {
	var out []string
	for _, e := range events {
		if strings.HasPrefix(e, corev1.EventTypeWarning+" "+reason+" ") {
			out = append(out, e)
		}
	}
	return out
}

// `kubectl scale sts demo --replicas=4` on a formed 6-pod cluster: the next reconcile puts
// the StatefulSet back to 6 with a Warning naming who resized it, the phase stays Running
// (no scale-in is started, no Redis write is made), every key is still there, and the
// operator does not apply again once it is put back.
func TestStatefulSetScaledInByHandIsPutBack(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	rc, servers := formClusterOn(t, h, redistest.Config{}, nil)
	kc := newKeyClient(t, servers, "")
	keys := writeKeys(t, kc, 1000)
	g.Expect(get(t, rc).Status.StatefulSetReplicas).To(BeEquivalentTo(6))

	scaleStatefulSet(t, rc, 4)
	h.reconcile(rc)
	g.Expect(*liveStatefulSet(t, rc).Spec.Replicas).To(BeEquivalentTo(6), "put back to the CR's size")
	reverted := warnings(h.events(), ReasonReverted)
	g.Expect(reverted).To(HaveLen(1))
	g.Expect(reverted[0]).To(ContainSubstring("resized to 4 pods outside the operator (by kubectl-scale); put back to 6"))
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	g.Expect(got.Status.Reason).To(ContainSubstring("put back to 6"))
	g.Expect(h.redis.WriteNames()).To(BeEmpty(), "a hand-made resize starts no scale-in")

	// Put back: the operator owns spec.replicas again, so it neither applies nor warns again.
	h.reconcile(rc)
	h.writes()
	h.reconcile(rc)
	h.reconcile(rc)
	g.Expect(h.writes()).To(BeEmpty())
	g.Expect(warnings(h.events(), ReasonReverted)).To(BeEmpty())
	g.Expect(get(t, rc).Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	g.Expect(lostKeys(t, kc, keys)).To(BeZero())
}

// `kubectl scale sts demo --replicas=8`: the two extra pods run Redis but are never met or
// given slots, and the StatefulSet goes back to 6.
func TestStatefulSetScaledOutByHandIsPutBackWithoutJoiningExtraPods(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc, servers := formClusterOn(t, h, redistest.Config{}, nil)
	kc := newKeyClient(t, servers, "")
	keys := writeKeys(t, kc, 1000)

	scaleStatefulSet(t, rc, 8)
	extra := redistest.Start(t, 2, redistest.Config{})
	startPodsAt(t, rc, 6, extra)
	for i := 0; i < 3; i++ {
		h.reconcile(rc)
	}
	g.Expect(*liveStatefulSet(t, rc).Spec.Replicas).To(BeEquivalentTo(6))
	g.Expect(warnings(h.events(), ReasonReverted)).To(ConsistOf(ContainSubstring("resized to 8 pods outside the operator")))
	g.Expect(get(t, rc).Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	g.Expect(h.redis.WriteNames()).To(BeEmpty(), "nothing is met, joined or migrated")
	f := redis.NewFactory(redis.Options{})
	defer f.Close()
	for _, srv := range extra {
		nodes, err := f.For(srv.Addr).ClusterNodes(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes).To(HaveLen(1), "the extra pod at %s knows only itself", srv.Addr)
	}
	g.Expect(lostKeys(t, kc, keys)).To(BeZero())
}

// CR shop renders Service shop-client (its client Service); CR shop-client renders
// Service shop-client too (its headless Service). The second never takes the object over,
// and both say why in their status and a Warning.
func TestCollidingClustersNeitherStealsTheOthersObject(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	ns := newNamespace(t)
	shop := newCluster(ns, 6)
	shop.Name = "shop"
	g.Expect(apiClient.Create(ctx, shop)).To(Succeed())
	h.reconcile(shop)
	h.reconcile(shop)
	svc := &corev1.Service{}
	g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-client"}, svc)).To(Succeed())
	before := svc.ResourceVersion
	g.Expect(metav1.GetControllerOf(svc).UID).To(Equal(get(t, shop).UID))

	other := newCluster(ns, 6)
	other.Name = "shop-client"
	g.Expect(apiClient.Create(ctx, other)).To(Succeed())
	h.events()
	for i := 0; i < 3; i++ {
		h.reconcile(other)
		h.reconcile(shop)
	}
	g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-client"}, svc)).To(Succeed())
	g.Expect(svc.ResourceVersion).To(Equal(before), "Service shop-client is untouched")
	g.Expect(metav1.GetControllerOf(svc).UID).To(Equal(get(t, shop).UID))
	g.Expect(svc.Spec.Selector).To(HaveKeyWithValue(redisv1alpha1.LabelInstance, "shop"))
	err := apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-client"}, &appsv1.StatefulSet{})
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	g.Expect(err).To(HaveOccurred(), "the refused cluster applies nothing at all")

	refused := get(t, other)
	g.Expect(refused.Status.Reason).To(ContainSubstring("Service shop-client is controlled by RedisCluster shop, not by this RedisCluster"))
	owner := get(t, shop)
	g.Expect(owner.Status.Phase).To(Equal(redisv1alpha1.PhaseCreating), "the owner goes on")
	g.Expect(owner.Status.Reason).To(ContainSubstring("RedisCluster shop-client would also render Service/shop-client"))
	events := h.events()
	g.Expect(warnings(events, ReasonNotOwner)).To(ConsistOf(ContainSubstring("Service shop-client is controlled by RedisCluster shop")))
	g.Expect(warnings(events, ReasonNameClash)).To(ContainElement(ContainSubstring("RedisCluster shop-client would also render Service/shop-client")))
	g.Expect(warnings(events, ReasonNameClash)).To(ContainElement(ContainSubstring("RedisCluster shop would also render Service/shop-client")))
}

// An object with a rendered name that nobody controls and the operator never made (a
// hand-made Service demo-client) is not taken over either.
func TestHandMadeObjectIsNotTakenOver(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mine := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-client"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}, Selector: map[string]string{"app": "web"}},
	}
	g.Expect(apiClient.Create(ctx, mine)).To(Succeed())
	rc := newCluster(ns, 6)
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	for i := 0; i < 3; i++ {
		h.reconcile(rc)
	}
	svc := &corev1.Service{}
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(mine), svc)).To(Succeed())
	g.Expect(svc.ResourceVersion).To(Equal(mine.ResourceVersion))
	g.Expect(get(t, rc).Status.Reason).To(ContainSubstring("Service demo-client exists and is not managed by the operator"))
	g.Expect(warnings(h.events(), ReasonNotOwner)).To(HaveLen(1), "said once")
}

// The password Secret of a formed cluster is deleted: the operator keeps reaching Redis
// with the password it last read (every instance still reads Ready, nothing falls back to
// no password), re-renders nothing, and names spec.passwordSecret in a Warning and the
// status reason. Once the Secret is back, the reason goes.
func TestDeletedPasswordSecretKeepsTheLastPassword(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	const password = "s3cret-pw"
	var secret *corev1.Secret
	rc, servers := formClusterOn(t, h, redistest.Config{Password: password}, func(rc *redisv1alpha1.RedisCluster) {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: "redis-auth"},
			Data: map[string][]byte{"password": []byte(password)}}
		if err := apiClient.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
		rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "redis-auth", Key: "password"}
		rc.Spec.DisablePassword = false
	})
	kc := newKeyClient(t, servers, password)
	keys := writeKeys(t, kc, 500)
	sts := liveStatefulSet(t, rc)

	g.Expect(apiClient.Delete(ctx, secret)).To(Succeed())
	for i := 0; i < 3; i++ {
		h.reconcile(rc)
	}
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	g.Expect(got.Status.Reason).To(ContainSubstring(`spec.passwordSecret.name: Secret "redis-auth" not found`))
	g.Expect(got.Status.Reason).To(ContainSubstring("keeps using the password the instances have"))
	g.Expect(got.Status.Conditions).To(HaveLen(6))
	for _, c := range got.Status.Conditions {
		g.Expect(c.Status).To(Equal(corev1.ConditionTrue), "%s: %s", c.Name, c.Message)
	}
	g.Expect(warnings(h.events(), ReasonInvalidSpec)).To(ConsistOf(ContainSubstring("spec.passwordSecret.name")))
	g.Expect(liveStatefulSet(t, rc).ResourceVersion).To(Equal(sts.ResourceVersion), "the pods are not re-rendered")
	g.Expect(lostKeys(t, kc, keys)).To(BeZero())

	secret.ResourceVersion = ""
	g.Expect(apiClient.Create(ctx, secret)).To(Succeed())
	h.reconcile(rc)
	g.Expect(get(t, rc).Status.Reason).NotTo(ContainSubstring("spec.passwordSecret"))
}

// spec.pod[0].configmap naming the operator's own NAME-config is refused, naming the
// field; the formed cluster keeps running and its ConfigMap is untouched.
func TestOwnConfigMapAsUserConfigIsRefused(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc, _ := formClusterOn(t, h, redistest.Config{}, nil)
	cm := &corev1.ConfigMap{}
	g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: "demo-config"}, cm)).To(Succeed())

	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) {
		s.Pod = []redisv1alpha1.RedisPodTemplate{{ConfigMap: "demo-config"}}
	})
	for i := 0; i < 3; i++ {
		h.reconcile(rc)
	}
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	g.Expect(got.Status.Reason).To(ContainSubstring(`spec.pod[0].configmap: "demo-config" is the ConfigMap the operator renders for this RedisCluster`))
	g.Expect(warnings(h.events(), ReasonInvalidSpec)).To(ConsistOf(ContainSubstring("spec.pod[0].configmap")))
	after := &corev1.ConfigMap{}
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(cm), after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(cm.ResourceVersion))
	g.Expect(h.redis.WriteNames()).To(BeEmpty())
}

// A move to Failed is a Warning event, not a Normal one.
func TestMoveToFailedIsAWarning(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	h.r.Options.CreateTimeout = 50 * time.Millisecond
	rc := newCluster(newNamespace(t), 6)
	g.Expect(apiClient.Create(context.Background(), rc)).To(Succeed())
	h.reconcile(rc)
	h.reconcile(rc)
	g.Expect(get(t, rc).Status.Phase).To(Equal(redisv1alpha1.PhaseCreating))
	time.Sleep(100 * time.Millisecond)
	h.reconcileUntil(rc, redisv1alpha1.PhaseFailed, 3)
	events := h.events()
	g.Expect(warnings(events, ReasonFailed)).To(ConsistOf(ContainSubstring("Creating -> Failed")))
	g.Expect(events).NotTo(ContainElement(HavePrefix(corev1.EventTypeNormal + " " + ReasonPhaseChanged + " Creating -> Failed")))
}

// An object the API server refuses (an annotation key Kubernetes does not allow, which the
// CRD cannot check) gives a Warning naming the object and the API server's message, and
// the same in the status reason.
func TestApplyRefusedByTheAPIServerIsAWarning(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	rc := newCluster(newNamespace(t), 6)
	rc.Spec.ClientService.Annotations = map[string]string{"not a valid key!": "x"}
	g.Expect(apiClient.Create(context.Background(), rc)).To(Succeed())
	h.reconcile(rc) // the finalizer
	var err error
	for i := 0; i < 2; i++ {
		_, err = h.r.Reconcile(context.Background(), reconcileRequest(rc))
	}
	g.Expect(err).To(MatchError(ContainSubstring("failed to apply Service demo-client")))
	refused := warnings(h.events(), ReasonApplyFailed)
	g.Expect(refused).To(HaveLen(1), "said once, not every reconcile")
	g.Expect(refused[0]).To(ContainSubstring("failed to apply Service demo-client"))
	g.Expect(refused[0]).To(ContainSubstring("metadata.annotations: Invalid value"))
	g.Expect(get(t, rc).Status.Reason).To(ContainSubstring("failed to apply Service demo-client"))
}

// The names the controller checks for clashes are the names the templates render.
func TestRenderedNamesMatchTheTemplates(t *testing.T) {
	g := NewWithT(t)
	if renderer == nil {
		t.Skip("envtest binaries are absent")
	}
	rc := newCluster("ns", 6)
	rc.Name = "shop"
	objs, err := renderer.Render(rc, "")
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	g.Expect(names).To(ConsistOf(renderedNames("shop")))
}

func reconcileRequest(rc *redisv1alpha1.RedisCluster) ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)}
}
