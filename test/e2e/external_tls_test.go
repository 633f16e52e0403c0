//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"hash/fnv"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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

// nameDialer is a client outside Kubernetes with its own DNS: it resolves the names of
// domain to the Kubernetes nodes' IPs (each name to one node, as a zone file would; a node
// port is served on every node), refuses any other address, and speaks TLS checking the
// certificate against the name it dialed.
type nameDialer struct {
	domain  string
	nodes   []string
	tls     *tls.Config
	refused atomic.Int64
	mu      sync.Mutex
	first   []string
}

func (d *nameDialer) resolve(host string) (string, bool) {
	if !strings.HasSuffix(host, "."+d.domain) {
		return "", false
	}
	h := fnv.New32a()
	h.Write([]byte(host))
	return d.nodes[int(h.Sum32())%len(d.nodes)], true
}

func (d *nameDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	ip, ok := d.resolve(host)
	if err != nil || !ok {
		d.refused.Add(1)
		d.mu.Lock()
		if len(d.first) < 5 {
			d.first = append(d.first, addr)
		}
		d.mu.Unlock()
		return nil, fmt.Errorf("refused %s: not a name of %s", addr, d.domain)
	}
	var nd net.Dialer
	raw, err := nd.DialContext(ctx, network, net.JoinHostPort(ip, port))
	if err != nil {
		return nil, err
	}
	cfg := d.tls.Clone()
	cfg.ServerName = host
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("TLS with %s (%s): %w", host, ip, err)
	}
	return conn, nil
}

// TestExternalAccessTLSHostnames applies the sample of hostname mode over TLS (NodePort,
// names {{pod}}.redis.example.com). First with a certificate whose SANs do not cover the
// names: the cluster forms and serves inside Kubernetes, no name is announced, and
// status.reason and a Warning event ExternalCertificate name the field and the names.
// Then the Secret gets a certificate with *.redis.example.com: every node announces its
// name and TLS node port. A client outside the pod network with its own resolver (names
// to node IPs only) and TLS checking each name loads 100,000 keys and writes through the
// deletion of a master's pod: every redirect names a name of the domain, no key and no
// acknowledged write is lost.
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
	names := waitNames(ctx, t, ns, name, domain, servedSerial(t, good), 6)
	t.Logf("STAGE certificate with *.%s: every node serves it and announces its name %v later: %v", domain, time.Since(began).Round(100*time.Millisecond), names)

	cfg, err := redistest.ClientConfig(good)
	g.Expect(err).NotTo(HaveOccurred())
	var nodes []string
	for ip := range nodeIPs(ctx, t) {
		nodes = append(nodes, ip)
	}
	sort.Strings(nodes)
	d := &nameDialer{domain: domain, nodes: nodes, tls: cfg}
	// Each node has announced its name; the others learn it by gossip, within a second or
	// two: until then one of them could still send a client to a pod IP.
	g.Eventually(func(g Gomega) {
		for pod, addr := range names {
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
	r := framework.NewRouter(func(ctx context.Context) ([]string, error) {
		var out []string
		for _, c := range getCluster(ctx, t, ns, name).Status.Conditions {
			if c.ExternalAddress != "" {
				out = append(out, c.ExternalAddress)
			}
		}
		return out, nil
	}, pw)
	r.SetDialer(d.dial)
	r.PreferHostnames()
	defer r.Close()
	redirects := &redirectLog{reachable: func(addr string) bool {
		h, _, err := net.SplitHostPort(addr)
		_, ok := d.resolve(h)
		return err == nil && ok
	}}
	r.OnRedirect(redirects.note)

	began = time.Now()
	g.Expect(r.Load(ctx, "pre", faultKeys)).To(Succeed())
	t.Logf("loaded %d keys through the names over TLS in %v", faultKeys, time.Since(began).Round(time.Millisecond))
	w, err := r.StartWriter(ctx, "w")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	time.Sleep(time.Second)

	pod := pickPod(ctx, t, ns, name, topology.RoleMaster)
	began = time.Now()
	deleteAndReannounce(ctx, t, ns, name, pod, func(g Gomega) {
		rc := getCluster(ctx, t, ns, name)
		n := 0
		for _, c := range rc.Status.Conditions {
			if c.ExternalAddress != "" {
				n++
			}
		}
		g.Expect(n).To(Equal(6), "nodes announcing their name")
	})
	t.Logf("STAGE master %s deleted: back and announcing its name %v later; longest write gap %v", pod, time.Since(began).Round(100*time.Millisecond), w.TakeLongestGap())
	time.Sleep(2 * time.Second)

	rep := w.Stop()
	acked := w.Acked()
	w = nil
	g.Expect(stack.IntegrityTLS(ctx, ns, name, pw, cfg)).To(Succeed())
	pre, err := r.Missing(ctx, keyNames("pre", faultKeys))
	g.Expect(err).NotTo(HaveOccurred())
	lost, err := r.Missing(ctx, acked)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("EXTERNAL TLS hostnames: pre-loaded keys lost %d/%d, acknowledged writes lost %d/%d, longest write gap %v, redirects %s, dials refused %d %v; writer: %v; test %v",
		len(pre), faultKeys, len(lost), len(acked), rep.LongestGap, redirects, d.refused.Load(), d.first, rep, time.Since(testStart).Round(time.Second))
	g.Expect(pre).To(BeEmpty(), "pre-loaded keys lost")
	g.Expect(lost).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(rep.Acked).To(BeNumerically(">", 0), "the writer got no write acknowledged")
	g.Expect(d.refused.Load()).To(BeZero(), "dials to addresses that are not names of %s: %v", domain, d.first)
	redirects.check(t)
}

// waitNames waits until every one of want instances serves the certificate of serial and
// announces NAME-i.domain, and returns the external addresses by pod.
func waitNames(ctx context.Context, t *testing.T, ns, name, domain, serial string, want int) map[string]string {
	t.Helper()
	out := map[string]string{}
	NewWithT(t).Eventually(func(g Gomega) {
		rc := getCluster(ctx, t, ns, name)
		g.Expect(rc.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning), "reason: %s", rc.Status.Reason)
		g.Expect(rc.Status.TLS).NotTo(BeNil())
		g.Expect(rc.Status.TLS.Serial).To(Equal(serial))
		for _, c := range rc.Status.Conditions {
			g.Expect(c.ExternalAddress).To(HavePrefix(c.Name+"."+domain+":"), "reason: %s", rc.Status.Reason)
			out[c.Name] = c.ExternalAddress
		}
		g.Expect(out).To(HaveLen(want))
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
	return out
}
