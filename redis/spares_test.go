package redis

import (
	"strings"
	"testing"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// spareImages are the servers the spare-replica tests run on: the default, and the one
// whose SETSLOT replication moves a new master's replica away (docs/servers.md).
var spareImages = []redistest.Image{{Name: "redis 7.0"}, {Name: "valkey 9.1", Archive: "valkey-9.1"}}

// formOn starts six servers of img, forms 3 masters with a replica each and loads n keys.
func formOn(t *testing.T, img redistest.Image, n int) (Factory, []topology.Member, []string) {
	t.Helper()
	cfg := healCfg
	cfg.Binary = redistest.ServerBinary(t, img)
	members := membersOf(redistest.Start(t, 6, cfg))
	f := newFactory(t, Options{})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 3, 1); err != nil {
		t.Fatal(err)
	}
	keys := numberedKeys("spare", n)
	putKeysTLS(t, f, members, keys, nil)
	return f, members, keys
}

// onSpareImages runs fn, in parallel, on a cluster formOn forms with nkeys keys on each
// of spareImages, with the state it reports once formed.
func onSpareImages(t *testing.T, nkeys int, fn func(*testing.T, redistest.Image, Factory, []topology.Member, []string, *topology.ClusterState)) {
	t.Parallel()
	for _, img := range spareImages {
		t.Run(img.Name, func(t *testing.T) {
			t.Parallel()
			f, members, keys := formOn(t, img, nkeys)
			st, err := Observe(ctxFor(t, 10*time.Second), f, members)
			if err != nil {
				t.Fatal(err)
			}
			fn(t, img, f, members, keys, st)
		})
	}
}

// replicaOf is the first member replicating master i, or -1.
func replicaOf(st *topology.ClusterState, i int) int {
	for j := range st.Members {
		if self := st.Members[j].Self(); self.Replica && self.MasterID == st.Members[i].ID() {
			return j
		}
	}
	return -1
}

// A replica the server moved to another master (as Valkey does to a scale-out's new master's
// replica when SETSLOT NODE reaches it first) leaves its master without one and the other
// with one to spare. Healing moves a replica back, and the moved replica holds its new
// master's keys. Before healing planned spare replicas, it made nothing here and the
// cluster stayed unformed (AwaitingReplicasAttached) for ever.
func TestHealMovesASpareReplicaBack(t *testing.T) {
	onSpareImages(t, 100_000, func(t *testing.T, _ redistest.Image, f Factory, members []topology.Member, keys []string, st *topology.ClusterState) {
		ctx := ctxFor(t, time.Minute)
		moved := replicaOf(st, 2)
		if err := f.For(members[moved].Addr).Replicate(ctx, st.Members[0].ID()); err != nil {
			t.Fatal(err)
		}
		acts := healUntilFormed(t, f, members)
		want := "a replica of demo-2, which has fewer than 1 replicas (from demo-0, which keeps 1)"
		if got := topology.Messages(acts); !strings.Contains(got, want) {
			t.Fatalf("healing made %q; want a spare of demo-0 moved to demo-2", got)
		}
		st, err := Observe(ctx, f, members)
		if err != nil {
			t.Fatal(err)
		}
		if !st.MastersHaveReplicas(1) || st.Masters() != 3 {
			t.Fatalf("not one replica per master after healing")
		}
		back := replicaOf(st, 2)
		waitInSync(t, f, members[back].Addr)
		mine, _ := f.For(members[2].Addr).DBSize(ctx)
		theirs, _ := f.For(members[back].Addr).DBSize(ctx)
		if mine == 0 || mine != theirs {
			t.Fatalf("%s holds %d keys, its master demo-2 %d", members[back].Pod, theirs, mine)
		}
		if lost := lostKeysTLS(t, f, members, keys, nil); lost > 0 {
			t.Fatalf("%d of %d keys lost", lost, len(keys))
		}
	})
}

// waitInSync waits until the replica at addr is in sync with its master.
func waitInSync(t *testing.T, f Factory, addr string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	for {
		r, err := f.For(addr).Replication(ctx)
		if err == nil && r.InSync() {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s not in sync within 30 s: %+v, %v", addr, r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A resize step turns replica migration off on the replicas of the masters receiving
// slots where the server replicates SETSLOT (Valkey), and only there; the restore of a
// Running cluster sets redis.conf's value back.
func TestKeepReceiversReplicasHome(t *testing.T) {
	onSpareImages(t, 0, func(t *testing.T, img redistest.Image, f Factory, members []topology.Member, _ []string, st *topology.ClusterState) {
		ctx := ctxFor(t, 30*time.Second)
		moves := []topology.SlotMove{{Slot: 16383, From: st.Members[2].ID(), To: st.Members[0].ID()}}
		keepReceiversReplicasHome(ctx, f, st, membersServers(ctx, f, st), len(members), moves)
		home := replicaOf(st, 0)
		for i, m := range members {
			v, err := f.For(m.Addr).ConfigGet(ctx, ReplicaMigration)
			if err != nil {
				t.Fatal(err)
			}
			want := "yes"
			if i == home && strings.HasPrefix(img.Name, "valkey") {
				want = "no"
			}
			if v != want {
				t.Errorf("%s (%s): %s %s, want %s", m.Pod, img.Name, ReplicaMigration, v, want)
			}
		}
		n, err := RestoreReplicaMigration(ctx, f, addrsOf(members), "yes")
		if err != nil || n != len(topology.ReplicasOf(st, 0, nil))+boolInt(strings.HasPrefix(img.Name, "valkey")) {
			t.Errorf("restored %d, %v", n, err)
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
