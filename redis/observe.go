package redis

import (
	"context"
	"sync"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Observe reads CLUSTER NODES and CLUSTER INFO from every member in parallel. An unreachable
// member is recorded in its MemberState and is not an error: the caller decides what a
// missing pod means. Nodes announcing a member's external address are shown at its pod
// address (ClusterState.Internalize). Observe only reads.
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
	return st, ctx.Err()
}
