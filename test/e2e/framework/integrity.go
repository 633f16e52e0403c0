package framework

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Integrity checks, from every pod's own Redis, what the fault suite requires after every
// fault: all 16384 slots owned by exactly one master, no MIGRATING or IMPORTING marker
// left, and no key on a master that does not own its slot (a key there is unreachable
// for clients and would be lost by the next SETSLOT or resync).
func (s *Stack) Integrity(ctx context.Context, ns, name, password string) error {
	return s.IntegrityTLS(ctx, ns, name, password, nil)
}

// IntegrityTLS is Integrity dialing every pod with cfg (a cluster with spec.tls). A
// password "" is the cluster's own (Password).
func (s *Stack) IntegrityTLS(ctx context.Context, ns, name, password string, cfg *tls.Config) error {
	sel := "app.kubernetes.io/instance=" + name + ",app.kubernetes.io/name=redis-cluster"
	addrs, err := s.PodAddrs(ctx, ns, sel)
	if err != nil {
		return err
	}
	if password, err = s.passwordOf(ctx, ns, sel, password); err != nil {
		return err
	}
	return IntegrityOf(ctx, addrs, password, cfg)
}

// IntegrityOf is Integrity for the Redis nodes at addrs (ip:port), wherever they run,
// dialed with cfg when it is not nil.
func IntegrityOf(ctx context.Context, addrs []string, password string, cfg *tls.Config) error {
	owned := map[int]string{}
	var masters []string
	mine := map[string]topology.SlotRanges{}
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: password, TLSConfig: cfg})
		text, err := c.ClusterNodes(ctx).Result()
		c.Close()
		if err != nil {
			return fmt.Errorf("CLUSTER NODES on %s: %w", addr, err)
		}
		nodes, err := topology.ParseClusterNodes(text)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if !n.Myself {
				continue
			}
			if len(n.Migrating) > 0 || len(n.Importing) > 0 {
				return fmt.Errorf("%s has open slots: migrating %v, importing %v", addr, n.Migrating, n.Importing)
			}
			if !n.Master {
				continue
			}
			masters = append(masters, addr)
			mine[addr] = n.Slots
			for _, r := range n.Slots {
				for slot := r.Start; slot <= r.End; slot++ {
					if other, ok := owned[slot]; ok {
						return fmt.Errorf("slot %d is claimed by both %s and %s", slot, other, addr)
					}
					owned[slot] = addr
				}
			}
		}
	}
	if len(owned) != topology.SlotCount {
		return fmt.Errorf("masters %v own %d of %d slots", masters, len(owned), topology.SlotCount)
	}
	for _, addr := range masters {
		if err := noForeignKeys(ctx, addr, password, cfg, mine[addr]); err != nil {
			return err
		}
	}
	return nil
}

// noForeignKeys counts, pipelined, the keys master addr holds in every slot it does not own.
func noForeignKeys(ctx context.Context, addr, password string, cfg *tls.Config, own topology.SlotRanges) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, TLSConfig: cfg})
	defer c.Close()
	foreign := topology.AllSlots().Subtract(own)
	var slots []int
	for _, r := range foreign {
		for slot := r.Start; slot <= r.End; slot++ {
			slots = append(slots, slot)
		}
	}
	for start := 0; start < len(slots); start += 2000 {
		end := min(start+2000, len(slots))
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, slot := range slots[start:end] {
				p.ClusterCountKeysInSlot(ctx, slot)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("CLUSTER COUNTKEYSINSLOT on %s: %w", addr, err)
		}
		for i, cmd := range cmds {
			if n := cmd.(*redis.IntCmd).Val(); n > 0 {
				return fmt.Errorf("master %s holds %d keys in slot %d, which it does not own", addr, n, slots[start+i])
			}
		}
	}
	return nil
}
