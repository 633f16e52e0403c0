package redis

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// scriptedNode answers CLUSTER NODES with the next of its views, the last one for ever
// after, CLUSTER INFO with state and INFO server with Redis 7.0. Only what Observe reads is answered: the embedded
// Admin is nil, so anything else would panic the test.
type scriptedNode struct {
	Admin
	addr  string
	state string
	mu    sync.Mutex
	views []string
	calls int
}

func (n *scriptedNode) Addr() string { return n.addr }

func (n *scriptedNode) ClusterNodes(context.Context) ([]topology.Node, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v := n.views[min(n.calls, len(n.views)-1)]
	n.calls++
	return topology.ParseClusterNodes(v)
}

func (n *scriptedNode) ClusterInfo(context.Context) (topology.ClusterInfo, error) {
	return topology.ParseClusterInfo("cluster_state:" + n.state + "\n")
}

func (n *scriptedNode) Server(context.Context) (topology.Server, error) {
	return topology.Server{Name: topology.ServerRedis, Version: "7.0.15"}, nil
}

type scriptedFactory map[string]*scriptedNode

func (f scriptedFactory) For(addr string) Admin { return f[addr] }
func (scriptedFactory) Retain([]string)         {}
func (scriptedFactory) Close() error            { return nil }
func (scriptedFactory) backoff() *stuckKeys     { return &scriptedStuck }

// scriptedStuck is the stuck keys of every scriptedFactory.
var scriptedStuck stuckKeys

const (
	idA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	idB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	idC = "cccccccccccccccccccccccccccccccccccccccc"
)

// view is CLUSTER NODES of a master A, a master B and B's replica C, as seen by self, with
// A owning slots 0..aLast and B the rest. An aLast ending in "+" also has self see C as a
// master: C was just made a replica and self has not heard it yet.
func view(self, aLast string) string {
	cRole, cMaster := "slave", idB
	if last, ok := strings.CutSuffix(aLast, "+"); ok {
		aLast, cRole, cMaster = last, "master", "-"
	}
	flag := func(id, role string) string {
		if id == self {
			return "myself," + role
		}
		return role
	}
	next := map[string]string{"4095": "4096", "8191": "8192"}[aLast]
	return idA + " 127.0.0.1:7000@17000 " + flag(idA, "master") + " - 0 0 1 connected 0-" + aLast + "\n" +
		idB + " 127.0.0.1:7001@17001 " + flag(idB, "master") + " - 0 0 2 connected " + next + "-16383\n" +
		idC + " 127.0.0.1:7002@17002 " + flag(idC, cRole) + " " + cMaster + " 0 0 2 connected\n"
}

func scripted(state string, lagging ...string) (scriptedFactory, []topology.Member) {
	f := scriptedFactory{}
	var members []topology.Member
	for i, id := range []string{idA, idB, idC} {
		addr := []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"}[i]
		// Slots 4096..8191 moved from A to B; a member given its lagging views sees them first.
		views := []string{view(id, "4095")}
		if i < len(lagging) && lagging[i] != "" {
			views = []string{view(id, lagging[i]), view(id, "4095")}
		}
		f[addr] = &scriptedNode{addr: addr, state: state, views: views}
		members = append(members, topology.Member{Pod: []string{"a", "b", "c"}[i], Addr: addr})
	}
	return f, members
}

// A replica that has not yet read the new owner's PONG agrees a poll later: the step goes
// on from the settled views, with nobody made to re-announce itself.
func TestAwaitAgreementSettlesGossipInFlight(t *testing.T) {
	ctx := context.Background()
	f, members := scripted("ok", "", "", "8191") // C still sees A owning 0-8191
	st, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	if st.Agreed() || len(topology.PlanReannounce(st, nil)) == 0 {
		t.Fatal("the first views should disagree and call for re-announcing")
	}
	st, err = awaitAgreement(ctx, f, members, st)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Agreed() {
		t.Fatal("views that settle a poll later are not seen agreeing")
	}
	if got := f["127.0.0.1:7002"].calls; got != 2 {
		t.Errorf("the lagging member was observed %d times, want 2", got)
	}
}

// Views that stay apart are handed back after the grace, for PlanReannounce; views that
// agree, or members that are not ok (a new master's first seconds), are not waited on.
func TestAwaitAgreementGivesUpAfterGrace(t *testing.T) {
	ctx := context.Background()
	f, members := scripted("ok", "", "", "8191")
	f["127.0.0.1:7002"].views = f["127.0.0.1:7002"].views[:1] // C never catches up
	st, _ := Observe(ctx, f, members)
	began := time.Now()
	st, err := awaitAgreement(ctx, f, members, st)
	took := time.Since(began)
	if err != nil || st.Agreed() {
		t.Fatalf("agreed %v, err %v: want views still apart and no error", st.Agreed(), err)
	}
	if took < agreementGrace {
		t.Errorf("gave up after %v, before the grace of %v", took, agreementGrace)
	}
	if polls := f["127.0.0.1:7002"].calls - 1; polls > int(agreementGrace/agreementPoll)+1 {
		t.Errorf("%d polls in the grace, want at most one every %v", polls, agreementPoll)
	}

	for _, c := range []struct{ name, state, lagA, lagC string }{
		{"agreed", "ok", "", ""},
		{"not ok", "fail", "", "8191"},
		// A has not heard that C is a replica: its pings would tell A seconds later.
		{"a role unknown", "ok", "4095+", "8191"},
	} {
		f, members := scripted(c.state, c.lagA, "", c.lagC)
		st, _ := Observe(ctx, f, members)
		if _, err := awaitAgreement(ctx, f, members, st); err != nil {
			t.Fatal(err)
		}
		if got := f["127.0.0.1:7002"].calls; got != 1 {
			t.Errorf("%s: observed again %d times, want none", c.name, got-1)
		}
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	f, members = scripted("ok", "", "", "8191")
	st, _ = Observe(ctx, f, members)
	if _, err := awaitAgreement(cancelled, f, members, st); err == nil {
		t.Error("a cancelled step should end the wait with its error")
	}
}
