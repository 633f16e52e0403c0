//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Faults around slot migration, with the fault suite's writer and 100,000 keys.

// openForeignSlot does what an abandoned `redis-cli --cluster reshard` leaves: the first
// slot of one master marked MIGRATING to another, which marks it IMPORTING, and half of
// the slot's keys already MIGRATEd. It returns the slot.
func openForeignSlot(ctx context.Context, t *testing.T, ns string) int {
	t.Helper()
	pods, err := stack.Pods(ctx, ns, selectorOf("demo"))
	if err != nil {
		t.Fatal(err)
	}
	var members []topology.Member
	for _, p := range pods {
		members = append(members, topology.Member{Pod: p.Name, Addr: net.JoinHostPort(p.Status.PodIP, "6379")})
	}
	f := redis.NewFactory(redis.Options{})
	defer f.Close()
	st, err := redis.Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	var src, dst *topology.Node
	var srcAddr, dstAddr string
	for i := range st.Members {
		if self := st.Members[i].Self(); self.Master && len(self.Slots) > 0 {
			if src == nil {
				src, srcAddr = self, st.Members[i].Addr
			} else if dst == nil {
				dst, dstAddr = self, st.Members[i].Addr
			}
		}
	}
	slot := src.Slots[0].Start
	s := goredis.NewClient(&goredis.Options{Addr: srcAddr})
	d := goredis.NewClient(&goredis.Options{Addr: dstAddr})
	defer s.Close()
	defer d.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.Do(ctx, "cluster", "setslot", slot, "importing", src.ID).Err())
	must(s.Do(ctx, "cluster", "setslot", slot, "migrating", dst.ID).Err())
	keys, err := s.ClusterGetKeysInSlot(ctx, slot, 1000).Result()
	must(err)
	if len(keys) < 2 {
		t.Fatalf("slot %d holds %d keys; the case needs some to move", slot, len(keys))
	}
	host, port, _ := net.SplitHostPort(dstAddr)
	args := []any{"migrate", host, port, "", 0, 5000, "keys"}
	for _, k := range keys[:len(keys)/2] {
		args = append(args, k)
	}
	must(s.Do(ctx, args...).Err())
	t.Logf("slot %d left open from %s to %s with %d of its %d keys moved", slot, srcAddr, dstAddr, len(keys)/2, len(keys))
	return slot
}

// A reshard someone else started and abandoned, on a Running cluster: healing finishes the
// slot as redis-cli --cluster fix does; then a scale-out and back runs through.
func TestFaultForeignOpenSlotThenScale(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := startFault(ctx, t, "fault-foreign-slot", nil)
	start := time.Now()
	slot := openForeignSlot(ctx, t, f.ns)
	// A Running cluster is looked at every 30 s (nothing in Redis is watched): the marker
	// is found on the next look and finished then.
	NewWithT(t).Eventually(func() error { return stack.Integrity(ctx, f.ns, "demo", "") }, 90*time.Second, time.Second).Should(Succeed())
	took := backToRunning(ctx, t, f.ns, start, faultRecovery)
	t.Logf("slot %d finished %.1fs after it was left open", slot, took.Seconds())
	out := resize(ctx, t, f.ns, "demo", 8)
	in := resize(ctx, t, f.ns, "demo", 6)
	t.Logf("then scaled 6->8 in %.1fs and back in %.1fs", out.Seconds(), in.Seconds())
	f.finish(fmt.Sprintf("foreign open slot, then scale 6->8->6 (back in %.1fs)", took.Seconds()), 0, took)
}

// The operator SIGKILLed while slots move on a scale-out, and started again: the migration
// resumes from Redis' own markers and finishes with every key.
func TestFaultOperatorKilledMidMigration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	op := operator(t)
	f := startFault(ctx, t, "fault-op-killed", nil)
	start := time.Now()
	if out, err := stack.Kubectl("-n", f.ns, "scale", "rec/demo", "--replicas=8"); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	g := NewWithT(t)
	// Kill it once a slot has moved: the first MigrateSlots event.
	g.Eventually(func() bool {
		evs, err := stack.Events(ctx, getCluster(ctx, t, f.ns, "demo"))
		if err != nil {
			return false
		}
		for _, e := range evs {
			if e.Reason == "RedisAction" && len(e.Message) > 12 && e.Message[:12] == "MigrateSlots" {
				return true
			}
		}
		return false
	}, 3*time.Minute, 50*time.Millisecond).Should(BeTrue(), "slots start moving")
	g.Expect(op.Kill()).To(Succeed())
	g.Eventually(op.Running, 10*time.Second, 100*time.Millisecond).Should(BeFalse())
	time.Sleep(2 * time.Second)
	g.Expect(op.Restart()).To(Succeed())
	if err := stack.WaitForPhase(ctx, f.ns, "demo", "Running", 4*time.Minute); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, f.ns, "demo").Status.Reason)
	}
	expectShape(ctx, t, f.ns, "demo", 8, 4, 4096)
	f.finish("operator SIGKILLed mid-migration (6->8)", 0, time.Since(start))
}

