package redis

import (
	"context"
	"errors"
	"testing"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// unanswered stands for an address nothing answers at any more: a pod that stopped.
type unanswered struct{ Admin }

func (unanswered) ClusterNodes(context.Context) ([]topology.Node, error) {
	return nil, errors.New("dial tcp: connect: no route to host")
}

// withGone answers for the scripted nodes and leaves every other address unanswered.
type withGone struct{ scriptedFactory }

func (f withGone) For(addr string) Admin {
	if n, ok := f.scriptedFactory[addr]; ok {
		return n
	}
	return unanswered{}
}

// A node no pod backs that every view reads live counts toward the cluster's size only if it
// answers the operator with its own ID: a pod that just stopped leaves its node reading
// connected everywhere for seconds, and counting it read a deleted pod as a resize.
func TestObserveCountsOnlyStrangersThatAnswer(t *testing.T) {
	ctx := context.Background()
	f, members := scripted("ok")
	members = members[:2] // C is no member: a stranger to the operator, live in A's and B's views

	st, err := Observe(ctx, withGone{f}, members)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(st.LiveStrangers()); got != 1 {
		t.Fatalf("%d live strangers, want C", got)
	}
	if got := st.ReachableNodes(); got != 3 {
		t.Errorf("C answers with its ID: %d nodes, want 3", got)
	}

	delete(f, "127.0.0.1:7002")
	st, err = Observe(ctx, withGone{f}, members)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.ReachableNodes(); got != 2 {
		t.Errorf("C is gone though the views read it live: %d nodes, want 2", got)
	}

	// Another node at C's address vouches for nothing: it answers with its own ID.
	f["127.0.0.1:7002"] = &scriptedNode{addr: "127.0.0.1:7002", state: "ok", views: []string{view(idA, "4095")}}
	st, err = Observe(ctx, withGone{f}, members)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.ReachableNodes(); got != 2 {
		t.Errorf("C's address answers as another node: %d nodes, want 2", got)
	}
}
