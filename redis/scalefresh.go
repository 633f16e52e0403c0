package redis

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Before a new master receives slots: the kept masters holding none are checked empty,
// and the fresh masters get their replicas, in sync.

// PhaseSyncingReplicas: a new master waits for its replicas' initial sync before it
// receives slots.
const PhaseSyncingReplicas = "WaitingForReplicaSync"

// KeysError refuses a node that holds keys but no slots: giving it slots would serve
// those keys as if they belonged there, and making it a replica would drop them.
type KeysError struct {
	Pod, Addr string
	Keys      int64
}

func (e *KeysError) Error() string {
	return fmt.Sprintf("pod %s (%s) holds %d keys but no slots; refusing to give it slots or make it a replica (empty it, or delete its data, first)",
		e.Pod, e.Addr, e.Keys)
}

// checkNoKeys reads DBSIZE of the kept masters holding no slot, as bootstrap does before
// claiming a node. The error wraps ErrRefused and names the first one holding keys.
func checkNoKeys(ctx context.Context, f Factory, st *topology.ClusterState, empty []int) error {
	if len(empty) == 0 {
		return nil
	}
	if err := newExecutor(f).readKeys(ctx, st, empty); err != nil {
		return fmt.Errorf("failed to count keys of empty masters: %w", err)
	}
	for _, i := range empty {
		if m := &st.Members[i]; m.Keys > 0 {
			return fmt.Errorf("%w: %w", topology.ErrRefused, &KeysError{Pod: m.Pod, Addr: m.Addr, Keys: m.Keys})
		}
	}
	return nil
}

// attachFresh makes the members AssignReplicas places on a fresh master (empty masters
// only: a replica of another master is never taken away) replicate it, and reports wait
// while a fresh master's replica is not attached or not yet in sync (master_link_status
// up, no full sync in progress). A fresh master with no member to spare for it goes on
// without a replica.
func attachFresh(ctx context.Context, f Factory, st *topology.ClusterState, plan topology.ScalePlan) (ScaleProgress, bool, error) {
	prog := ScaleProgress{Phase: topology.PhaseReplicating}
	isFresh, isEmpty := setOf(plan.Fresh), setOf(plan.Empty)
	var acts []topology.Action
	var linked []int
	for _, r := range slices.Sorted(maps.Keys(plan.ReplicaOf)) {
		m := plan.ReplicaOf[r]
		if !isFresh[m] {
			continue
		}
		self, mid := st.Members[r].Self(), st.Members[m].ID()
		switch {
		case self.Replica && self.MasterID == mid:
			linked = append(linked, r)
		case isEmpty[r]:
			acts = append(acts, topology.Action{Kind: topology.ActionReplicate, Member: r, Target: m, MasterID: mid,
				Message: fmt.Sprintf("Made %s a replica of new master %s before it receives slots", st.Members[r].Pod, st.Members[m].Pod)})
		}
	}
	if len(acts) > 0 {
		prog.Actions = acts
		if err := newExecutor(f).execute(ctx, st, acts); err != nil {
			return prog, true, fmt.Errorf("failed to attach replicas to new masters: %w", err)
		}
		return prog, true, nil
	}
	for _, r := range linked {
		rep, err := f.For(st.Members[r].Addr).Replication(ctx)
		if err != nil {
			return prog, true, err
		}
		if !rep.InSync() {
			prog.Phase = PhaseSyncingReplicas
			return prog, true, nil
		}
	}
	return prog, false, nil
}

func setOf(idx []int) map[int]bool {
	out := make(map[int]bool, len(idx))
	for _, i := range idx {
		out[i] = true
	}
	return out
}
