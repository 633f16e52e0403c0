//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	opredis "github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// outsideDialer is a client outside the pod network: it dials a host only when resolve
// knows it (a Kubernetes node's IP, a name its own DNS has) and refuses and counts any
// other address (a pod IP a MOVED named); a name resolve knows but has no address for at
// the moment (its pod is being replaced) fails as a DNS lookup would, uncounted. With tls
// set it speaks TLS and checks the server's certificate against the name it dialed.
type outsideDialer struct {
	resolve func(ctx context.Context, host string) (string, bool)
	tls     *tls.Config
	refused atomic.Int64
	mu      sync.Mutex
	first   []string
}

// nodeIPDialer dials the Kubernetes nodes' IPs (allowed) only.
func nodeIPDialer(allowed map[string]bool) *outsideDialer {
	return &outsideDialer{resolve: func(_ context.Context, host string) (string, bool) { return host, allowed[host] }}
}

func (d *outsideDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	ip, ok := "", false
	if err == nil {
		ip, ok = d.resolve(ctx, host)
	}
	if !ok {
		d.refused.Add(1)
		d.mu.Lock()
		if len(d.first) < 5 {
			d.first = append(d.first, addr)
		}
		d.mu.Unlock()
		return nil, fmt.Errorf("refused %s: not an address a client outside the pod network reaches", addr)
	}
	if ip == "" {
		return nil, &net.DNSError{Err: "no address for the name at the moment", Name: host, IsNotFound: true}
	}
	var nd net.Dialer
	raw, err := nd.DialContext(ctx, network, net.JoinHostPort(ip, port))
	if err != nil || d.tls == nil {
		return raw, err
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

// reachable reports whether the dialer would dial addr, "host:port".
func (d *outsideDialer) reachable(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	_, ok := d.resolve(context.Background(), h)
	return ok
}

// expectNoneRefused fails t when the client was sent to an address it cannot reach.
func (d *outsideDialer) expectNoneRefused(t *testing.T) {
	t.Helper()
	if n := d.refused.Load(); n > 0 {
		d.mu.Lock()
		defer d.mu.Unlock()
		t.Errorf("the client was sent to %d addresses it cannot reach from outside, e.g. %v", n, d.first)
	}
}

// nodeIPs are the InternalIPs of the Kubernetes nodes.
func nodeIPs(ctx context.Context, t *testing.T) map[string]bool {
	t.Helper()
	cs, err := stack.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				out[a.Address] = true
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no node has an InternalIP")
	}
	return out
}

// externalAddrs are the external addresses status shows, by pod; every pod of want must
// have one on a node IP.
func externalAddrs(ctx context.Context, g Gomega, t *testing.T, ns string, want int, allowed map[string]bool) map[string]string {
	rc := getCluster(ctx, t, ns, "demo")
	out := map[string]string{}
	for _, c := range rc.Status.Conditions {
		if c.ExternalAddress != "" {
			out[c.Name] = c.ExternalAddress
			host, _, _ := net.SplitHostPort(c.ExternalAddress)
			g.Expect(allowed).To(HaveKey(host), "%s announces %s", c.Name, c.ExternalAddress)
			g.Expect(host).To(Equal(c.HostIP), "%s announces the IP of the node it runs on", c.Name)
		}
	}
	g.Expect(out).To(HaveLen(want), "pods with an external address; reason: %s", rc.Status.Reason)
	return out
}

// waitExternal waits until every one of want pods announces an external address and the
// cluster is Running.
func waitExternal(ctx context.Context, t *testing.T, ns string, want int, allowed map[string]bool, within time.Duration) map[string]string {
	t.Helper()
	var out map[string]string
	NewWithT(t).Eventually(func(g Gomega) {
		rc := getCluster(ctx, t, ns, "demo")
		g.Expect(rc.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning), "reason: %s", rc.Status.Reason)
		out = externalAddrs(ctx, g, t, ns, want, allowed)
	}, within, 500*time.Millisecond).Should(Succeed())
	return out
}

