package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// membersOf names the servers like pods of a StatefulSet "demo", spread over three
// Kubernetes nodes so anti-affinity is exercised.
func membersOf(servers []*redistest.Server) []topology.Member {
	out := make([]topology.Member, len(servers))
	for i, s := range servers {
		out[i] = topology.Member{Pod: fmt.Sprintf("demo-%d", i), Addr: s.Addr, K8sNode: fmt.Sprintf("node-%d", i%3)}
	}
	return out
}

// formMasters starts n servers formed into n masters (healCfg), and returns a factory for
// them, their members and the state they report.
func formMasters(t *testing.T, n int) (Factory, []topology.Member, *topology.ClusterState) {
	servers := redistest.Start(t, n, healCfg)
	members := membersOf(servers)
	f := newFactory(t, Options{})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, n, 0); err != nil {
		t.Fatal(err)
	}
	st, err := Observe(ctxFor(t, time.Minute), f, members)
	if err != nil {
		t.Fatal(err)
	}
	return f, members, st
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newFactory(t *testing.T, opts Options) Factory {
	f := NewFactory(opts)
	t.Cleanup(func() { f.Close() })
	return f
}

// assertFormed checks every guard and the redis-cli slot layout, then round-trips a key
// through a cluster client.
func assertFormed(t *testing.T, f Factory, members []topology.Member, password string) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	st, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	guards := map[string]bool{
		"AllMet": st.AllMet(), "AllSlotsCovered": st.AllSlotsCovered(), "MastersHaveReplicas": st.MastersHaveReplicas(1),
		"ClusterOK": st.ClusterOK(), "Agreed": st.Agreed(), "NoOpenSlots": st.NoOpenSlots(), "Formed": st.Formed(3, 1),
	}
	for name, ok := range guards {
		if !ok {
			t.Errorf("guard %s is false", name)
		}
	}
	var slots []string
	byID := map[string]topology.MemberFacts{}
	for _, fa := range st.Facts() {
		byID[fa.NodeID] = fa
	}
	for _, fa := range st.Facts() {
		if fa.Role == topology.RoleMaster {
			slots = append(slots, fa.Slots.String())
			continue
		}
		master := byID[fa.MasterNodeID]
		if master.Role != topology.RoleMaster {
			t.Errorf("%s replicates %q, not a master", fa.Pod, fa.MasterNodeID)
		}
		if memberNode(members, fa.Pod) == memberNode(members, master.Pod) {
			t.Errorf("%s is on the same Kubernetes node as its master %s", fa.Pod, master.Pod)
		}
	}
	sort.Slice(slots, func(i, j int) bool {
		return len(slots[i]) < len(slots[j]) || len(slots[i]) == len(slots[j]) && slots[i] < slots[j]
	})
	if got := strings.Join(slots, " "); got != "0-5460 5461-10922 10923-16383" {
		t.Errorf("master slots = %q", got)
	}
	addrs := []string{members[5].Addr}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, Password: password,
		ClusterSlots: func(ctx context.Context) ([]goredis.ClusterSlot, error) { return ClusterSlots(ctx, f, addrs) }})
	defer cc.Close()
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("key-%d", i)
		if err := cc.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		if v, err := cc.Get(ctx, key).Int(); err != nil || v != i {
			t.Fatalf("GET %s = %v, %v", key, v, err)
		}
	}
}

func memberNode(members []topology.Member, pod string) string {
	for _, m := range members {
		if m.Pod == pod {
			return m.K8sNode
		}
	}
	return ""
}

func TestBootstrapFormsClusterAndIsIdempotent(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 6, redistest.Config{})
	members := membersOf(servers)
	counter := redistest.NewCommandCounter()
	f := newFactory(t, Options{Hooks: []goredis.Hook{counter}})

	start := time.Now()
	p, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("formed in %v with %d writes: %v", time.Since(start), counter.Writes(), counter.WriteNames())
	if !p.Done || p.Phase != topology.PhaseFormed || strings.Join(p.Masters, ",") != "demo-0,demo-1,demo-2" {
		t.Fatalf("progress = %+v", p)
	}
	var msgs []string
	for _, a := range p.Actions {
		msgs = append(msgs, a.Message)
	}
	if !contains(msgs, "Assigned slots 0-5460 to demo-0") || !contains(msgs, "Assigned slots 10923-16383 to demo-2") {
		t.Errorf("actions lack slot messages: %v", msgs)
	}
	assertFormed(t, f, members, "")

	counter.Reset()
	for _, run := range []func() (Progress, error){
		func() (Progress, error) { return Bootstrap(ctxFor(t, 10*time.Second), f, members, 3, 1) },
		func() (Progress, error) { return BootstrapStep(ctxFor(t, 10*time.Second), f, members, 3, 1) },
	} {
		p, err := run()
		if err != nil || !p.Done || len(p.Actions) != 0 {
			t.Fatalf("re-run: %+v, %v", p, err)
		}
	}
	if w := counter.Writes(); w != 0 {
		t.Fatalf("re-run on a formed cluster sent %d writes: %v", w, counter.WriteNames())
	}
	if n := counter.Count("cluster nodes"); n != 12 {
		t.Errorf("two re-runs read CLUSTER NODES %d times, want 12 (one per member each)", n)
	}
}

