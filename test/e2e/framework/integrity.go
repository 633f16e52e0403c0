package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"

	"github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Integrity checks, from every pod's own Redis, what the fault suite requires after every
// fault: all 16384 slots owned by exactly one master, no MIGRATING or IMPORTING marker
// left on a master (NoOpenSlots), and no key on a master that does not own its slot (a key there is unreachable
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
	st, err := ViewOf(ctx, addrs, password, cfg)
	if err != nil {
		return err
	}
	masters, err := slotIntegrity(st)
	if err != nil {
		return err
	}
	for _, m := range masters {
		if err := noForeignKeys(ctx, m.Addr, password, cfg, m.Self().Slots); err != nil {
			return err
		}
	}
	return nil
}

// ViewOf is the cluster as each node at addrs sees it: its CLUSTER NODES, parsed, one
// member per address.
func ViewOf(ctx context.Context, addrs []string, password string, cfg *tls.Config) (*topology.ClusterState, error) {
	st := &topology.ClusterState{}
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: password, TLSConfig: cfg})
		text, err := c.ClusterNodes(ctx).Result()
		c.Close()
		if err != nil {
			return nil, fmt.Errorf("CLUSTER NODES on %s: %w", addr, err)
		}
		nodes, err := topology.ParseClusterNodes(text)
		if err != nil {
			return nil, fmt.Errorf("CLUSTER NODES on %s: %w", addr, err)
		}
		st.Members = append(st.Members, topology.MemberState{Member: topology.Member{Pod: addr, Addr: addr}, Nodes: nodes})
	}
	return st, nil
}

// slotIntegrity checks st's own lines: no master with an open slot (NoOpenSlots), and
// every slot owned by exactly one master. It returns the masters.
func slotIntegrity(st *topology.ClusterState) ([]*topology.MemberState, error) {
	if err := NoOpenSlots(st); err != nil {
		return nil, err
	}
	owned := map[int]string{}
	var masters []*topology.MemberState
	var addrs []string
	for i := range st.Members {
		m := &st.Members[i]
		if !m.Self().Master {
			continue
		}
		masters, addrs = append(masters, m), append(addrs, m.Addr)
		for _, r := range m.Self().Slots {
			for slot := r.Start; slot <= r.End; slot++ {
				if other, ok := owned[slot]; ok {
					return nil, fmt.Errorf("slot %d is claimed by both %s and %s", slot, other, m.Addr)
				}
				owned[slot] = m.Addr
			}
		}
	}
	if len(owned) != topology.SlotCount {
		return nil, fmt.Errorf("masters %v own %d of %d slots", addrs, len(owned), topology.SlotCount)
	}
	return masters, nil
}

// NoOpenSlots is nil when no master of st has a MIGRATING or IMPORTING marker: the
// operator's own judgement (topology's NoOpenSlots). A replica's markers are not open
// slots: Valkey 8 and later copy CLUSTER SETSLOT to replicas, a copy that goes missing
// leaves a replica a stale marker that routes no client and that no one can close there.
func NoOpenSlots(st *topology.ClusterState) error {
	if st.NoOpenSlots() {
		return nil
	}
	var open []string
	for i := range st.Members {
		self := st.Members[i].Self()
		if self == nil {
			open = append(open, st.Members[i].Pod+": no line of its own in CLUSTER NODES")
		} else if self.Master && (len(self.Migrating) > 0 || len(self.Importing) > 0) {
			open = append(open, fmt.Sprintf("master %s: migrating %v, importing %v", st.Members[i].Pod, self.Migrating, self.Importing))
		}
	}
	return fmt.Errorf("open slots: %s", strings.Join(open, "; "))
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