// A cluster-mode client on the host, outside the pod network, that reaches the cluster
// only through the Kubernetes nodes' addresses (spec.externalAccess type NodePort): every
// address it is sent to by CLUSTER NODES, MOVED or ASK must be a node IP, or its dialer
// refuses it. It writes through a scale-out from 3 to 4 masters and the deletion of a
// master's pod, with faultKeys keys loaded first; no key and no acknowledged write may be
// lost. redis-cli -c follows a MOVED through a node port.
func TestExternalAccessNodePort(t *testing.T) {
	t.Parallel()
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ns := "external-nodeport"
	// Every new cluster has a password (the generated one in Secret demo-auth); every client
	// below, redis-cli included, logs in with it.
	pw := formDemoWith(ctx, t, ns, "externalAccess", map[string]any{"type": "NodePort"})
	allowed := nodeIPs(ctx, t)
	addrs := waitExternal(ctx, t, ns, 6, allowed, 2*time.Minute)
	t.Logf("external addresses: %v", addrs)
	d := nodeIPDialer(allowed)
	r := framework.NewRouter(statusSeeds(t, ns, "demo"), pw)
	t.Cleanup(r.Close)
	o := newOutsideClient(ns, "demo", 6, r, d, pw, nil, func(g Gomega, n int) { externalAddrs(ctx, g, t, ns, n, allowed) })

	// redis-cli -c from the host through one node port, for a key another master owns.
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	seed := addrs["demo-0"]
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("outside:%d", i)
		if owner := r.Owner(framework.KeySlot(k)); owner != "" && owner != seed {
			key = k
		}
	}
	host, port, _ := net.SplitHostPort(seed)
	// redis-cli prints "-> Redirected to slot" only in its interactive mode: once without
	// -c, to show the MOVED and the node port it names, then with -c, which follows it.
	// Each -c answer is the one its command must give: the set's OK, the get's the value set.
	want := map[string]string{"set": "OK", "get": "from-outside"}
	for _, args := range [][]string{{"set", key, "from-outside"}, {"-c", "set", key, "from-outside"}, {"-c", "get", key}} {
		cmd := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", host, "-p", port}, args...)...)
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+pw)
		out, err := cmd.CombinedOutput()
		t.Logf("$ redis-cli -h %s -p %s %s\n%s", host, port, strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("redis-cli: %v", err)
		}
		switch got := strings.TrimSpace(string(out)); args[0] {
		case "set":
			f := strings.Fields(got)
			if len(f) != 3 || f[0] != "MOVED" {
				t.Fatalf("want a MOVED from %s, got %q", seed, got)
			}
			if h, _, _ := net.SplitHostPort(f[2]); !allowed[h] {
				t.Errorf("MOVED names %s, not a node's address", f[2])
			}
		case "-c":
			if got != want[args[1]] {
				t.Errorf("redis-cli -c %s: %q, want %q (the MOVED followed to the key's owner)", args[1], got, want[args[1]])
			}
		}
	}

	// The same interactively (a terminal, as a person types it), where redis-cli -c prints
	// each redirect it follows.
	transcript := interactiveRedisCLI(ctx, t, host, port, pw, "get "+key, "set "+key+" again", "get "+key)
	t.Logf("$ redis-cli -c -h %s -p %s   (interactive)\n%s", host, port, transcript)
	if m := regexp.MustCompile(`-> Redirected to slot \[[0-9]+\] located at (\S+)`).FindStringSubmatch(transcript); m == nil {
		t.Errorf("redis-cli -c printed no redirect")
	} else if !onHosts(allowed, m[1]) {
		t.Errorf("redis-cli -c was redirected to %s, not a node's address", m[1])
	}
	// The replies, in order: the value set above, the set's OK, the new value (quoted as
	// redis-cli prints a string reply, so the echoed commands do not match).
	if !regexp.MustCompile(`(?s)"from-outside".*\bOK\b.*"again"`).MatchString(transcript) {
		t.Errorf("redis-cli -c interactive: want the replies \"from-outside\", OK, \"again\" in order")
	}

	o.writeThrough(ctx, t, "NodePort", scaleOut3to4, masterDeleted, upgradeRolled)

	// A go-redis ClusterClient, with the same dialer, reads keys back and writes new ones:
	// it routes from CLUSTER SLOTS, so every address it is given must be a node's.
	// go-redis v8 cannot parse Redis 7's CLUSTER SLOTS (a fourth element per node), so
	// the table comes from CLUSTER NODES, read through the same dialer.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{seed}, Dialer: d.dial, MaxRedirects: 8, Password: pw,
		ClusterSlots: func(ctx context.Context) ([]redis.ClusterSlot, error) { return externalSlots(ctx, seed, pw, d.dial) }})
	defer cc.Close()
	for i := 0; i < 500; i++ {
		k := fmt.Sprintf("pre:%d", i*(faultKeys/500))
		if v, err := cc.Get(ctx, k).Result(); err != nil || v != framework.Value(k) {
			t.Errorf("ClusterClient GET %s: %q, %v", k, v, err)
			break
		}
		if err := cc.Set(ctx, fmt.Sprintf("cc:%d", i), "x", 0).Err(); err != nil {
			t.Errorf("ClusterClient SET: %v", err)
			break
		}
	}
	d.expectNoneRefused(t)
	t.Logf("test %v", time.Since(testStart).Round(time.Second))
}

