package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// The pure parts of external access: names, certificates, Services and announcements.

func TestHostnameOfExpandsEveryPlaceholder(t *testing.T) {
	g := NewWithT(t)
	g.Expect(hostnameOf("{{pod}}.redis.example.com", "demo", "prod", "demo-3")).To(Equal("demo-3.redis.example.com"))
	g.Expect(hostnameOf("r{{index}}.{{namespace}}.example.com", "demo", "prod", "demo-12")).To(Equal("r12.prod.example.com"))
	// A cluster whose name has a dash: the index is what follows NAME-.
	g.Expect(hostnameOf("n{{index}}-{{pod}}", "my-redis", "ns", "my-redis-0")).To(Equal("n0-my-redis-0"))
}

func TestUncoveredChecksTheSANsWildcardsIncluded(t *testing.T) {
	g := NewWithT(t)
	ca, err := redistest.NewCA()
	g.Expect(err).NotTo(HaveOccurred())
	data, err := ca.Issue("demo", "*.redis.example.com", "demo-0.other.example.com")
	g.Expect(err).NotTo(HaveOccurred())
	leaf, err := redis.TLSMaterial{Cert: data["tls.crt"], Key: data["tls.key"]}.Leaf()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(uncovered(leaf, []string{"demo-0.redis.example.com", "demo-0.other.example.com", "demo-1.other.example.com", "a.b.redis.example.com"})).
		To(Equal([]string{"demo-1.other.example.com", "a.b.redis.example.com"}), "a wildcard covers one label only")
	g.Expect(uncovered(nil, []string{"x"})).To(Equal([]string{"x"}), "no certificate read covers nothing")
}

func TestServiceEndpointReadsNodePortsAndLoadBalancers(t *testing.T) {
	g := NewWithT(t)
	np := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo-0-external"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "redis", Port: 6379, NodePort: 31000}, {Name: "cluster-bus", Port: 16379, NodePort: 31001}}}}
	e, why := serviceEndpoint(redisv1alpha1.ExternalNodePort, np, "198.18.0.11")
	g.Expect(why).To(BeEmpty())
	g.Expect(e).To(Equal(endpoint{host: "198.18.0.11", port: 31000, busPort: 31001}))
	_, why = serviceEndpoint(redisv1alpha1.ExternalNodePort, np, "")
	g.Expect(why).To(ContainSubstring("no node IP"))
	np.Spec.Ports[1].NodePort = 0
	_, why = serviceEndpoint(redisv1alpha1.ExternalNodePort, np, "198.18.0.11")
	g.Expect(why).To(ContainSubstring("no node ports yet"))

	lb := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo-0-external"}}
	_, why = serviceEndpoint(redisv1alpha1.ExternalLoadBalancer, lb, "")
	g.Expect(why).To(ContainSubstring("has no address yet"))
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb-1.elb.example.com"}}
	e, why = serviceEndpoint(redisv1alpha1.ExternalLoadBalancer, lb, "")
	g.Expect(why).To(BeEmpty())
	g.Expect(e.addr()).To(Equal("lb-1.elb.example.com:6379"))
}

