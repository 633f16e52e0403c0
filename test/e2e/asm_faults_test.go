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

// TestAtomicSlotMigrationSourceFailoverAndBigKeys runs the demo cluster on Valkey 9.1
// (slots moved by the servers, CLUSTER MIGRATESLOTS) with the fault suite's 100,000 keys
// and writer, on one cluster: a scale-out 6->8 with the SOURCE of a running job failed over
// to its replica (the job fails, the slots stay with the source's shard, and the next job
// goes from the promoted replica), then a scale-in 8->6 moving big keys: a sorted set of
// 1,000,000 members, two strings of 32 MB and a hash of 200,000 fields, each read back
// whole afterwards. No key and no acknowledged write may be lost; each part's longest
// write gap is logged.
func TestAtomicSlotMigrationSourceFailoverAndBigKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	began := time.Now()
	f := startFault(ctx, t, "asm-faults", func(u *unstructured.Unstructured) {
		withServer("valkey/valkey", "9.1")(u)
		withMemory(u)
	})
	expectServer(ctx, t, f.ns, "demo", "valkey 9.1.2")
	f.w.TakeLongestGap()

	// The source of a running job failed over. Snapshots slowed to 500 µs a key (about 4 s
	// for each old master's ~8,300 keys, one source at a time) so that the failover, a
	// second or two, lands while the job runs.
	all := func(string) bool { return true }
	failedBefore := asmJobs(ctx, t, f.ns, "EXPORT", "failed", all) + asmJobs(ctx, t, f.ns, "IMPORT", "failed", all)
	slowSnapshots(ctx, t, f.ns, 500)
	start := time.Now()
	if out, err := stack.Kubectl("-n", f.ns, "scale", "rec/demo", "--replicas=8"); err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, out)
	}
	failOverMaster(ctx, t, f.ns, waitForJob(ctx, t, f.ns, "EXPORT"), "exports slots")
	if err := stack.WaitForObservedPhase(ctx, f.ns, "demo", "Running", 4*time.Minute); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, f.ns, "demo").Status.Reason)
	}
	expectShape(ctx, t, f.ns, "demo", 8, 4, 4096)
	slowSnapshots(ctx, t, f.ns, 0)
	t.Logf("ASM: scale-out 6->8 with a source failed over mid-move %.1fs (gap %v)", time.Since(start).Seconds(), f.w.TakeLongestGap())
	// The job whose source failed over failed (on the old source, now a replica, or on the
	// target): the failover did land mid-move, and the slots moved all the same.
	failed := asmJobs(ctx, t, f.ns, "EXPORT", "failed", all) + asmJobs(ctx, t, f.ns, "IMPORT", "failed", all) - failedBefore
	if failed < 1 {
		t.Errorf("no job failed: the failover did not land while a job ran")
	} else {
		t.Logf("%d job(s) failed when their source failed over, and the slots moved from the promoted replica", failed)
	}

	// Big keys in the slots the leaving master gives back on the scale-in.
	big := loadBigKeys(ctx, t, f.ns)
	f.w.TakeLongestGap()
	in := resize(ctx, t, f.ns, "demo", 6)
	expectShape(ctx, t, f.ns, "demo", 6, 3, 5461)
	t.Logf("ASM: scale-in 8->6 moving the big keys %.1fs (gap %v)", in.Seconds(), f.w.TakeLongestGap())
	big.check(ctx, t, f.r)
	f.finish("Valkey 9.1 atomic slot migration: 6->8 source failed over, 8->6 with big keys", 0, time.Since(began))
}

// bigKeys are the big keys a test wrote, to read back after they moved.
type bigKeys struct {
	zset, hash string
	strings    []string
}

const (
	bigZsetMembers = 1_000_000
	bigHashFields  = 200_000
	bigStringBytes = 32 << 20
)

