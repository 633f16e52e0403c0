package redis

import (
	"context"
	"fmt"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

func (a *admin) Replication(ctx context.Context) (topology.Replication, error) {
	text, err := a.c.Info(ctx, "replication").Result()
	if err != nil {
		return topology.Replication{}, fmt.Errorf("failed to read INFO replication from %s: %w", a.addr, err)
	}
	return topology.ParseReplication(text)
}

func (a *admin) Failover(ctx context.Context) error {
	if err := a.c.ClusterFailover(ctx).Err(); err != nil {
		return fmt.Errorf("failed to make %s fail over its master: %w", a.addr, err)
	}
	return nil
}