// formDemoWith forms the demo cluster in ns with spec.FIELD set to value, and returns its
// password (the generated one).
func formDemoWith(ctx context.Context, t *testing.T, ns, field string, value any) string {
	t.Helper()
	formDemo(ctx, t, ns, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, value, "spec", field)
	})
	pw, err := stack.Password(ctx, ns, "demo")
	if err != nil {
		t.Fatal(err)
	}
	return pw
}

// statusSeeds are the external addresses the status of cluster ns/name shows: the seeds
// a client outside is given.
func statusSeeds(t *testing.T, ns, name string) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		var out []string
		for _, c := range getCluster(ctx, t, ns, name).Status.Conditions {
			if c.ExternalAddress != "" {
				out = append(out, c.ExternalAddress)
			}
		}
		return out, nil
	}
}

// outsideClient is a cluster-mode client outside the pod network (router r dialing with
// d) writing to cluster ns/name of pods instances, and the redirects it is answered.
type outsideClient struct {
	ns, name  string
	pods      int
	r         *framework.Router
	d         *outsideDialer
	redirects *redirectLog
	// announced checks that each of n pods announces its address for this client.
	announced func(g Gomega, n int)
	// password and tls are what the test itself dials the pods with, at their pod IPs.
	password string
	tls      *tls.Config
	// deleted is the pod masterDeleted deleted.
	deleted string
}

// newOutsideClient has r dial with d and log its redirects; a redirect is reachable when
// d would dial it.
func newOutsideClient(ns, name string, pods int, r *framework.Router, d *outsideDialer, password string, cfg *tls.Config, announced func(Gomega, int)) *outsideClient {
	o := &outsideClient{ns: ns, name: name, pods: pods, r: r, d: d, announced: announced, password: password, tls: cfg}
	o.redirects = &redirectLog{reachable: d.reachable}
	r.SetDialer(d.dial)
	r.OnRedirect(o.redirects.note)
	return o
}

// waitAnnounced waits until the cluster is Running and every pod announces its address.
func (o *outsideClient) waitAnnounced(ctx context.Context, t *testing.T, within time.Duration) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		rc := getCluster(ctx, t, o.ns, o.name)
		g.Expect(rc.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning), "reason: %s", rc.Status.Reason)
		o.announced(g, o.pods)
	}, within, 500*time.Millisecond).Should(Succeed())
}

// expectAllKnown checks that every node knows all o.pods nodes, none flagged failing.
func (o *outsideClient) expectAllKnown(ctx context.Context, t *testing.T, g Gomega) {
	for pod, ip := range podIPs(ctx, t, o.ns, o.name) {
		c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(ip, "6379"), Password: o.password, TLSConfig: o.tls})
		text, err := c.ClusterNodes(ctx).Result()
		c.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Split(strings.TrimSpace(text), "\n")).To(HaveLen(o.pods), "CLUSTER NODES on %s:\n%s", pod, text)
		g.Expect(text).NotTo(ContainSubstring("fail"), "CLUSTER NODES on %s", pod)
	}
}

// outsideStage is a change the client writes through: run makes it and returns once it is
// done, every pod announcing its address again.
type outsideStage struct {
	name string
	run  func(ctx context.Context, t *testing.T, o *outsideClient)
}

