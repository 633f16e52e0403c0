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
// address (ClusterState.Internalize), and a node no member is that reads live counts only
// if the operator can connect to it (probeStrangers). Observe only reads.
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
		st.Answered = probeStrangers(ctx, st.LiveStrangers())
	}
	return st, err
}

// strangerProbe bounds connecting to a stranger: a pod's address that is gone answers
// nothing, so the probe's only cost is this wait, and only while a stranger reads live
// (seconds after a pod stops, or a node someone else met into the cluster).
const strangerProbe = time.Second

// probeStrangers tries a TCP connection to each live stranger's client port, all at once,
// and returns those that accepted one. Nothing is sent: a node only the cluster's gossip
// vouches for (anyone who reaches the bus port can meet a node into the cluster) is never
// given the operator's credentials. A gone pod's address accepts nothing; an address reused
// by another listener would count, which costs at most a resize detour, never a key.
func probeStrangers(ctx context.Context, strangers []topology.Node) map[string]bool {
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
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(n.IP, strconv.Itoa(n.Port)))
			if err != nil {
				return
			}
			c.Close()
			mu.Lock()
			out[n.ID] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}