func TestBootstrapWithPassword(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 6, redistest.Config{Password: "s3cret"})
	members := membersOf(servers)
	if _, err := Bootstrap(ctxFor(t, time.Second), newFactory(t, Options{}), members, 3, 1); err == nil {
		t.Fatal("bootstrap without the password succeeded")
	}
	f := newFactory(t, Options{Password: "s3cret"})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 3, 1); err != nil {
		t.Fatal(err)
	}
	assertFormed(t, f, members, "s3cret")
}

// TestBootstrapResumesAfterCrash stops bootstrap after each kind of step, as an operator
// killed there would, and shows a fresh run finishes the cluster.
func TestBootstrapResumesAfterCrash(t *testing.T) {
	t.Parallel()
	stops := map[string]func(p topology.Plan) bool{
		// Crash after half the slot assignments: only some masters hold slots.
		"half the slots": func(p topology.Plan) bool { return p.Phase == topology.PhaseAssigning },
		// Crash after the first round of meets.
		"after meets": func(p topology.Plan) bool { return p.Phase == topology.PhaseMeeting },
	}
	for name, stopAt := range stops {
		t.Run(name, func(t *testing.T) {
			servers := redistest.Start(t, 6, redistest.Config{})
			members := membersOf(servers)
			f := newFactory(t, Options{})
			ctx := ctxFor(t, 30*time.Second)
			// Drive the planner by hand and run only part of the matching plan.
			for {
				st, err := Observe(ctx, f, members)
				if err != nil {
					t.Fatal(err)
				}
				for i := range st.Members {
					st.Members[i].KeysKnown = true
				}
				plan := topology.PlanBootstrap(st, 3, 1)
				if plan.Done {
					t.Fatal("formed before the crash point")
				}
				b := newExecutor(f)
				if stopAt(plan) {
					if err := b.execute(ctx, st, halfOfLastKind(plan.Actions)); err != nil {
						t.Fatal(err)
					}
					break
				}
				if err := b.execute(ctx, st, plan.Actions); err != nil {
					t.Fatal(err)
				}
				time.Sleep(PollInterval)
			}
			if _, err := Bootstrap(ctx, f, members, 3, 1); err != nil {
				t.Fatal(err)
			}
			assertFormed(t, f, members, "")
		})
	}
}

func TestBootstrapRefusesNodeWithData(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 6, redistest.Config{})
	members := membersOf(servers)
	// Put a key on a node that bootstrap would claim: a lone cluster node takes writes only
	// for its own slots and, without full coverage required, so lend it the key's slot.
	c := goredis.NewClient(&goredis.Options{Addr: members[4].Addr})
	defer c.Close()
	ctx := ctxFor(t, 30*time.Second)
	slot, err := c.ClusterKeySlot(ctx, "foo").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "cluster-require-full-coverage", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "cluster", "addslots", slot).Err(); err != nil {
		t.Fatal(err)
	}
	// A node that just started keeps cluster_state fail for two seconds; retry until then.
	for err := c.Set(ctx, "foo", "bar", 0).Err(); err != nil; err = c.Set(ctx, "foo", "bar", 0).Err() {
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := c.Do(ctx, "cluster", "delslots", slot).Err(); err != nil {
		t.Fatal(err)
	}
	counter := redistest.NewCommandCounter()
	f := newFactory(t, Options{Hooks: []goredis.Hook{counter}})
	_, err = Bootstrap(ctx, f, members, 3, 1)
	if !errors.Is(err, topology.ErrRefused) || !strings.HasPrefix(err.Error(), "bootstrap refused: ") || !strings.Contains(err.Error(), "demo-4") {
		t.Fatalf("err = %v, want a refusal naming demo-4", err)
	}
	if w := counter.Writes(); w != 0 {
		t.Fatalf("a refused bootstrap sent %d writes: %v", w, counter.WriteNames())
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// halfOfLastKind keeps every action but only half of those of the last kind in the plan
// (half the ADDSLOTS after all epochs, or half the MEETs): a crash in the middle of a step.
func halfOfLastKind(acts []topology.Action) []topology.Action {
	last := acts[len(acts)-1].Kind
	var out, tail []topology.Action
	for _, a := range acts {
		if a.Kind == last {
			tail = append(tail, a)
		} else {
			out = append(out, a)
		}
	}
	return append(out, tail[:(len(tail)+1)/2]...)
}
