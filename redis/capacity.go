package redis

import (
	"context"
	"fmt"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Memory reads INFO memory.
func (a *admin) Memory(ctx context.Context) (topology.Memory, error) {
	text, err := a.c.Info(ctx, "memory").Result()
	if err != nil {
		return topology.Memory{}, fmt.Errorf("failed to read INFO memory from %s: %w", a.addr, err)
	}
	return topology.ParseMemory(text)
}

// checkCapacity refuses the moves when a master receiving slots would pass its maxmemory
// less CapacityHeadroom, so no move is ever the one that makes a master evict keys (or,
// under noeviction, fail the MIGRATE half way). Each master's use after the moves is
// projected from its used_memory plus, per slot received, the dataset per slot of the
// giver, less the same for each slot it gives. Masters with maxmemory 0 are unlimited.
// It reads INFO memory of every master holding slots, and returns it by node ID (the
// moves' sources size their groups from it); nothing is written.
func checkCapacity(ctx context.Context, f Factory, st *topology.ClusterState, moves []topology.SlotMove) (map[string]topology.Memory, error) {
	var masters []int
	for i := range st.Members {
		if self := st.Members[i].Self(); self.Master && len(self.Slots) > 0 || topology.Receives(moves, st.Members[i].ID()) {
			masters = append(masters, i)
		}
	}
	mem := make(map[string]topology.Memory, len(masters))
	read := make([]topology.Memory, len(st.Members))
	err := parallel(masters, func(i int) error {
		m, err := f.For(st.Members[i].Addr).Memory(ctx)
		read[i] = m
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to check capacity before moving slots: %w", err)
	}
	for _, i := range masters {
		mem[st.Members[i].ID()] = read[i]
	}
	return mem, topology.ProjectCapacity(st, masters, mem, moves)
}
