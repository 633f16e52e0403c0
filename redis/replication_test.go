package redis

import (
	"testing"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// A coordinated failover on real servers: the replica reports its link up, takes over on
// CLUSTER FAILOVER, and every node then sees the roles swapped.
func TestFailoverSwapsRolesOnRealServers(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 6, redistest.Config{})
	members := membersOf(servers)
	f := newFactory(t, Options{})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 3, 1); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	var replica string
	for deadline := time.Now().Add(10 * time.Second); replica == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, m := range members {
			r, err := f.For(m.Addr).Replication(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.InSync() {
				replica = m.Addr
				break
			}
		}
	}
	if replica == "" {
		t.Fatal("no replica reported master_link_status:up within 10s")
	}
	if err := f.For(replica).Failover(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r, err := f.For(replica).Replication(ctx)
		if err == nil && r.Role == "master" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still %+v 10s after CLUSTER FAILOVER (err %v)", replica, r, err)
		}
	}
	if err := f.For(replica).Failover(ctx); err == nil {
		t.Fatal("CLUSTER FAILOVER on a master was accepted")
	}
}
