//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

const (
	// bigKeyMembers is the size of the fault suite's big key: a sorted set whose MIGRATE
	// (tens of MB of DUMP, seconds of RESTORE) takes longer than MIGRATE's default timeout.
	bigKeyMembers = 2_000_000
	// bigKeySlot is where it lives: the highest slot of the last master, among the first
	// slots that master gives away on a scale-out (PlanRebalance gives the highest first).
	bigKeySlot = 16383
)

// withMemory gives each Redis room for the big key (about 200 MB on the source, its
// replica, the target and its replica): maxmemory 1gb, a 2Gi memory limit.
func withMemory(u *unstructured.Unstructured) {
	pods, _, _ := unstructured.NestedSlice(u.Object, "spec", "pod")
	p := pods[0].(map[string]any)
	p["env"] = []any{map[string]any{"name": "MAXMEMORY", "value": "1gb"}}
	p["resources"] = map[string]any{
		"requests": map[string]any{"cpu": "50m", "memory": "64Mi"},
		"limits":   map[string]any{"cpu": "500m", "memory": "2Gi"},
	}
	_ = unstructured.SetNestedSlice(u.Object, pods, "spec", "pod")
}

// keyInSlot is a key name that hashes to slot.
func keyInSlot(prefix string, slot int) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("%s:%d", prefix, i); framework.KeySlot(k) == slot {
			return k
		}
	}
}

// loadBigKey writes a sorted set of n members to key on the master at addr in pipelined
// ZADD batches, and waits until its replica has it.
func loadBigKey(ctx context.Context, t *testing.T, addr, key string, n int) {
	t.Helper()
	redistest.ZAddBig(ctx, t, addr, "", key, n)
	c := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: 70 * time.Second})
	defer c.Close()
	if err := c.Do(ctx, "wait", 1, 60000).Err(); err != nil {
		t.Fatalf("WAIT for the replica of %s: %v", addr, err)
	}
}

// A big key in a slot that moves on a scale-out (3 masters -> 4): a sorted set of
// 2,000,000 members. Its MIGRATE takes longer than MIGRATE's default timeout; the mover
// sizes it and sends it alone with a timeout its size calls for, instead of splitting it
// down and reporting it stuck. Redis blocks the source (and the target, while it
// restores) for the whole MIGRATE: the writer's longest gap on that shard is that block,
// reported here and in docs/guarantees.md.
func TestFaultBigKeyMoves(t *testing.T) {
	t.Parallel()
	bigKeyMoves(t, "fault-big-key", withMemory)
}

// TestFaultBigKeyMovesOnValkey is TestFaultBigKeyMoves on Valkey 9.1 whatever E2E_SERVER
// says: the subset of the matrix `make test` runs. On Valkey, SETSLOT is replicated to the
// target's replicas and the new master's replica could turn replica of an old master
// (docs/migration.md); the scale-out must still end with a replica per master.
func TestFaultBigKeyMovesOnValkey(t *testing.T) {
	t.Parallel()
	bigKeyMoves(t, "fault-big-key-valkey", func(u *unstructured.Unstructured) {
		withServer("valkey/valkey", "9.1")(u)
		withMemory(u)
	})
}

// bigKeyMoves is TestFaultBigKeyMoves on the cluster mutate makes, in namespace ns.
func bigKeyMoves(t *testing.T, ns string, mutate func(*unstructured.Unstructured)) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	f := startFault(ctx, t, ns, mutate)
	if err := f.r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	key := keyInSlot("bigzset", bigKeySlot)
	source := f.r.Owner(bigKeySlot)
	start := time.Now()
	loadBigKey(ctx, t, source, key, bigKeyMembers)
	t.Logf("loaded %s (%d members, slot %d) on %s in %v", key, bigKeyMembers, bigKeySlot, source, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	if out, err := stack.Kubectl("-n", f.ns, "scale", "rec/demo", "--replicas=8"); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	if err := stack.WaitForPhase(ctx, f.ns, "demo", "Scaling", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitForPhase(ctx, f.ns, "demo", "Running", 10*time.Minute); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, f.ns, "demo").Status.Reason)
	}
	took := time.Since(start)
	expectShape(ctx, t, f.ns, "demo", 8, 4, 4096)

	g := NewWithT(t)
	g.Expect(f.r.Refresh(ctx)).To(Succeed())
	g.Expect(f.r.Owner(bigKeySlot)).NotTo(Equal(source), "slot %d moved off %s", bigKeySlot, source)
	n, err := f.r.Do(ctx, key, "zcard", key).Int()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(bigKeyMembers), "members of %s after the move", key)
	last := fmt.Sprintf("member:%07d", bigKeyMembers-1)
	score, err := f.r.Do(ctx, key, "zscore", key, last).Float64()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(score).To(BeEquivalentTo(bigKeyMembers - 1))
	evs, err := stack.Events(ctx, getCluster(ctx, t, f.ns, "demo"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range evs {
		if e.Reason == "MigrationStuck" || strings.Contains(e.Message, "stuck") {
			t.Errorf("event %s: %s", e.Reason, e.Message)
		}
		if strings.Contains(e.Message, "which has fewer than") || e.Reason == "ReplicaMigrationRestored" {
			t.Logf("event %s: %s", e.Reason, e.Message) // a replica that followed the slots, moved back
		}
	}
	t.Logf("scaled 6->8 with the big key in %.1fs; %s now on %s", took.Seconds(), key, f.r.Owner(bigKeySlot))
	f.finish("big key (2M-member sorted set) in a slot that moves (6->8)", 0, took)
}
