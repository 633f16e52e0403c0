package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// pairKeys is how many keys the master holds when its replica first syncs; with
// rdb-key-save-delay at 200 µs a key they make the full sync last about a second.
const pairKeys = 5000

// startPair runs two real servers, gives the first every slot and pairKeys keys, and
// returns clients to both; the second is met but not yet a replica.
func startPair(t *testing.T) (master, replica *redistest.Server, mc, rc *goredis.Client) {
	t.Helper()
	servers := redistest.Start(t, 2, redistest.Config{})
	master, replica = servers[0], servers[1]
	mc = goredis.NewClient(&goredis.Options{Addr: master.Addr})
	rc = goredis.NewClient(&goredis.Options{Addr: replica.Addr})
	t.Cleanup(func() { mc.Close(); rc.Close() })
	ctx := ctxFor(t, 30*time.Second)
	host, port, _ := strings.Cut(master.Addr, ":")
	must(t, rc.ClusterMeet(ctx, host, port).Err())
	must(t, mc.ClusterAddSlotsRange(ctx, 0, topology.SlotCount-1).Err())
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(mc.ClusterInfo(ctx).Val(), "cluster_state:ok"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the master's cluster_state is not ok 10 s after it got every slot")
		}
	}
	for i := 0; i < pairKeys; i += 1000 {
		p := mc.Pipeline()
		for j := i; j < i+1000; j++ {
			p.Set(ctx, fmt.Sprintf("k-%d", j), strings.Repeat("v", 100), 0)
		}
		_, err := p.Exec(ctx)
		must(t, err)
	}
	// No 5 s wait for more replicas before a full sync starts.
	must(t, mc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err())
	// The replica must know the master before it can replicate it.
	id := myID(t, mc)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(rc.ClusterNodes(ctx).Val(), id); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the replica never learnt the master's node id")
		}
	}
	return master, replica, mc, rc
}

func myID(t *testing.T, c *goredis.Client) string {
	t.Helper()
	id, err := c.Do(context.Background(), "cluster", "myid").Text()
	must(t, err)
	return id
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// syncUntil checks the pair every 50 ms until done says so, returning every check made.
func syncUntil(t *testing.T, f Factory, master, replica string, done func(SyncCheck) bool) []SyncCheck {
	t.Helper()
	ctx := ctxFor(t, 40*time.Second)
	var seen []SyncCheck
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := CheckSync(ctx, f, master, replica, 0)
		must(t, err)
		seen = append(seen, c)
		if done(c) {
			return seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %+v after 30 s (%s)", c, c.Why())
		}
	}
}

// A replica in its first full sync is not caught up (its link is down, then the RDB
// loads); once CheckSync says it is, it holds every key of its master.
func TestCheckSyncWaitsForTheFullSync(t *testing.T) {
	t.Parallel()
	master, replica, mc, rc := startPair(t)
	ctx := ctxFor(t, 60*time.Second)
	f := newFactory(t, Options{})
	// Slow the RDB down so the sync is seen in flight.
	must(t, mc.ConfigSet(ctx, "rdb-key-save-delay", "200").Err())
	must(t, rc.ClusterReplicate(ctx, myID(t, mc)).Err())

	seen := syncUntil(t, f, master.Addr, replica.Addr, SyncCheck.CaughtUp)
	syncing := 0
	for _, c := range seen[:len(seen)-1] {
		if c.CaughtUp() || c.Why() == "" {
			t.Fatalf("a check before the end reads as caught up: %+v", c)
		}
		if c.Replica.Syncing {
			syncing++
		}
	}
	if syncing == 0 {
		t.Fatalf("no check saw master_sync_in_progress:1 in %d checks: %+v", len(seen), seen)
	}
	last := seen[len(seen)-1]
	if last.Why() != "" || last.Replica.MasterAddr != master.Addr {
		t.Fatalf("caught up but Why = %q, master %q", last.Why(), last.Replica.MasterAddr)
	}
	if n := rc.DBSize(ctx).Val(); n != pairKeys {
		t.Fatalf("caught-up replica holds %d keys, its master %d", n, pairKeys)
	}
	t.Logf("full sync seen in flight in %d of %d checks", syncing, len(seen))
}

