package redis

import (
	"context"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// UsesAtomicMigration reports whether every member runs a server that moves slots itself.
func UsesAtomicMigration(servers []topology.Server) bool {
	if len(servers) == 0 {
		return false
	}
	for _, s := range servers {
		if !s.AtomicSlotMigration() {
			return false
		}
	}
	return true
}

// membersServers reads INFO server of every member, in parallel; a member that does not
// say leaves its entry zero (which no mover treats as atomic).
func membersServers(ctx context.Context, f Factory, st *topology.ClusterState) []topology.Server {
	out := make([]topology.Server, len(st.Members))
	idx := make([]int, len(st.Members))
	for i := range idx {
		idx[i] = i
	}
	_ = parallel(idx, func(i int) error {
		s, err := f.For(st.Members[i].Addr).Server(ctx)
		out[i] = s
		return err
	})
	return out
}

// settleAtomic reads every master's jobs and cancels the exports the plan (moves) does not
// want: an abort set the size back, or a crash left jobs of an older plan running. It
// reports busy while a job the plan does not want has not ended, on either side (a
// target cleans up the keys of a cancelled import after its source has let go, and a
// leaving node cannot be reset while it holds them), or a target is still cleaning up.
// It returns the jobs it read, by node ID.
func settleAtomic(ctx context.Context, f Factory, st *topology.ClusterState, moves []topology.SlotMove) (map[string][]SlotMigration, bool, error) {
	_, byPair := pairsOf(moves)
	masters := map[string]string{}
	for i := range st.Members {
		if self := st.Members[i].Self(); self != nil && self.Master {
			masters[self.ID] = st.Members[i].Addr
		}
	}
	jobs, err := readJobs(ctx, f, masters)
	if err != nil {
		return jobs, false, err
	}
	busy := false
	for id, js := range jobs {
		cancel := false
		for _, j := range js {
			if j.State == "cleaning-up" {
				// A target dropping the keys of an import that failed: until it is done it
				// refuses a new import of those slots, which would fail the next job.
				busy = true
			}
			if j.Finished() || wanted(j, byPair[[2]string{j.Source, j.Target}]) {
				continue
			}
			busy = true
			cancel = cancel || j.Operation == "EXPORT"
		}
		if !cancel {
			continue
		}
		m := f.For(masters[id])
		// CANCELSLOTMIGRATIONS cancels every export of the source: the wanted ones are
		// started again.
		if err := m.CancelSlotMigrations(ctx); err != nil {
			return jobs, busy, err
		}
	}
	return jobs, busy, nil
}