// waitForMigration waits until slots move on a scale-out: the first MigrateSlots event.
func waitForMigration(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		evs, err := stack.Events(ctx, getCluster(ctx, t, ns, "demo"))
		if err != nil {
			return false
		}
		for _, e := range evs {
			if e.Reason == "RedisAction" && len(e.Message) > 12 && e.Message[:12] == "MigrateSlots" {
				return true
			}
		}
		return false
	}, 3*time.Minute, 50*time.Millisecond).Should(BeTrue(), "slots start moving")
}

// nodesOf reads CLUSTER NODES of every pod: pod name -> its own line, and pod -> address.
func nodesOf(ctx context.Context, t *testing.T, ns string) (map[string]topology.Node, map[string]string) {
	t.Helper()
	self, addrs := map[string]topology.Node{}, map[string]string{}
	for pod, ip := range podIPs(ctx, t, ns, "demo") {
		c := goredis.NewClient(&goredis.Options{Addr: net.JoinHostPort(ip, "6379")})
		text, err := c.ClusterNodes(ctx).Result()
		c.Close()
		if err != nil {
			continue // restarting
		}
		nodes, err := topology.ParseClusterNodes(text)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.Myself {
				self[pod], addrs[pod] = n, net.JoinHostPort(ip, "6379")
			}
		}
	}
	return self, addrs
}

// A new master's pod deleted while slots move to it on a scale-out: its replica, attached
// and in sync before the first slot moved, takes over, and the scale-out finishes. The
// migration is capped at 5,000 keys/s so the delete lands while slots move (unthrottled,
// the ~28k keys of the new masters can be moved before the first MigrateSlots event).
func TestFaultNewMasterDeletedMidMigration(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := startFault(ctx, t, "fault-new-master", withMaxKeysPerSecond(5000))
	start := time.Now()
	if out, err := stack.Kubectl("-n", f.ns, "scale", "rec/demo", "--replicas=8"); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	waitForMigration(ctx, t, f.ns)
	self, _ := nodesOf(ctx, t, f.ns)
	victim := ""
	for _, pod := range []string{"demo-6", "demo-7"} {
		if n, ok := self[pod]; ok && n.Master {
			victim = pod
		}
	}
	if victim == "" {
		t.Fatalf("no new master among demo-6, demo-7: %v", self)
	}
	rc := getCluster(ctx, t, f.ns, "demo")
	if p := rc.Status.Progress; p != nil {
		t.Logf("deleting the new master %s while slots move to it (phase %s, progress %+v)", victim, rc.Status.Phase, *p)
	} else {
		t.Logf("deleting the new master %s (phase %s, no progress in the status)", victim, rc.Status.Phase)
	}
	old := map[string]string{victim: podIPs(ctx, t, f.ns, "demo")[victim]}
	deleted := time.Now()
	if err := stack.DeletePod(ctx, f.ns, victim); err != nil {
		t.Fatal(err)
	}
	// Not merely Running: the phase may reach Running before Redis has noticed the
	// deleted node. Healed is the pod back, Running, no node flagged failing anywhere, and
	// 8 pods in 4 shards of 4096 slots.
	healedAs(ctx, t, f.ns, "demo", old, deleted, 5*time.Minute, func(g Gomega, _ *redisv1alpha1.RedisCluster) {
		expectShapeG(ctx, g, f.ns, "demo", 8, 4, 4096)
	})
	f.finish("new master's pod deleted mid-migration (6->8)", 0, time.Since(start))
}

// CLUSTER FAILOVER on the replica of a slot's source while the slot is open on a
// scale-out: the promoted replica holds the MIGRATING side now, and the move is finished
// from there, with no key on a node that does not own its slot.
func TestFaultSourceFailoverWhileSlotOpen(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := startFault(ctx, t, "fault-src-failover", nil)
	start := time.Now()
	if out, err := stack.Kubectl("-n", f.ns, "scale", "rec/demo", "--replicas=8"); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	var source topology.Node
	NewWithT(t).Eventually(func() bool {
		self, _ := nodesOf(ctx, t, f.ns)
		for _, n := range self {
			if n.Master && len(n.Migrating) > 0 { // not a replica's copy (Valkey 8+)
				source = n
				return true
			}
		}
		return false
	}, 3*time.Minute, 20*time.Millisecond).Should(BeTrue(), "a slot is open")
	self, addrs := nodesOf(ctx, t, f.ns)
	replica := ""
	for pod, n := range self {
		if n.Replica && n.MasterID == source.ID {
			replica = pod
		}
	}
	if replica == "" {
		t.Fatalf("the source %s has no replica", source.ID)
	}
	c := goredis.NewClient(&goredis.Options{Addr: addrs[replica]})
	err := c.Do(ctx, "cluster", "failover").Err()
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CLUSTER FAILOVER on %s, replica of the source %s (migrating %s)", replica, source.ID, openSlots(source.Migrating))
	if err := stack.WaitForPhase(ctx, f.ns, "demo", "Running", 5*time.Minute); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, f.ns, "demo").Status.Reason)
	}
	expectShape(ctx, t, f.ns, "demo", 8, 4, 4096)
	f.finish("source's replica failed over while a slot is open (6->8)", 0, time.Since(start))
}

