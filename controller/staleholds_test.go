package controller

import (
	"context"
	"testing"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// An operator that died while a big key's move held failure detection leaves the masters'
// cluster-node-timeout raised; the next operator process sets it back to what redis.conf
// says on its first look at the Running cluster, and says so in an event.
func TestStaleHoldIsReleasedByTheNextOperator(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	rc, servers := formRunning(t, h, redistest.Config{})
	ctx := context.Background()
	nodeTimeout := func(addr string) string {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		defer c.Close()
		v, err := c.ConfigGet(ctx, "cluster-node-timeout").Result()
		g.Expect(err).NotTo(HaveOccurred())
		return v[1].(string)
	}
	for _, a := range redistest.Addrs(servers) {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		g.Expect(c.ConfigSet(ctx, "cluster-node-timeout", "60000").Err()).To(Succeed())
		c.Close()
	}
	// What a new process knows: nothing of this cluster.
	h.r.memory(rc).holdsChecked = false

	h.reconcile(rc)
	for _, a := range redistest.Addrs(servers) {
		g.Expect(nodeTimeout(a)).To(Equal("5000"), "cluster-node-timeout on %s", a)
	}
	g.Expect(h.events()).To(ContainElement(ContainSubstring(ReasonHoldReleased)))

	// Checked once per process: a later raise (a hold of this process) is not undone here.
	c := goredis.NewClient(&goredis.Options{Addr: servers[0].Addr})
	defer c.Close()
	g.Expect(c.ConfigSet(ctx, "cluster-node-timeout", "60000").Err()).To(Succeed())
	h.reconcile(rc)
	g.Expect(nodeTimeout(servers[0].Addr)).To(Equal("60000"))
}
