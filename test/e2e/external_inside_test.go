//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// podDNSResolver stands in for the cluster DNS, which the devcluster does not run: it
// resolves NAME-i.NAME.NS.svc.cluster.local, the pods' names through the headless Service,
// to that pod's IP now, as the cluster DNS does from the Service's endpoints (none while
// the pod is replaced); no other name and no address.
func podDNSResolver(ns, name string) func(context.Context, string) (string, bool) {
	suffix := "." + name + "." + ns + ".svc.cluster.local"
	own := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `-[0-9]+$`)
	return func(ctx context.Context, host string) (string, bool) {
		pod, ok := strings.CutSuffix(host, suffix)
		if !ok || !own.MatchString(pod) {
			return "", false
		}
		pods, err := stack.Pods(ctx, ns, selectorOf(name))
		if err != nil {
			return "", true
		}
		for _, p := range pods {
			if p.Name == pod && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
				return p.Status.PodIP, true
			}
		}
		return "", true
	}
}

// TestAnnounceHostnamesInside runs spec.announceHostnames on the devcluster, whose
// clients would be inside Kubernetes. The bed has no cluster DNS, so the client here, on
// the host, resolves the pods' DNS names to their IPs itself (podDNSResolver) and dials
// nothing else. Every node announces its name: CLUSTER SLOTS and CLUSTER SHARDS give it; a
// MOVED names the owner by name and the client follows it; and after a master's pod is
// deleted and comes back at a new IP, its name reaches it again and redirects by name. A
// writer runs throughout, after 100,000 keys were loaded: no key and no acknowledged write
// may be lost.
func TestAnnounceHostnamesInside(t *testing.T) {
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const ns, name = "inside-names", "demo"
	pw := formDemoWith(ctx, t, ns, "announceHostnames", true)
	domain := name + "." + ns + ".svc.cluster.local"
	d := &outsideDialer{resolve: podDNSResolver(ns, name)}
	seeds := func(context.Context) ([]string, error) {
		return []string{name + "-0." + domain + ":6379", name + "-1." + domain + ":6379", name + "-2." + domain + ":6379"}, nil
	}
	r := framework.NewRouter(seeds, pw)
	r.PreferHostnames()
	defer r.Close()
	o := newOutsideClient(ns, name, 6, r, d, pw, nil, func(g Gomega, n int) { expectNamesAnnounced(ctx, t, g, ns, name, pw, n) })
	// A redirect is reachable when it names a pod of the cluster by its DNS name, whether
	// or not that pod is running at that moment (the cluster DNS would name it too).
	ownName := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `-[0-9]+\.` + regexp.QuoteMeta(domain) + `:6379$`)
	o.redirects.reachable = ownName.MatchString
	o.waitAnnounced(ctx, t, time.Minute)
	expectSlotsByName(ctx, t, d, name+"-0."+domain+":6379", pw, ownName)
	followMovedByName(ctx, t, o, pw, name+"-0."+domain+":6379")
	t.Logf("STAGE every node announces its name; CLUSTER SLOTS and SHARDS give names; a MOVED followed by name")

	o.writeThrough(ctx, t, "announceHostnames", masterDeleted)
	// The deleted pod is back at a new IP, as a replica: its name reaches it, and it
	// redirects a write by name to its master.
	followMovedByName(ctx, t, o, pw, o.deleted+"."+domain+":6379")
	o.redirects.check(t)
	t.Logf("test %v", time.Since(testStart).Round(time.Second))
}