// CLUSTER FAILOVER on the replica of a slot's target while the slot is open on a
// scale-out: the target is a new master, IMPORTING the slot; its replica takes over with
// the keys moved so far and no marker (markers are not replicated), and the old target
// turns replica, dropping its own. The move is finished from the source to the promoted
// replica, with no key on a node that does not own its slot and no marker left.
func TestFaultTargetFailoverWhileSlotOpen(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := startFault(ctx, t, "fault-dst-failover", nil)
	start := time.Now()
	if out, err := stack.Kubectl("-n", f.ns, "scale", "rec/demo", "--replicas=8"); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	var target topology.Node
	NewWithT(t).Eventually(func() bool {
		self, _ := nodesOf(ctx, t, f.ns)
		for _, n := range self {
			// Holding slots already: Redis fails over no replica of a master that holds none
			// (cluster.c), so before the new master's first group closes, CLUSTER FAILOVER
			// times out after 5 s with the target's writes paused, and nothing is tested.
			if n.Master && len(n.Importing) > 0 && len(n.Slots) > 0 {
				target = n
				return true
			}
		}
		return false
	}, 3*time.Minute, 20*time.Millisecond).Should(BeTrue(), "a slot is open on a target holding slots")
	self, addrs := nodesOf(ctx, t, f.ns)
	replica, targetPod := "", ""
	for pod, n := range self {
		if n.Replica && n.MasterID == target.ID {
			replica = pod
		}
		if n.ID == target.ID {
			targetPod = pod
		}
	}
	if replica == "" {
		t.Fatalf("the target %s (%s) has no replica", target.ID, targetPod)
	}
	attempts := failOverUntilPromoted(ctx, t, addrs[replica])
	t.Logf("CLUSTER FAILOVER on %s, replica of the target %s (%s, importing %s when first sent): promoted after %d attempt(s)", replica, targetPod, target.ID, openSlots(target.Importing), attempts)
	if attempts > 1 {
		// What the masters answered the replica's first election, in their own words.
		logPods(t, f.ns, 12, "ailover", "election", "configEpoch")
	}
	if err := stack.WaitForPhase(ctx, f.ns, "demo", "Running", 5*time.Minute); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, f.ns, "demo").Status.Reason)
	}
	expectShape(ctx, t, f.ns, "demo", 8, 4, 4096)
	after, _ := nodesOf(ctx, t, f.ns)
	if n := after[replica]; !n.Master || len(n.Slots) == 0 {
		t.Errorf("%s, promoted from the target's replica, is not a master holding slots: %+v", replica, n)
	}
	f.finish("target's replica failed over while a slot is open (6->8)", 0, time.Since(start))
}

// openSlots sums up a node's MIGRATING or IMPORTING slots: how many, the lowest and the
// highest, and the nodes they name.
func openSlots(marked map[int]string) string {
	if len(marked) == 0 {
		return "no slot"
	}
	slots := slices.Sorted(maps.Keys(marked))
	peers := map[string]bool{}
	for _, id := range marked {
		peers[id] = true
	}
	return fmt.Sprintf("%d slots, %d-%d, with %d node(s)", len(slots), slots[0], slots[len(slots)-1], len(peers))
}

// failOverUntilPromoted sends CLUSTER FAILOVER to the replica at addr until it is a master
// and returns how many were sent. Redis gives a manual failover 5 s to win the masters'
// votes and then drops it silently ("Manual failover timed out"), which a loaded machine
// sees now and then; an operator would send it again, and so does the test. Redis also
// refuses one while the replica has no cluster-bus link to its master ("Master is down or
// failed"; the link is made again within 100 ms), seen once in CI mid-migration: that is
// sent again for up to 10 s, after which the master counts as down and the test fails.
func failOverUntilPromoted(ctx context.Context, t *testing.T, addr string) int {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	send := func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := c.Do(ctx, "cluster", "failover").Err()
			if err == nil {
				return
			}
			if !strings.Contains(err.Error(), "Master is down or failed") || time.Now().After(deadline) {
				t.Fatalf("CLUSTER FAILOVER on %s: %v", addr, err)
			}
			t.Logf("CLUSTER FAILOVER on %s: %v; sent again in 200 ms", addr, err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	for attempt := 1; attempt <= 3; attempt++ {
		send()
		deadline := time.Now().Add(8 * time.Second)
		for time.Now().Before(deadline) {
			if role, err := c.Do(ctx, "role").Slice(); err == nil && len(role) > 0 && role[0] == "master" {
				return attempt
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("CLUSTER FAILOVER on %s: still a replica after 8 s (attempt %d)", addr, attempt)
	}
	t.Fatalf("%s was not promoted by 3 CLUSTER FAILOVERs", addr)
	return 0
}
