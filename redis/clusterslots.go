package redis

import (
	"context"
	"fmt"
	"sort"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// ClusterSlots builds go-redis' slot table from CLUSTER NODES of the first address that
// answers. go-redis v8 cannot parse Redis 7's CLUSTER SLOTS (a fourth element per node),
// so a ClusterClient for Redis 7 needs this as ClusterOptions.ClusterSlots:
//
//	ClusterSlots: func(ctx context.Context) ([]goredis.ClusterSlot, error) {
//		return redis.ClusterSlots(ctx, factory, addrs)
//	}
func ClusterSlots(ctx context.Context, f Factory, addrs []string) ([]goredis.ClusterSlot, error) {
	var lastErr error
	for _, addr := range addrs {
		nodes, err := f.For(addr).ClusterNodes(ctx)
		if err != nil {
			lastErr = err
			continue
		}
		return SlotTable(nodes), nil
	}
	return nil, fmt.Errorf("failed to read the slot table from any of %v: %w", addrs, lastErr)
}

// SlotTable lists, per slot range of each master, the master then its replicas, from
// CLUSTER NODES (the addresses the nodes announce).
func SlotTable(nodes []topology.Node) []goredis.ClusterSlot {
	replicas := map[string][]goredis.ClusterNode{}
	for _, n := range nodes {
		if n.Replica && !n.Fail {
			replicas[n.MasterID] = append(replicas[n.MasterID], goredis.ClusterNode{ID: n.ID, Addr: n.Addr()})
		}
	}
	var out []goredis.ClusterSlot
	for _, n := range nodes {
		if !n.Master || n.Fail {
			continue
		}
		for _, r := range n.Slots {
			entry := goredis.ClusterSlot{Start: r.Start, End: r.End,
				Nodes: append([]goredis.ClusterNode{{ID: n.ID, Addr: n.Addr()}}, replicas[n.ID]...)}
			out = append(out, entry)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}
