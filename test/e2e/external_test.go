//go:build e2e

package e2e

import (
	"context"
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

// externalDialer dials only the Kubernetes nodes' IPs, as a client outside the pod network
// would: any other address (a pod IP a MOVED named) is refused and counted.
type externalDialer struct {
	allowed map[string]bool
	refused atomic.Int64
	mu      sync.Mutex
	first   []string
}

func (d *externalDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !d.allowed[host] {
		d.refused.Add(1)
		d.mu.Lock()
		if len(d.first) < 5 {
			d.first = append(d.first, addr)
		}
		d.mu.Unlock()
		return nil, fmt.Errorf("refused %s: not a Kubernetes node's address", addr)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
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
	formDemo(ctx, t, ns, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, map[string]any{"type": "NodePort"}, "spec", "externalAccess")
	})
	allowed := nodeIPs(ctx, t)
	addrs := waitExternal(ctx, t, ns, 6, allowed, 2*time.Minute)
	t.Logf("external addresses: %v", addrs)

	// Every new cluster has a password (the generated one in Secret demo-auth); every client
	// below, redis-cli included, logs in with it.
	pw, err := stack.Password(ctx, ns, "demo")
	if err != nil {
		t.Fatal(err)
	}
	d := &externalDialer{allowed: allowed}
	seeds := func(ctx context.Context) ([]string, error) {
		var out []string
		for _, c := range getCluster(ctx, t, ns, "demo").Status.Conditions {
			if c.ExternalAddress != "" {
				out = append(out, c.ExternalAddress)
			}
		}
		return out, nil
	}
	r := framework.NewRouter(seeds, pw)
	r.SetDialer(d.dial)
	t.Cleanup(r.Close)

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
			if got != "OK" && got != "from-outside" {
				t.Errorf("redis-cli -c did not follow the MOVED: %q", got)
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

	redirects := &redirectLog{reachable: func(addr string) bool { return onHosts(allowed, addr) }}
	r.OnRedirect(redirects.note)
	start := time.Now()
	if err := r.Load(ctx, "pre", faultKeys); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d keys through the node ports in %v", faultKeys, time.Since(start).Round(time.Millisecond))
	w, err := r.StartWriter(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	time.Sleep(time.Second)

	// Scale-out: 3 to 4 masters.
	began := time.Now()
	patchSpec(ctx, t, ns, "demo", `{"replicas":8}`)
	if err := stack.WaitForPhase(ctx, ns, "demo", "Scaling", time.Minute); err != nil {
		t.Fatal(err)
	}
	addrs = waitExternal(ctx, t, ns, 8, allowed, 5*time.Minute)
	NewWithT(t).Expect(getCluster(ctx, t, ns, "demo").Status.Masters).To(BeEquivalentTo(4))
	t.Logf("STAGE scale-out 3 -> 4 masters: %v; longest write gap %v; redirects so far %s; external addresses: %v",
		time.Since(began).Round(time.Second), w.TakeLongestGap(), redirects, addrs)

	// A master's pod deleted: it comes back at a new IP, maybe on another node.
	pod := pickPod(ctx, t, ns, "demo", topology.RoleMaster)
	began = time.Now()
	deleteAndReannounce(ctx, t, ns, "demo", pod, func(g Gomega) {
		externalAddrs(ctx, g, t, ns, 8, allowed)
		for name, ip := range podIPs(ctx, t, ns, "demo") {
			c := framework.NodeClient(ip, pw)
			text, err := c.ClusterNodes(ctx).Result()
			c.Close()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.Split(strings.TrimSpace(text), "\n")).To(HaveLen(8), "CLUSTER NODES on %s:\n%s", name, text)
			g.Expect(text).NotTo(ContainSubstring("fail"), "CLUSTER NODES on %s", name)
		}
	})
	t.Logf("STAGE master %s deleted: back, announced and formed %v later; longest write gap %v",
		pod, time.Since(began).Round(100*time.Millisecond), w.TakeLongestGap())

	// An upgrade: MAXMEMORY is a pod template change, every pod is rolled (a master is
	// failed over before its restart), and each restarted node must be told its address
	// again (announcements set live are not in redis.conf).
	began = time.Now()
	upgradeMaxmemory(ctx, t, ns, "demo", 8)
	waitExternal(ctx, t, ns, 8, allowed, 2*time.Minute)
	t.Logf("STAGE upgrade (8 pods rolled): %v; longest write gap %v", time.Since(began).Round(time.Second), w.TakeLongestGap())
	time.Sleep(2 * time.Second)

	rep := w.Stop()
	acked := w.Acked()
	w = nil
	for i := 0; ; i++ {
		err := stack.Integrity(ctx, ns, "demo", "")
		if err == nil {
			break
		}
		if i == 20 {
			t.Errorf("integrity: %v", err)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	pre, err := r.Missing(ctx, keyNames("pre", faultKeys))
	if err != nil {
		t.Fatal(err)
	}
	lost, err := r.Missing(ctx, acked)
	if err != nil {
		t.Fatal(err)
	}

	// A go-redis ClusterClient, with the same dialer, reads keys back and writes new ones:
	// it routes from CLUSTER SLOTS, so every address it is given must be a node's.
	// go-redis v8 cannot parse Redis 7's CLUSTER SLOTS (a fourth element per node), so
	// the table comes from CLUSTER NODES, read through the same dialer.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{seed}, Dialer: d.dial, MaxRedirects: 8, Password: pw,
		ClusterSlots: func(ctx context.Context) ([]redis.ClusterSlot, error) { return externalSlots(ctx, seed, pw, d.dial) }})
	defer cc.Close()
	for i := 0; i < 2000; i++ {
		k := fmt.Sprintf("pre:%d", i*(faultKeys/2000))
		if v, err := cc.Get(ctx, k).Result(); err != nil || v != framework.Value(k) {
			t.Errorf("ClusterClient GET %s: %q, %v", k, v, err)
			break
		}
		if err := cc.Set(ctx, fmt.Sprintf("cc:%d", i), "x", 0).Err(); err != nil {
			t.Errorf("ClusterClient SET: %v", err)
			break
		}
	}

	t.Logf("EXTERNAL NodePort: pre-loaded keys lost %d/%d, acknowledged writes lost %d/%d, longest write gap %v, redirects %s, dials refused %d %v; writer: %v; test %v",
		len(pre), faultKeys, len(lost), len(acked), rep.LongestGap, redirects, d.refused.Load(), d.first, rep, time.Since(testStart).Round(time.Second))
	redirects.check(t)
	if len(pre) > 0 {
		t.Errorf("%d pre-loaded keys lost, e.g. %v", len(pre), head(pre))
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged writes lost, e.g. %v", len(lost), head(lost))
	}
	if rep.Acked == 0 {
		t.Error("the writer got no write acknowledged")
	}
	if n := d.refused.Load(); n > 0 {
		t.Errorf("the client was sent to %d addresses outside the nodes' IPs, e.g. %v", n, d.first)
	}
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

// upgradeMaxmemory changes the first pod spec's MAXMEMORY (a pod template change that
// needs a restart) and waits for Upgrading then Running, all n pods rolled.
func upgradeMaxmemory(ctx context.Context, t *testing.T, ns, name string, n int) {
	t.Helper()
	before := podIdentities(ctx, t, ns, name)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(framework.RedisClusterGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	patch := `[{"op":"replace","path":"/spec/pod/0/env/0/value","value":"96mb"}]`
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
