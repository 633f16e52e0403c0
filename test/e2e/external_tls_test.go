//go:build e2e

package e2e

import (
	"context"
	"hash/fnv"
	"sort"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

const externalTLSSample = "config/samples/redis_v1alpha1_rediscluster_external_tls.yaml"

// nameResolver is a client's own DNS for the names of domain: each name to one of the
// Kubernetes nodes' IPs (as a zone file would; a node port is served on every node), no
// other name.
func nameResolver(domain string, nodes []string) func(context.Context, string) (string, bool) {
	return func(_ context.Context, host string) (string, bool) {
		if !strings.HasSuffix(host, "."+domain) {
			return "", false
		}
		h := fnv.New32a()
		h.Write([]byte(host))
		return nodes[int(h.Sum32())%len(nodes)], true
	}
}

// TestExternalAccessTLSHostnames applies the sample of hostname mode over TLS (NodePort,
// names {{pod}}.redis.example.com). First with a certificate whose SANs do not cover the
// names: the cluster forms and serves inside Kubernetes, no name is announced, and
// status.reason and a Warning event ExternalCertificate name the field and the names.
// Then the Secret gets a certificate with *.redis.example.com: every node announces its
// name and TLS node port. A client outside the pod network with its own resolver (names
// to node IPs only, no other address) and TLS checking each server's certificate against
// the name it dialed loads 100,000 keys and writes through a scale-out from 3 to 4
// masters, the deletion of a master's pod and an upgrade rolling every pod, as
// TestExternalAccessNodePort does: every redirect names a name of the domain, no key and
// no acknowledged write is lost.
func TestExternalAccessTLSHostnames(t *testing.T) {
	t.Parallel()
	testStart := time.Now()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const ns, name, pw, domain = "external-tls", "outside-tls", "external-tls-pw", "redis.example.com"
	ca, err := redistest.NewCA()
	g.Expect(err).NotTo(HaveOccurred())
	bad, err := ca.Issue(name)
	g.Expect(err).NotTo(HaveOccurred())
	formTLSSample(ctx, t, ns, externalTLSSample, name, "outside-tls-cert", bad, pw)
	formed := time.Since(testStart)

	// The names are not covered: refused with a reason, the cluster serving inside.
	g.Eventually(func(g Gomega) {
		rc := getCluster(ctx, t, ns, name)
		g.Expect(rc.Status.Reason).To(ContainSubstring("spec.externalAccess.hostname: the certificate of spec.tls.secretName (Secret outside-tls-cert) does not cover " + name + "-0." + domain))
		for _, c := range rc.Status.Conditions {
			g.Expect(c.ExternalAddress).To(BeEmpty(), "%s announces a name its certificate does not cover", c.Name)
		}
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
	evs, err := stack.Events(ctx, getCluster(ctx, t, ns, name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(evs).To(ContainElement(WithTransform(func(e corev1.Event) string { return e.Type + " " + e.Reason + " " + e.Message },
		HavePrefix("Warning ExternalCertificate spec.externalAccess.hostname: "))))
	badCfg, err := redistest.ClientConfig(bad)
	g.Expect(err).NotTo(HaveOccurred())
	inside := stack.RouterFor(ns, name, pw)
	defer inside.Close()
	inside.SetTLS(badCfg)
	g.Expect(inside.Do(ctx, "inside:0", "set", "inside:0", "served").Err()).To(Succeed(), "the cluster serves inside Kubernetes")
	t.Logf("STAGE certificate without the names: formed in %v, refused with a reason and a Warning, serving inside", formed.Round(time.Second))

	// A certificate that covers the names: each node announces its name.
	good, err := ca.Issue(name, "*."+domain)
	g.Expect(err).NotTo(HaveOccurred())
	sec := &corev1.Secret{}
	g.Expect(kubeClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: "outside-tls-cert"}, sec)).To(Succeed())
	sec.Data = good
	began := time.Now()
	g.Expect(kubeClient(t).Update(ctx, sec)).To(Succeed())
	serial := servedSerial(t, good)
	announced := func(g Gomega, n int) {
		rc := getCluster(ctx, t, ns, name)
		g.Expect(rc.Status.TLS).NotTo(BeNil())
		g.Expect(rc.Status.TLS.Serial).To(Equal(serial))
		g.Expect(announcedNames(g, rc, domain)).To(HaveLen(n), "reason: %s", rc.Status.Reason)
	}
	cfg, err := redistest.ClientConfig(good)
	g.Expect(err).NotTo(HaveOccurred())
	var nodes []string
	for ip := range nodeIPs(ctx, t) {
		nodes = append(nodes, ip)
	}
	sort.Strings(nodes)
	d := &outsideDialer{resolve: nameResolver(domain, nodes), tls: cfg}
	r := framework.NewRouter(statusSeeds(t, ns, name), pw)
	r.PreferHostnames()
	defer r.Close()
	o := newOutsideClient(ns, name, 6, r, d, pw, cfg, announced)
	o.waitAnnounced(ctx, t, 3*time.Minute)
	t.Logf("STAGE certificate with *.%s: every node serves it and announces its name %v later: %v",
		domain, time.Since(began).Round(100*time.Millisecond), announcedNames(g, getCluster(ctx, t, ns, name), domain))

	// Each node has announced its name; the others learn it by gossip, within a second or
	// two: until then one of them could still send a client to a pod IP.
	g.Eventually(func(g Gomega) {
		for pod, addr := range announcedNames(g, getCluster(ctx, t, ns, name), domain) {
			c := goredis.NewClient(&goredis.Options{Addr: addr, Password: pw, Dialer: d.dial})
			text, err := c.ClusterNodes(ctx).Result()
			c.Close()
			g.Expect(err).NotTo(HaveOccurred(), "CLUSTER NODES on %s", pod)
			seen, err := topology.ParseClusterNodes(text)
			g.Expect(err).NotTo(HaveOccurred())
			for _, n := range seen {
				g.Expect(n.Hostname).To(HaveSuffix("."+domain), "%s sees a node without its name:\n%s", pod, text)
			}
		}
	}, time.Minute, 200*time.Millisecond).Should(Succeed())

	o.writeThrough(ctx, t, "TLS hostnames", scaleOut3to4, masterDeleted, upgradeRolled)
	t.Logf("test %v", time.Since(testStart).Round(time.Second))
}

// announcedNames are the external addresses the status shows, by pod: each must be the
// pod's name in domain and a port.
func announcedNames(g Gomega, rc *redisv1alpha1.RedisCluster, domain string) map[string]string {
	out := map[string]string{}
	for _, c := range rc.Status.Conditions {
		if c.ExternalAddress != "" {
			g.Expect(c.ExternalAddress).To(HavePrefix(c.Name+"."+domain+":"), "reason: %s", rc.Status.Reason)
			out[c.Name] = c.ExternalAddress
		}
	}
	return out
}