func TestExternalEndpointWaitsForALoadBalancerWithinItsBound(t *testing.T) {
	g := NewWithT(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo-0-external", CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Minute))}}
	s := &scope{live: map[string]client.Object{"Service/demo-0-external": svc}, now: time.Now()}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-0"}}
	_, why, waiting := externalEndpoint(s, redisv1alpha1.ExternalLoadBalancer, p)
	g.Expect(why).NotTo(BeEmpty())
	g.Expect(waiting).To(BeTrue(), "a minute-old load balancer may still get its address")
	svc.CreationTimestamp = metav1.NewTime(time.Now().Add(-loadBalancerBound - time.Second))
	_, why, waiting = externalEndpoint(s, redisv1alpha1.ExternalLoadBalancer, p)
	g.Expect(why).NotTo(BeEmpty())
	g.Expect(waiting).To(BeFalse(), "past the bound it is a Warning")
	_, why, waiting = externalEndpoint(s, redisv1alpha1.ExternalNodePort, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-1"}})
	g.Expect(why).To(ContainSubstring("not created yet"))
	g.Expect(waiting).To(BeFalse())
}

func TestAnnouncementByTypeModeAndTLS(t *testing.T) {
	g := NewWithT(t)
	np := endpoint{host: "198.18.0.11", port: 31000, busPort: 31001}
	g.Expect(announcement(redisv1alpha1.ExternalNodePort, np)).To(Equal([]redis.Setting{
		{Name: announceBusPort, Value: "31001"}, {Name: announcePort, Value: "31000"}, {Name: announceIP, Value: "198.18.0.11"},
		{Name: announceHostname, Value: ""}, {Name: preferredType, Value: "ip"}}))
	named := np
	named.name, named.tls = "demo-0.redis.example.com", true
	g.Expect(announcement(redisv1alpha1.ExternalNodePort, named)).To(Equal([]redis.Setting{
		{Name: announceBusPort, Value: "31001"}, {Name: announceTLSPort, Value: "31000"}, {Name: announceIP, Value: "198.18.0.11"},
		{Name: announceHostname, Value: "demo-0.redis.example.com"}, {Name: preferredType, Value: "hostname"}}))
	g.Expect(named.clientAddr()).To(Equal("demo-0.redis.example.com:31000"))
	g.Expect(named.addr()).To(Equal("198.18.0.11:31000"), "what CLUSTER NODES shows, read back as the pod")

	lb := endpoint{host: "203.0.113.7", port: 6379}
	g.Expect(announcement(redisv1alpha1.ExternalLoadBalancer, lb)).To(Equal([]redis.Setting{
		{Name: announceHostname, Value: "203.0.113.7"}, {Name: preferredType, Value: "hostname"}}))
	lb.name = "demo-0.redis.example.com"
	g.Expect(announcement(redisv1alpha1.ExternalLoadBalancer, lb)).To(Equal([]redis.Setting{
		{Name: announceHostname, Value: "demo-0.redis.example.com"}, {Name: preferredType, Value: "hostname"}}))
}

func TestAnnouncesComparesWhatTheNodeShows(t *testing.T) {
	g := NewWithT(t)
	np := endpoint{host: "198.18.0.11", port: 31000, busPort: 31001}
	g.Expect(announces(redisv1alpha1.ExternalNodePort, "198.18.0.11:31000", "", 31001, np)).To(BeTrue())
	g.Expect(announces(redisv1alpha1.ExternalNodePort, "198.18.0.12:31000", "", 31001, np)).To(BeFalse(), "the pod moved to another node")
	g.Expect(announces(redisv1alpha1.ExternalNodePort, "198.18.0.11:31000", "", 16379, np)).To(BeFalse(), "the bus port not set yet")
	g.Expect(announces(redisv1alpha1.ExternalNodePort, "198.18.0.11:31000", "old.example.com", 31001, np)).To(BeFalse(), "a name left from before")
	np.name = "demo-0.redis.example.com"
	g.Expect(announces(redisv1alpha1.ExternalNodePort, "198.18.0.11:31000", "", 31001, np)).To(BeFalse(), "the name not announced yet")
	g.Expect(announces(redisv1alpha1.ExternalNodePort, "198.18.0.11:31000", "demo-0.redis.example.com", 31001, np)).To(BeTrue())
	lb := endpoint{host: "203.0.113.7", port: 6379}
	g.Expect(announces(redisv1alpha1.ExternalLoadBalancer, "10.244.1.5:6379", "203.0.113.7", 16379, lb)).To(BeTrue(), "the pod address stays in CLUSTER NODES")
	g.Expect(announces(redisv1alpha1.ExternalLoadBalancer, "10.244.1.5:6379", "", 16379, lb)).To(BeFalse())
}

func TestUncoveredMessageNamesTheFieldTheSecretAndTheSANs(t *testing.T) {
	g := NewWithT(t)
	ca, err := redistest.NewCA()
	g.Expect(err).NotTo(HaveOccurred())
	data, err := ca.Issue("demo")
	g.Expect(err).NotTo(HaveOccurred())
	leaf, err := redis.TLSMaterial{Cert: data["tls.crt"], Key: data["tls.key"]}.Leaf()
	g.Expect(err).NotTo(HaveOccurred())
	rc := &redisv1alpha1.RedisCluster{Spec: redisv1alpha1.RedisClusterSpec{TLS: &redisv1alpha1.TLSSpec{SecretName: "demo-cert"}}}
	msg := uncoveredMessage("spec.externalAccess.hostname", rc, &tlsState{leaf: leaf}, []string{"demo-0.redis.example.com"})
	g.Expect(msg).To(HavePrefix("spec.externalAccess.hostname: "))
	g.Expect(msg).To(ContainSubstring("Secret demo-cert"))
	g.Expect(msg).To(ContainSubstring("does not cover demo-0.redis.example.com (its DNS SANs: demo)"))
}

// A node port another Service holds: every per-pod Service is refused, said with the
// port and the Service, and the cluster keeps serving on its pod addresses.
func TestNodePortClashIsSaidAndTheClusterServes(t *testing.T) {
	h := newHarness(t)
	const base = 31700
	rc, servers := formClusterOn(t, h, redistest.Config{}, func(rc *redisv1alpha1.RedisCluster) {
		// The other Service is created in the cluster's namespace before the cluster.
		var ports []corev1.ServicePort
		for i := 0; i < 12; i++ {
			ports = append(ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(1000 + i), NodePort: int32(base + i)})
		}
		taken := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: "taken"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: ports, Selector: map[string]string{"x": "y"}}}
		if err := apiClient.Create(context.Background(), taken); err != nil {
			t.Fatal(err)
		}
		rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalNodePort, NodePortBase: ptr.To[int32](base)}
	})
	t.Cleanup(func() {
		_ = apiClient.Delete(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: "taken"}})
	})
	h.reconcile(rc)
	got := get(t, rc)
	g := NewWithT(t)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	g.Expect(got.Status.Reason).To(ContainSubstring("spec.externalAccess: no external address announced for demo-0: failed to apply Service demo-0-external"))
	g.Expect(got.Status.Reason).To(ContainSubstring(fmt.Sprintf("%d: provided port is already allocated", base)))
	for _, c := range got.Status.Conditions {
		g.Expect(c.ExternalAddress).To(BeEmpty())
	}
	// formClusterOn drained the events of forming; the refusal was said then.
	expectClusterServes(t, servers)
}

