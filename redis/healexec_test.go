package redis

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// healCfg lowers cluster-node-timeout so a lost node is flagged fail within a second or two.
var healCfg = redistest.Config{NodeTimeout: time.Second}

// formForHealing starts six servers, forms the cluster and writes n keys through a
// cluster client.
func formForHealing(t *testing.T, n int) ([]*redistest.Server, []topology.Member, Factory) {
	t.Helper()
	servers := redistest.Start(t, 6, healCfg)
	members := membersOf(servers)
	f := newFactory(t, Options{})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 3, 1); err != nil {
		t.Fatal(err)
	}
	withCluster(t, f, members, func(ctx context.Context, cc *goredis.ClusterClient) {
		for i := 0; i < n; i++ {
			if err := cc.Set(ctx, fmt.Sprintf("heal-%d", i), i, 0).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
		}
	})
	return servers, members, f
}

func withCluster(t *testing.T, f Factory, members []topology.Member, fn func(context.Context, *goredis.ClusterClient)) {
	t.Helper()
	var addrs []string
	for _, m := range members {
		addrs = append(addrs, m.Addr)
	}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs,
		ClusterSlots: func(ctx context.Context) ([]goredis.ClusterSlot, error) { return ClusterSlots(ctx, f, addrs) }})
	defer cc.Close()
	fn(ctxFor(t, 10*time.Second), cc)
}

// healUntilFormed calls Heal as the controller would, each call one step, until the
// cluster is formed again, and returns every action made.
func healUntilFormed(t *testing.T, f Factory, members []topology.Member) []topology.Action {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	start := time.Now()
	var all []topology.Action
	for {
		p, err := Heal(ctx, f, members, 3, 1)
		all = append(all, p.Actions...)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("heal: %v", err)
		}
		if p.Done {
			t.Logf("formed again in %v after %d writes", time.Since(start).Round(time.Millisecond), len(all))
			return all
		}
		if ctx.Err() != nil {
			t.Fatalf("not formed within 30 s; last phase %s; actions so far: %s", p.Phase, topology.Messages(all))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func assertKeys(t *testing.T, f Factory, members []topology.Member, n int) {
	t.Helper()
	withCluster(t, f, members, func(ctx context.Context, cc *goredis.ClusterClient) {
		for i := 0; i < n; i++ {
			if v, err := cc.Get(ctx, fmt.Sprintf("heal-%d", i)).Int(); err != nil || v != i {
				t.Fatalf("GET heal-%d = %v, %v", i, v, err)
			}
		}
	})
}

func TestHealIsWriteFreeOnAHealthyCluster(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 6, healCfg)
	members := membersOf(servers)
	counter := redistest.NewCommandCounter()
	f := newFactory(t, Options{Hooks: []goredis.Hook{counter}})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 3, 1); err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	p, err := Heal(ctxFor(t, 10*time.Second), f, members, 3, 1)
	if err != nil || !p.Done || len(p.Actions) != 0 {
		t.Fatalf("heal of a healthy cluster: %+v, %v", p, err)
	}
	if w := counter.Writes(); w != 0 {
		t.Fatalf("heal of a healthy cluster sent %d writes: %v", w, counter.WriteNames())
	}
}

// A replica's pod comes back empty (an emptyDir): the old node is forgotten once flagged
// fail, the new one is met and made a replica of the master that lacks one.
func TestHealReplacesALostReplica(t *testing.T) {
	t.Parallel()
	servers, members, f := formForHealing(t, 100)
	servers[4].Stop()
	fresh, err := redistest.StartIn(filepath.Join(t.TempDir(), "fresh"), healCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fresh.Stop)
	members[4].Addr = fresh.Addr
	acts := healUntilFormed(t, f, members)
	got := topology.Messages(acts)
	if !strings.Contains(got, "Made demo-4 a replica of") || !strings.Contains(got, "forget lost node") {
		t.Errorf("actions: %s", got)
	}
	assertFormed(t, f, members, "")
	st, err := Observe(ctxFor(t, 5*time.Second), f, members)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if len(m.Nodes) != 6 {
			t.Errorf("%s knows %d nodes, want 6", m.Pod, len(m.Nodes))
		}
	}
	assertKeys(t, f, members, 100)
}

// Every pod comes back at once with a new address and its data: every nodes.conf points at
// dead addresses, and only the operator's MEETs reconnect the nodes.
func TestHealReconnectsAllNodesBackAtNewAddresses(t *testing.T) {
	t.Parallel()
	servers, members, f := formForHealing(t, 100)
	ctx := ctxFor(t, 10*time.Second)
	for _, s := range servers {
		if err := saveNow(ctx, s.Addr); err != nil {
			t.Fatal(err)
		}
	}
	redistest.StopAll(servers)
	for i, s := range servers {
		back, err := redistest.StartIn(s.Dir, healCfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(back.Stop)
		members[i].Addr = back.Addr
	}
	acts := healUntilFormed(t, f, members)
	if !strings.Contains(topology.Messages(acts), "meet") {
		t.Errorf("actions: %s", topology.Messages(acts))
	}
	assertKeys(t, f, members, 100)
	assertFormed(t, f, members, "")
}

// saveNow runs SAVE, waiting out a background save already running (a replica's full
// sync starts one), which makes SAVE fail with an error.
func saveNow(ctx context.Context, addr string) error {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	for {
		err := c.Save(ctx).Err()
		if err == nil || !strings.Contains(err.Error(), "Background save already in progress") {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("failed to SAVE on %s: %w (%w)", addr, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
