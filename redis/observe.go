package redis

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Observe reads CLUSTER NODES and CLUSTER INFO from every member in parallel. An unreachable
// member is recorded in its MemberState and is not an error: the caller decides what a
// missing pod means. Nodes announcing a member's external address are shown at its pod
// address (ClusterState.Internalize), and a node no member is that reads live is asked for
// its ID directly (probeStrangers). Observe only reads.
func Observe(ctx context.Context, f Factory, members []topology.Member) (*topology.ClusterState, error) {
	st := &topology.ClusterState{Members: make([]topology.MemberState, len(members))}
	var wg sync.WaitGroup
	for i, m := range members {
		st.Members[i].Member = m
		wg.Add(1)
		go func(ms *topology.MemberState) {
			defer wg.Done()
			a := f.For(ms.Addr)
			if ms.Nodes, ms.Err = a.ClusterNodes(ctx); ms.Err != nil {
				return
			}
			ms.Info, ms.Err = a.ClusterInfo(ctx)
		}(&st.Members[i])
	}
	wg.Wait()
	st.Internalize(topology.Aliases(members))
	// The members' reads decide whether the observation is whole; the probe after them
	// only adds what strangers answer, so its own deadline does not spoil it.
	err := ctx.Err()
	if err == nil {
		st.Answered = probeStrangers(ctx, f, st.LiveStrangers())
	}
	return st, err
}

// strangerProbe bounds asking a stranger for its node ID: a pod's address that is gone
// answers nothing, so the probe's only cost is this wait, and only while a stranger reads
// live (seconds after a pod stops, or a node someone else met into the cluster).
const strangerProbe = time.Second

// probeStrangers asks each live stranger its own CLUSTER NODES, all at once, and returns
// those that answered with the ID the cluster knows them by (an address reused by another
// node does not vouch for the old one).
func probeStrangers(ctx context.Context, f Factory, strangers []topology.Node) map[string]bool {
	out := map[string]bool{}
	if len(strangers) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, strangerProbe)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range strangers {
		if n.IP == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes, err := f.For(net.JoinHostPort(n.IP, strconv.Itoa(n.Port))).ClusterNodes(ctx)
			if err != nil {
				return
			}
			for _, own := range nodes {
				if own.Myself && own.ID == n.ID {
					mu.Lock()
					out[n.ID] = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return out
}