var (
	// scaleOut3to4 adds a master and its replica (6 to 8 pods): slots move, ASK and MOVED
	// name the new master.
	scaleOut3to4 = outsideStage{"scale-out 3 -> 4 masters", func(ctx context.Context, t *testing.T, o *outsideClient) {
		patchSpec(ctx, t, o.ns, o.name, `{"replicas":8}`)
		if err := stack.WaitForPhase(ctx, o.ns, o.name, "Scaling", time.Minute); err != nil {
			t.Fatal(err)
		}
		o.pods = 8
		o.waitAnnounced(ctx, t, 5*time.Minute)
		NewWithT(t).Expect(getCluster(ctx, t, o.ns, o.name).Status.Masters).To(BeEquivalentTo(4))
	}}
	// masterDeleted deletes a master's pod: its replica takes over, and it comes back at a
	// new IP, maybe on another node, and must be told its address again.
	masterDeleted = outsideStage{"a master's pod deleted", func(ctx context.Context, t *testing.T, o *outsideClient) {
		o.deleted = pickPod(ctx, t, o.ns, o.name, topology.RoleMaster)
		deleteAndReannounce(ctx, t, o.ns, o.name, o.deleted, func(g Gomega) {
			o.announced(g, o.pods)
			o.expectAllKnown(ctx, t, g)
		})
		t.Logf("deleted %s: back at a new IP", o.deleted)
	}}
	// upgradeRolled changes the pod template: every pod is rolled (a master failed over
	// before its restart), and each restarted node must be told its address again
	// (announcements set live are not in redis.conf).
	upgradeRolled = outsideStage{"an upgrade rolling every pod", func(ctx context.Context, t *testing.T, o *outsideClient) {
		upgradeMaxmemory(ctx, t, o.ns, o.name, o.pods)
		o.waitAnnounced(ctx, t, 2*time.Minute)
	}}
)

// writeThrough loads faultKeys keys through the client, then writes with a writer that
// records every acknowledged write through each stage in turn; at the end no key and no
// acknowledged write may be lost, every redirect must have named an address the client
// reaches, and the client must have been sent nowhere else.
func (o *outsideClient) writeThrough(ctx context.Context, t *testing.T, mode string, stages ...outsideStage) {
	t.Helper()
	began := time.Now()
	if err := o.r.Load(ctx, "pre", faultKeys); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d keys from outside in %v", faultKeys, time.Since(began).Round(time.Millisecond))
	w, err := o.r.StartWriter(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	time.Sleep(time.Second)
	for _, st := range stages {
		began := time.Now()
		st.run(ctx, t, o)
		t.Logf("STAGE %s: done, every node announcing, %v later; longest write gap %v; redirects so far %s",
			st.name, time.Since(began).Round(100*time.Millisecond), w.TakeLongestGap(), o.redirects)
	}
	time.Sleep(2 * time.Second)
	rep := w.Stop()
	acked := w.Acked()
	w = nil
	NewWithT(t).Eventually(func() error { return stack.IntegrityTLS(ctx, o.ns, o.name, o.password, o.tls) }, 10*time.Second, 500*time.Millisecond).Should(Succeed())
	pre, err := o.r.Missing(ctx, keyNames("pre", faultKeys))
	if err != nil {
		t.Fatal(err)
	}
	lost, err := o.r.Missing(ctx, acked)
	if err != nil {
		t.Fatal(err)
	}
	o.d.mu.Lock()
	first := o.d.first
	o.d.mu.Unlock()
	t.Logf("EXTERNAL %s: pre-loaded keys lost %d/%d, acknowledged writes lost %d/%d, longest write gap %v, redirects %s, dials refused %d %v; writer: %v",
		mode, len(pre), faultKeys, len(lost), len(acked), rep.LongestGap, o.redirects, o.d.refused.Load(), first, rep)
	o.redirects.check(t)
	if len(pre) > 0 {
		t.Errorf("%d pre-loaded keys lost, e.g. %v", len(pre), head(pre))
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged writes lost, e.g. %v", len(lost), head(lost))
	}
	if rep.Acked == 0 {
		t.Error("the writer got no write acknowledged")
	}
	o.d.expectNoneRefused(t)
}

// onHosts reports whether addr, "host:port", is on one of the allowed hosts.
func onHosts(allowed map[string]bool, addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	return err == nil && allowed[h]
}

// interactiveRedisCLI runs `redis-cli -c -h host -p port` on a terminal (script(1), TERM
// dumb), types each line once the previous reply's prompt is shown, and returns what the
// terminal showed: prompts, typed lines, replies and the "-> Redirected to slot" lines
// redis-cli prints only interactively.
func interactiveRedisCLI(ctx context.Context, t *testing.T, host, port, pw string, lines ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "script", "-qec", fmt.Sprintf("redis-cli -c -h %s -p %s", host, port), "/dev/null")
	cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+pw, "TERM=dumb")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	prompt := regexp.MustCompile(`[0-9]> `)
	for i, l := range append(lines, "") {
		NewWithT(t).Eventually(func() int { return len(prompt.FindAllString(out.String(), -1)) }, 10*time.Second, 10*time.Millisecond).
			Should(BeNumerically(">", i), "redis-cli's prompt %d:\n%s", i+1, out.String())
		if l != "" {
			fmt.Fprintf(in, "%s\n", l)
		}
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("redis-cli: %v\n%s", err, out.String())
	}
	return strings.ReplaceAll(out.String(), "\r", "")
}