// A load balancer without an address is pending for loadBalancerBound (status.reason, no
// Warning, a look again soon), then a Warning naming the Service; the cluster serves.
func TestLoadBalancerWithoutAddressIsPendingThenAWarning(t *testing.T) {
	h := newHarness(t)
	rc, servers := formClusterOn(t, h, redistest.Config{}, func(rc *redisv1alpha1.RedisCluster) {
		// A name too: rendered, and announced only once the load balancer has an address.
		rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalLoadBalancer, Hostname: "{{pod}}.lb.example.com"}
	})
	g := NewWithT(t)
	res := h.reconcile(rc)
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	g.Expect(got.Status.Reason).To(ContainSubstring("spec.externalAccess: pending, waiting up to 3m0s for demo-0: the load balancer of Service demo-0-external has no address yet"))
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	g.Expect(res.RequeueAfter).To(BeNumerically("<=", 15*time.Second))
	g.Expect(h.events()).NotTo(ContainElement(ContainSubstring(ReasonExternalAccess)))

	h.r.now = func() time.Time { return time.Now().Add(loadBalancerBound + time.Minute) }
	h.reconcile(rc)
	got = get(t, rc)
	g.Expect(got.Status.Reason).To(ContainSubstring("spec.externalAccess: no external address announced for demo-0: the load balancer of Service demo-0-external has no address yet"))
	g.Expect(h.events()).To(ContainElement(HavePrefix("Warning " + ReasonExternalAccess + " spec.externalAccess: no external address announced for demo-0")))
	expectClusterServes(t, servers)
}