// expectNamesAnnounced checks that each of the n pods' own line of CLUSTER NODES shows its
// DNS name as its hostname, and that every node sees every other by its name.
func expectNamesAnnounced(ctx context.Context, t *testing.T, g Gomega, ns, name, pw string, n int) {
	ips := podIPs(ctx, t, ns, name)
	g.Expect(ips).To(HaveLen(n))
	for pod, ip := range ips {
		c := framework.NodeClient(ip, pw)
		text, err := c.ClusterNodes(ctx).Result()
		c.Close()
		g.Expect(err).NotTo(HaveOccurred())
		nodes, err := topology.ParseClusterNodes(text)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes).To(HaveLen(n))
		for _, node := range nodes {
			g.Expect(node.Hostname).To(HaveSuffix("."+name+"."+ns+".svc.cluster.local"), "%s sees a node without its name:\n%s", pod, text)
			if node.Myself {
				g.Expect(node.Hostname).To(Equal(pod+"."+name+"."+ns+".svc.cluster.local"), "%s's own name", pod)
			}
		}
	}
}

// expectSlotsByName checks that CLUSTER SLOTS and CLUSTER SHARDS, read from seed by name,
// give every node as a name that matches want, never an IP.
func expectSlotsByName(ctx context.Context, t *testing.T, d *outsideDialer, seed, pw string, want *regexp.Regexp) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: seed, Password: pw, Dialer: d.dial})
	defer c.Close()
	slots, err := c.Do(ctx, "cluster", "slots").Slice()
	if err != nil {
		t.Fatal(err)
	}
	endpoints := 0
	for _, rng := range slots {
		for _, node := range rng.([]any)[2:] {
			f := node.([]any)
			addr := net.JoinHostPort(fmt.Sprint(f[0]), fmt.Sprint(f[1]))
			if !want.MatchString(addr) {
				t.Errorf("CLUSTER SLOTS gives %s, not a pod's name", addr)
			}
			endpoints++
		}
	}
	shards, err := c.Do(ctx, "cluster", "shards").Slice()
	if err != nil {
		t.Fatal(err)
	}
	hostnames := 0
	for _, shard := range shards {
		for _, node := range field(shard, "nodes").([]any) {
			h := fmt.Sprint(field(node, "hostname"))
			if !want.MatchString(h + ":6379") {
				t.Errorf("CLUSTER SHARDS gives hostname %q, not a pod's name", h)
			}
			hostnames++
		}
	}
	t.Logf("CLUSTER SLOTS: %d ranges, %d endpoints by name; CLUSTER SHARDS: %d shards, %d nodes by name", len(slots), endpoints, len(shards), hostnames)
	if endpoints == 0 || hostnames != 6 {
		t.Errorf("CLUSTER SLOTS gave %d endpoints and CLUSTER SHARDS %d nodes, want some and 6", endpoints, hostnames)
	}
}

// field is the value of key in a RESP2 map reply (a flat list of keys and values).
func field(reply any, key string) any {
	kv, _ := reply.([]any)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == key {
			return kv[i+1]
		}
	}
	return nil
}

// followMovedByName writes, through the node at addr (a name), a key that node does not
// serve: it must answer a MOVED naming the owner by its name, which the client reaches
// and which takes the write.
func followMovedByName(ctx context.Context, t *testing.T, o *outsideClient, pw, addr string) {
	t.Helper()
	if err := o.r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("byname:%d", i); o.r.Owner(framework.KeySlot(k)) != addr {
			key = k
		}
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: pw, Dialer: o.d.dial})
	err := c.Set(ctx, key, "x", 0).Err()
	c.Close()
	if err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Fatalf("SET %s on %s: %v, want a MOVED", key, addr, err)
	}
	moved := err.Error()
	o.redirects.note(moved)
	owner := goredis.NewClient(&goredis.Options{Addr: redirectTarget(moved), Password: pw, Dialer: o.d.dial})
	defer owner.Close()
	if err := owner.Set(ctx, key, "x", 0).Err(); err != nil {
		t.Fatalf("following %q: %v", moved, err)
	}
	t.Logf("SET %s on %s: %s, followed: OK", key, addr, moved)
}

// redirectTarget is the "host:port" a MOVED or ASK names.
func redirectTarget(msg string) string {
	f := strings.Fields(msg)
	return f[len(f)-1]
}