// syncBuffer is a strings.Builder safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// redirectLog counts the MOVED and ASK errors a client outside Kubernetes is answered, and
// keeps those that name an address it cannot reach.
type redirectLog struct {
	reachable   func(addr string) bool
	mu          sync.Mutex
	moved, ask  int
	unreachable []string
}

func (l *redirectLog) note(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if strings.HasPrefix(msg, "ASK ") {
		l.ask++
	} else {
		l.moved++
	}
	f := strings.Fields(msg)
	if !l.reachable(f[len(f)-1]) && len(l.unreachable) < 10 {
		l.unreachable = append(l.unreachable, msg)
	}
}

func (l *redirectLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d MOVED, %d ASK, %d unreachable", l.moved, l.ask, len(l.unreachable))
}

// check fails t unless redirects were answered and every one named a reachable address.
func (l *redirectLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.moved+l.ask == 0 {
		t.Error("the client was answered no MOVED or ASK: the redirects were not exercised")
	}
	if len(l.unreachable) > 0 {
		t.Errorf("redirects to addresses a client outside Kubernetes cannot reach: %v", l.unreachable)
	}
}

// deleteAndReannounce deletes pod and waits until it is back at a new IP, the cluster
// Running, and announced(g) holds.
func deleteAndReannounce(ctx context.Context, t *testing.T, ns, name, pod string, announced func(Gomega)) {
	t.Helper()
	oldIP := podIPs(ctx, t, ns, name)[pod]
	if err := stack.DeletePod(ctx, ns, pod); err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func(g Gomega) {
		ip := podIPs(ctx, t, ns, name)[pod]
		g.Expect(ip).NotTo(BeEmpty())
		g.Expect(ip).NotTo(Equal(oldIP))
		rc := getCluster(ctx, t, ns, name)
		g.Expect(rc.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning), "reason: %s", rc.Status.Reason)
		announced(g)
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
}

// upgradeMaxmemory sets the first pod spec's env to MAXMEMORY 96mb (a pod template change that
// needs a restart) and waits for Upgrading then Running, all n pods rolled.
func upgradeMaxmemory(ctx context.Context, t *testing.T, ns, name string, n int) {
	t.Helper()
	before := podIdentities(ctx, t, ns, name)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(framework.RedisClusterGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	// "add" replaces the env list when there is one (the demo's has MAXMEMORY only).
	patch := `[{"op":"add","path":"/spec/pod/0/env","value":[{"name":"MAXMEMORY","value":"96mb"}]}]`
	if err := kubeClient(t).Patch(ctx, u, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitForPhase(ctx, ns, name, "Upgrading", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitForPhase(ctx, ns, name, "Running", 10*time.Minute); err != nil {
		t.Fatalf("%v: %s", err, getCluster(ctx, t, ns, name).Status.Reason)
	}
	after := podIdentities(ctx, t, ns, name)
	NewWithT(t).Expect(after).To(HaveLen(n))
	for pod, id := range before {
		NewWithT(t).Expect(after[pod]).NotTo(Equal(id), "pod %s was not rolled", pod)
	}
}

// externalSlots is the slot table as the node at seed shows it in CLUSTER NODES: the
// addresses the nodes announce.
func externalSlots(ctx context.Context, seed, password string, dial func(context.Context, string, string) (net.Conn, error)) ([]redis.ClusterSlot, error) {
	c := redis.NewClient(&redis.Options{Addr: seed, Password: password, Dialer: dial})
	defer c.Close()
	text, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	nodes, err := topology.ParseClusterNodes(text)
	if err != nil {
		return nil, err
	}
	return opredis.SlotTable(nodes), nil
}