// A replica whose link is up but which has not processed its master's latest writes
// (its master link's writes held by CLIENT PAUSE WRITE) is behind, by the bytes the
// master wrote; CheckSync waits within its bound and passes once the replica resumes.
func TestCheckSyncSeesALaggingReplica(t *testing.T) {
	t.Parallel()
	master, replica, mc, rc := startPair(t)
	ctx := ctxFor(t, 60*time.Second)
	f := newFactory(t, Options{})
	must(t, rc.ClusterReplicate(ctx, myID(t, mc)).Err())
	syncUntil(t, f, master.Addr, replica.Addr, SyncCheck.CaughtUp)

	must(t, rc.Do(ctx, "client", "pause", "10000", "write").Err())
	for i := 0; i < 100; i++ {
		must(t, mc.Set(ctx, fmt.Sprintf("late-%d", i), i, 0).Err())
	}
	c, err := CheckSync(ctx, f, master.Addr, replica.Addr, 300*time.Millisecond)
	must(t, err)
	if c.CaughtUp() || !c.Replica.InSync() || c.Lag() == 0 || !strings.Contains(c.Why(), "behind") {
		t.Fatalf("a paused replica reads as %+v (%s); want link up, behind", c, c.Why())
	}
	t.Logf("paused replica: %s", c.Why())

	// CheckSync polls: the replica resumes while it waits, and it passes.
	go func() {
		time.Sleep(200 * time.Millisecond)
		rc.Do(context.Background(), "client", "unpause")
	}()
	c, err = CheckSync(ctx, f, master.Addr, replica.Addr, 5*time.Second)
	must(t, err)
	if !c.CaughtUp() {
		t.Fatalf("the replica did not catch up after CLIENT UNPAUSE: %+v (%s)", c, c.Why())
	}
	if n := rc.DBSize(ctx).Val(); n != pairKeys+100 {
		t.Fatalf("caught-up replica holds %d keys, want %d", n, pairKeys+100)
	}

	// Link down: the master is gone. The replica's own report says so, and a check
	// against the dead master fails instead of passing.
	before := c.Master
	master.Stop()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, err := f.For(replica.Addr).Replication(ctx)
		must(t, err)
		down := SyncCheck{MasterAddr: master.Addr, Master: before, Replica: r}
		if !r.LinkUp {
			if down.CaughtUp() || down.Why() != "its replication link is down" {
				t.Fatalf("a replica with its link down reads as %+v (%q)", down, down.Why())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica's link stayed up 10 s after its master stopped")
		}
	}
	if _, err := CheckSync(ctx, f, master.Addr, replica.Addr, 0); err == nil {
		t.Fatal("CheckSync against a stopped master did not fail")
	}
}

func TestSyncCheckNamesTheWrongMaster(t *testing.T) {
	c := SyncCheck{MasterAddr: "10.0.0.1:6379",
		Master:  topology.Replication{Role: topology.RoleMaster, Offset: 100},
		Replica: topology.Replication{Role: topology.RoleSlave, LinkUp: true, Offset: 100, MasterAddr: "10.0.0.2:6379"}}
	if c.CaughtUp() || !strings.Contains(c.Why(), "replicates from 10.0.0.2:6379") {
		t.Fatalf("a replica of another master reads as %q", c.Why())
	}
	c.Replica.MasterAddr = c.MasterAddr
	if !c.CaughtUp() || c.Why() != "" {
		t.Fatalf("an equal offset reads as behind: %q", c.Why())
	}
	c.Replica.Offset = 99
	if c.CaughtUp() || c.Lag() != 1 {
		t.Fatalf("one byte behind reads as caught up (lag %d)", c.Lag())
	}
}

// A replica of a master that announces a node port (spec.externalAccess NodePort)
// replicates from that address: it is the same master.
func TestSyncCheckKnowsTheMasterByItsAnnouncedAddress(t *testing.T) {
	c := SyncCheck{MasterAddr: "10.0.0.1:6379", MasterAliases: []string{"198.18.0.11:32311"},
		Master:  topology.Replication{Role: topology.RoleMaster, Offset: 100},
		Replica: topology.Replication{Role: topology.RoleSlave, LinkUp: true, Offset: 100, MasterAddr: "198.18.0.11:32311"}}
	if !c.CaughtUp() || c.Why() != "" {
		t.Fatalf("a replica of the master's announced address reads as %q", c.Why())
	}
	c.Replica.MasterAddr = "198.18.0.12:30001"
	if c.CaughtUp() || !strings.Contains(c.Why(), "replicates from 198.18.0.12:30001") {
		t.Fatalf("a replica of another address reads as %q", c.Why())
	}
}
