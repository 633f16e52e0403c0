//go:build e2e

package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// lbRange is where the devcluster's load balancer (hack/devcluster/loadbalancer.sh) takes
// its addresses.
var lbRange = &net.IPNet{IP: net.IPv4(198, 18, 1, 0).To4(), Mask: net.CIDRMask(24, 32)}

// TestExternalAccessLoadBalancer runs spec.externalAccess type LoadBalancer on the
// devcluster's load balancer: every pod's Service gets an address of 198.18.1.0/24,
// which kube-proxy serves and the host reaches. Each node announces its load balancer's
// address (status.conditions[].externalAddress is that address and port 6379), and a
// client on the host that dials those addresses only loads 100,000 keys and writes through
// a scale-out from 3 to 4 masters (two new load balancers) and the deletion of a master's
// pod: every redirect names a load balancer, no key and no acknowledged write is lost.
func TestExternalAccessLoadBalancer(t *testing.T) {
	testStart := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const ns, name = "external-lb", "demo"
	pw := formDemoWith(ctx, t, ns, "externalAccess", map[string]any{"type": "LoadBalancer"})
	d := &outsideDialer{resolve: func(_ context.Context, host string) (string, bool) {
		ip := net.ParseIP(host)
		return host, ip != nil && lbRange.Contains(ip)
	}}
	r := framework.NewRouter(statusSeeds(t, ns, name), pw)
	// The nodes announce their load balancer's address as their hostname: CLUSTER NODES
	// keeps the pod IPs, which a client outside cannot reach.
	r.PreferHostnames()
	defer r.Close()
	o := newOutsideClient(ns, name, 6, r, d, pw, nil, func(g Gomega, n int) { expectLoadBalancersAnnounced(ctx, t, g, ns, name, n) })
	o.waitAnnounced(ctx, t, 2*time.Minute)
	t.Logf("STAGE every node announces its load balancer's address, %v after the test began", time.Since(testStart).Round(100*time.Millisecond))
	o.writeThrough(ctx, t, "LoadBalancer", scaleOut3to4, masterDeleted)
	t.Logf("test %v", time.Since(testStart).Round(time.Second))
}

// expectLoadBalancersAnnounced checks that each of n pods shows, as its external address,
// its own Service's load balancer address (one of lbRange) and port 6379, all different.
func expectLoadBalancersAnnounced(ctx context.Context, t *testing.T, g Gomega, ns, name string, n int) {
	rc := getCluster(ctx, t, ns, name)
	seen := map[string]string{}
	for _, c := range rc.Status.Conditions {
		if c.ExternalAddress == "" {
			continue
		}
		svc := &corev1.Service{}
		g.Expect(kubeClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-external"}, svc)).To(Succeed())
		g.Expect(svc.Status.LoadBalancer.Ingress).NotTo(BeEmpty(), "Service %s has no load balancer", svc.Name)
		lb := svc.Status.LoadBalancer.Ingress[0].IP
		g.Expect(lbRange.Contains(net.ParseIP(lb))).To(BeTrue(), "Service %s's load balancer %s", svc.Name, lb)
		g.Expect(c.ExternalAddress).To(Equal(net.JoinHostPort(lb, "6379")), "%s announces its load balancer", c.Name)
		g.Expect(seen).NotTo(HaveKey(lb), "%s and %s share a load balancer address", c.Name, seen[lb])
		seen[lb] = c.Name
	}
	g.Expect(seen).To(HaveLen(n), "pods announcing their load balancer; reason: %s", rc.Status.Reason)
}
