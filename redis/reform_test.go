package redis

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// The bootstrap over kept data: a RedisCluster deleted and applied again finds pods whose
// data dirs (hostPath, claims) still hold a formed cluster's nodes.conf and keys, at new
// addresses. These tests stop every server and start it again from its dir on a new port.

const reformKeys = 10000

// writeReformKeys writes PREFIX-0 … PREFIX-(n-1), key i holding i, on each key's owner.
func writeReformKeys(t *testing.T, f Factory, members []topology.Member, prefix string, n int) {
	t.Helper()
	putKeys(t, f, members, numberedKeys(prefix, n))
}

// expectReformKeys reads every key writeReformKeys wrote from the node owning its slot now.
func expectReformKeys(t *testing.T, f Factory, members []topology.Member, prefix string, n int) {
	t.Helper()
	if lost := lostKeys(t, f, members, numberedKeys(prefix, n)); lost > 0 {
		t.Fatalf("%d of %d keys %s-* lost or wrong", lost, n, prefix)
	}
}

// formKept forms six servers (cluster-node-timeout 1 s) and writes reformKeys keys.
func formKept(t *testing.T) ([]*redistest.Server, []topology.Member, Factory) {
	t.Helper()
	servers := redistest.Start(t, 6, healCfg)
	members := membersOf(servers)
	f := newFactory(t, Options{})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 3, 1); err != nil {
		t.Fatal(err)
	}
	writeReformKeys(t, f, members, "kept", reformKeys)
	return servers, members, f
}

// saveAll makes every server write its dump.rdb, as a clean shutdown would.
func saveAll(t *testing.T, servers []*redistest.Server) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	for _, s := range servers {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr})
		err := c.Save(ctx).Err()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// restartFrom starts member i again from dir on a new port and points the member at it.