// expectClusterServes writes keys through the cluster of servers and reads them back.
func expectClusterServes(t *testing.T, servers []*redistest.Server) {
	t.Helper()
	kc := newKeyClient(t, servers, "")
	if lost := lostKeys(t, kc, writeKeys(t, kc, 50)); lost > 0 {
		t.Fatalf("%d keys lost", lost)
	}
}

// spec.announceHostnames on real servers: each node announces its pod's DNS name, which
// a MOVED then gives; turned off, each announces its IP again. The cluster serves
// throughout.
func TestAnnounceHostnamesOnAndOff(t *testing.T) {
	h := newHarness(t)
	rc, servers := formClusterOn(t, h, redistest.Config{}, func(rc *redisv1alpha1.RedisCluster) { rc.Spec.AnnounceHostnames = true })
	h.reconcile(rc)
	g := NewWithT(t)
	ctx := context.Background()
	ownHostname := func(addr string) string {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		defer c.Close()
		text, err := c.ClusterNodes(ctx).Result()
		g.Expect(err).NotTo(HaveOccurred())
		nodes, err := topology.ParseClusterNodes(text)
		g.Expect(err).NotTo(HaveOccurred())
		for _, n := range nodes {
			if n.Myself {
				return n.Hostname
			}
		}
		return "?"
	}
	for i, s := range servers {
		g.Expect(ownHostname(s.Addr)).To(Equal(fmt.Sprintf("demo-%d.demo.%s.svc.cluster.local", i, rc.Namespace)))
	}
	// A MOVED names the owner by its name and port.
	c := goredis.NewClient(&goredis.Options{Addr: servers[0].Addr})
	defer c.Close()
	var moved string
	for i := 0; moved == ""; i++ {
		if err := c.Set(ctx, fmt.Sprintf("k%d", i), "v", 0).Err(); err != nil {
			moved = err.Error()
		}
	}
	g.Expect(moved).To(MatchRegexp(`^MOVED [0-9]+ demo-[0-9]\.demo\.` + rc.Namespace + `\.svc\.cluster\.local:[0-9]+$`))
	g.Expect(get(t, rc).Status.Conditions[0].ExternalAddress).To(BeEmpty(), "externalAddress is for spec.externalAccess")
	// The node the name is of (resolved here by hand: no cluster DNS) serves the key.
	var slot, i int
	_, err := fmt.Sscanf(moved, "MOVED %d demo-%d.", &slot, &i)
	g.Expect(err).NotTo(HaveOccurred())
	owner := goredis.NewClient(&goredis.Options{Addr: servers[i].Addr})
	defer owner.Close()
	key := ""
	for j := 0; key == ""; j++ {
		if k := fmt.Sprintf("k%d", j); topology.KeySlot(k) == slot {
			key = k
		}
	}
	g.Expect(owner.Set(ctx, key, "v", 0).Err()).To(Succeed())

	update(t, rc, func(spec *redisv1alpha1.RedisClusterSpec) { spec.AnnounceHostnames = false })
	h.reconcile(rc)
	for _, s := range servers {
		g.Expect(ownHostname(s.Addr)).To(BeEmpty())
	}
	g.Expect(c.Set(ctx, "k-after", "v", 0).Err()).To(Or(Succeed(), MatchError(MatchRegexp(`^MOVED [0-9]+ 127\.0\.0\.1:[0-9]+$`))))
	expectClusterServes(t, servers)
}