// loadBigKeys writes the big keys in three slots of the master that leaves on a scale-in
// back to 6 pods (demo-6 or demo-7), and waits until its replica has them.
func loadBigKeys(ctx context.Context, t *testing.T, ns string) bigKeys {
	t.Helper()
	self, addrs := nodesOf(ctx, t, ns)
	leaving := ""
	for pod, n := range self {
		if !kept(pod) && !n.Replica {
			leaving = pod
		}
	}
	if leaving == "" || len(self[leaving].Slots) == 0 {
		t.Fatalf("no leaving master with slots among %v", self)
	}
	ranges := self[leaving].Slots
	first, last := ranges[0].Start, ranges[len(ranges)-1].End
	b := bigKeys{zset: keyInSlot("bigzset", first), hash: keyInSlot("bighash", (first+last)/2),
		strings: []string{keyInSlot("bigstr1", last), keyInSlot("bigstr2", first+1)}}
	start := time.Now()
	addr := addrs[leaving]
	redistest.ZAddBig(ctx, t, addr, "", b.zset, bigZsetMembers)
	c := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: 70 * time.Second, WriteTimeout: 70 * time.Second})
	defer c.Close()
	for i := 0; i < bigHashFields; i += 10_000 {
		fields := make([]any, 0, 20_000)
		for j := i; j < i+10_000; j++ {
			fields = append(fields, fmt.Sprintf("field:%06d", j), fmt.Sprintf("value:%06d", j))
		}
		if err := c.HSet(ctx, b.hash, fields...).Err(); err != nil {
			t.Fatalf("HSET %s on %s: %v", b.hash, leaving, err)
		}
	}
	for _, k := range b.strings {
		if err := c.Set(ctx, k, bigString(k), 0).Err(); err != nil {
			t.Fatalf("SET %s on %s: %v", k, leaving, err)
		}
	}
	if err := c.Do(ctx, "wait", 1, 60000).Err(); err != nil {
		t.Fatalf("WAIT for the replica of %s: %v", leaving, err)
	}
	t.Logf("loaded on %s: %s (%d members), %s (%d fields), %v (%d MB each) in %v", leaving, b.zset, bigZsetMembers,
		b.hash, bigHashFields, b.strings, bigStringBytes>>20, time.Since(start).Round(time.Millisecond))
	return b
}

// bigString is the value of big string key k: bigStringBytes derived from k.
func bigString(k string) string {
	unit := k + ":0123456789abcdef:"
	return strings.Repeat(unit, bigStringBytes/len(unit)+1)[:bigStringBytes]
}

// check reads every big key back through r and compares it with what was written.
func (b bigKeys) check(ctx context.Context, t *testing.T, r *framework.Router) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(r.Do(ctx, b.zset, "zcard", b.zset).Int()).To(Equal(bigZsetMembers), b.zset)
	for _, i := range []int{0, 1, bigZsetMembers / 2, bigZsetMembers - 1} {
		g.Expect(r.Do(ctx, b.zset, "zscore", b.zset, fmt.Sprintf("member:%07d", i)).Float64()).To(Equal(float64(i)), "%s member %d", b.zset, i)
	}
	g.Expect(r.Do(ctx, b.hash, "hlen", b.hash).Int()).To(Equal(bigHashFields), b.hash)
	for _, i := range []int{0, bigHashFields / 2, bigHashFields - 1} {
		g.Expect(r.Do(ctx, b.hash, "hget", b.hash, fmt.Sprintf("field:%06d", i)).Text()).To(Equal(fmt.Sprintf("value:%06d", i)), b.hash)
	}
	// A string is compared by its length and 64 KB at five places (the router's reads time
	// out after 2 s, too short for 32 MB on a loaded machine).
	for _, k := range b.strings {
		want := bigString(k)
		g.Expect(r.Do(ctx, k, "strlen", k).Int()).To(Equal(bigStringBytes), k)
		for _, at := range []int{0, bigStringBytes / 4, bigStringBytes / 2, bigStringBytes - 1<<17, bigStringBytes - 1<<16} {
			v, err := r.Do(ctx, k, "getrange", k, at, at+1<<16-1).Text()
			g.Expect(err).NotTo(HaveOccurred(), k)
			g.Expect(v == want[at:at+1<<16]).To(BeTrue(), "%s: the 64 KB at %d differ from those written", k, at)
		}
	}
	t.Logf("big keys read back whole: %s, %s, %v", b.zset, b.hash, b.strings)
}