func restartFrom(t *testing.T, members []topology.Member, i int, dir string) *redistest.Server {
	t.Helper()
	s, err := redistest.StartIn(dir, healCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	members[i].Addr = s.Addr
	return s
}

// bootstrapUntilDone runs Bootstrap as the controller does (a budget per call) until done.
func bootstrapUntilDone(t *testing.T, f Factory, members []topology.Member) []topology.Action {
	t.Helper()
	start := time.Now()
	var all []topology.Action
	for try := 0; try < 4; try++ {
		p, err := Bootstrap(ctxFor(t, 15*time.Second), f, members, 3, 1)
		all = append(all, p.Actions...)
		if err == nil && p.Done {
			t.Logf("re-formed in %v with %d writes: %s", time.Since(start).Round(time.Millisecond), len(all), topology.Messages(all))
			return all
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("bootstrap: %v (phase %s)", err, p.Phase)
		}
	}
	t.Fatalf("not re-formed within 60 s; actions: %s", topology.Messages(all))
	return nil
}

// expectNoSlotWrites fails when bootstrap assigned slots or set epochs: a kept cluster's
// layout is adopted, not made anew.
func expectNoSlotWrites(t *testing.T, acts []topology.Action, fresh ...int) {
	t.Helper()
	for _, a := range acts {
		if a.Kind == topology.ActionAddSlots || a.Kind == topology.ActionSetConfigEpoch && !slices.Contains(fresh, a.Member) {
			t.Errorf("bootstrap over kept data did %s", a.Message)
		}
	}
}

// Every server stopped and started again from its dir at a new address: the bootstrap
// re-meets them and the cluster serves every key, with the same node IDs and slot layout.
func TestBootstrapReformsAClusterFromItsKeptData(t *testing.T) {
	t.Parallel()
	servers, members, f := formKept(t)
	before, err := Observe(ctxFor(t, 5*time.Second), f, members)
	if err != nil {
		t.Fatal(err)
	}
	saveAll(t, servers)
	redistest.StopAll(servers)
	for i, s := range servers {
		restartFrom(t, members, i, s.Dir)
	}
	acts := bootstrapUntilDone(t, f, members)
	expectNoSlotWrites(t, acts)
	for _, a := range acts {
		if a.Kind != topology.ActionMeet {
			t.Errorf("want only MEETs, got %s", a.Message)
		}
	}
	after, err := Observe(ctxFor(t, 5*time.Second), f, members)
	if err != nil {
		t.Fatal(err)
	}
	for i := range after.Members {
		b, a := before.Members[i].Self(), after.Members[i].Self()
		if a.ID != b.ID || a.Role() != b.Role() || !a.Slots.Equal(b.Slots) {
			t.Errorf("%s was %s %s %s, is %s %s %s", members[i].Pod, b.ID, b.Role(), b.Slots, a.ID, a.Role(), a.Slots)
		}
	}
	assertFormed(t, f, members, "")
	expectReformKeys(t, f, members, "kept", reformKeys)
}

// A replica's pod comes back empty (hostPath on another node): the rest are re-formed from
// their data, the empty node joins as a replica and the replica's earlier life is forgotten.
func TestBootstrapReformsWithAReplicaBackEmpty(t *testing.T) {
	t.Parallel()
	servers, members, f := formKept(t)
	saveAll(t, servers)
	redistest.StopAll(servers)
	for i, s := range servers {
		dir := s.Dir
		if i == 4 {
			dir = filepath.Join(t.TempDir(), "other-node")
		}
		restartFrom(t, members, i, dir)
	}
	acts := bootstrapUntilDone(t, f, members)
	// demo-4, back empty, gets an epoch above the cluster's before it is met (PlanFreshEpochs).
	expectNoSlotWrites(t, acts, 4)
	got := topology.Messages(acts)
	if !strings.Contains(got, "Made demo-4 a replica of") || !strings.Contains(got, "forget lost node") || !strings.Contains(got, "Set config epoch 7 on demo-4") {
		t.Errorf("actions: %s", got)
	}
	assertFormed(t, f, members, "")
	expectReformKeys(t, f, members, "kept", reformKeys)
}

// A pod lands on a node holding an old copy of its dir: demo-0 comes back as it was before
// its replica took its slots over (failover), still claiming them at its old config epoch.
// Redis gives the slots to the higher epoch; the bootstrap only re-meets, and every key,
// those written after the failover too, is served: the stale copy becomes a replica.
func TestBootstrapReformsOverAStaleCopy(t *testing.T) {
	t.Parallel()
	servers, members, f := formKept(t)
	saveAll(t, servers)
	stale := filepath.Join(t.TempDir(), "stale-demo-0")
	copyDir(t, servers[0].Dir, stale)

	ctx := ctxFor(t, 30*time.Second)
	st, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	oldMaster := st.Members[0].ID()
	replica := -1
	for i := range st.Members {
		if self := st.Members[i].Self(); self.Replica && self.MasterID == oldMaster {
			replica = i
		}
	}
	if replica < 0 {
		t.Fatal("demo-0 has no replica")
	}
	if err := f.For(members[replica].Addr).Failover(ctx); err != nil {
		t.Fatal(err)
	}
	waitRole(t, f, members, 0, topology.RoleSlave)
	writeReformKeys(t, f, members, "after", reformKeys)
	saveAll(t, servers)
	redistest.StopAll(servers)
	for i, s := range servers {
		dir := s.Dir
		if i == 0 {
			dir = stale
		}
		restartFrom(t, members, i, dir)
	}
	acts := bootstrapUntilDone(t, f, members)
	expectNoSlotWrites(t, acts)
	for _, a := range acts {
		if a.Kind == topology.ActionReplicate && a.Target == 0 {
			t.Errorf("made a node replicate the stale copy: %s", a.Message)
		}
	}
	// The masters are demo-1, demo-2 and demo-3 now, so not assertFormed's ordinal layout.
	st, err = Observe(ctxFor(t, 5*time.Second), f, members)
	if err != nil || !st.Formed(3, 1) {
		t.Fatalf("not formed: %v", err)
	}
	if self := st.Members[replica].Self(); !self.Master || !self.Slots.Equal(topology.SlotRanges{topology.SplitSlots(3)[0]}) {
		t.Errorf("%s, which took over from demo-0, is %s with %s; want master of 0-5460", members[replica].Pod, self.Role(), self.Slots)
	}
	waitRole(t, f, members, 0, topology.RoleSlave)
	expectReformKeys(t, f, members, "kept", reformKeys)
	expectReformKeys(t, f, members, "after", reformKeys)
}

// Data of another cluster among the kept members is still refused, naming the pod, and
// nothing is written.
func TestBootstrapOverKeptDataRefusesForeignData(t *testing.T) {
	t.Parallel()
	servers, members, _ := formKept(t)
	other := redistest.Start(t, 6, healCfg)
	otherMembers := membersOf(other)
	fo := newFactory(t, Options{})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), fo, otherMembers, 3, 1); err != nil {
		t.Fatal(err)
	}
	saveAll(t, servers)
	redistest.StopAll(servers)
	for i, s := range servers[:5] {
		restartFrom(t, members, i, s.Dir)
	}
	members[5].Addr = otherMembers[3].Addr // a replica of another cluster in demo-5's place
	counter := redistest.NewCommandCounter()
	f := newFactory(t, Options{Hooks: []goredis.Hook{counter}})
	_, err := Bootstrap(ctxFor(t, 10*time.Second), f, members, 3, 1)
	if !errors.Is(err, topology.ErrRefused) || !strings.Contains(err.Error(), "pod demo-5 knows node") {
		t.Fatalf("err = %v, want a refusal naming demo-5", err)
	}
	if w := counter.Writes(); w != 0 {
		t.Fatalf("a refused bootstrap sent %d writes: %v", w, counter.WriteNames())
	}
}

// waitRole waits until member i says it has role.
func waitRole(t *testing.T, f Factory, members []topology.Member, i int, role string) {
	t.Helper()
	ctx := ctxFor(t, 20*time.Second)
	for {
		nodes, err := f.For(members[i].Addr).ClusterNodes(ctx)
		if err == nil {
			for _, n := range nodes {
				if n.Myself && n.Role() == role {
					return
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s is not a %s: %v", members[i].Pod, role, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// copyDir copies the files of a data dir (nodes.conf, dump.rdb).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "redis.log" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
