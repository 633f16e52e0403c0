package redis

import (
	"context"
	"math"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// The legacy mover's step: planned slots cut into groups of one source and target, sized
// by the source's load, moved by streams that run at once where the nodes allow.

// A group is the slots of one source and target that move together (MigrateSlots). Its
// cost on the nodes is per group, not per slot: each SETSLOT round is one pipeline and
// one nodes.conf rewrite on every node it touches, and its claim one epoch bump, one
// PONG broadcast and one nodes.conf fsync on every node of the cluster. So big groups
// move faster: 128 slots rather than 32 moved a quarter of 1,000,000 keys about 9% faster
// out and in (bench/README.md, 2026-11-26). But Stop and the budget are asked only
// between groups, so a group also holds, on its source's average a slot, at most about
// groupKeys keys and groupBytes of data (a tenth of a second or two of one stream here);
// and unknownGroupSlots, the size groups had before, when the source's figures could not
// be read.
const (
	groupSlots        = 128
	groupKeys         = 8192
	groupBytes        = 16 << 20
	unknownGroupSlots = 32
)

// moveOptions are the MoveOptions of the request's MIGRATE batches, with one Limiter for
// the whole step when keys per second are capped.
func (req ScaleRequest) moveOptions() MoveOptions {
	return MoveOptions{Pipeline: req.Pipeline, NodeTimeout: req.NodeTimeout, Limiter: NewKeyLimiter(req.MaxKeysPerSecond, req.Pipeline)}
}

// slotLoad is a source's keys and data (used_memory_dataset) a slot, on average.
type slotLoad struct {
	keys, bytes float64
}

// groupSize is the most slots of one pair opened at once, from its source's load
// (known false when it could not be read): groupSlots, fewer where that many slots would
// hold more than groupKeys keys or groupBytes of data, unknownGroupSlots when unknown;
// and with a cap on keys per second about a second's worth of keys (a slot's keys, or
// one batch a slot when slots hold fewer), so a capped group closes within about a
// second and Stop is asked often.
func (req ScaleRequest) groupSize(load slotLoad, known bool) int {
	n := unknownGroupSlots
	if known {
		n = groupSlots
		if load.keys > 0 {
			n = min(n, max(1, int(groupKeys/load.keys)))
		}
		if load.bytes > 0 {
			n = min(n, max(1, int(groupBytes/load.bytes)))
		}
	}
	if req.MaxKeysPerSecond > 0 {
		perSlot := max(1, req.Pipeline, int(math.Ceil(load.keys)))
		n = min(n, max(1, req.MaxKeysPerSecond/perSlot))
	}
	return n
}

// sourceLoads is each source's keys (DBSIZE, read in parallel) and data (mem, the INFO
// memory checkCapacity read, when it has the source) over the slots it owns; a source
// whose DBSIZE cannot be read is left out.
func sourceLoads(ctx context.Context, f Factory, st *topology.ClusterState, moves []topology.SlotMove, mem map[string]topology.Memory) map[string]slotLoad {
	from := map[string]bool{}
	for _, mv := range moves {
		from[mv.From] = true
	}
	var sources []int
	for i := range st.Members {
		if self := st.Members[i].Self(); self != nil && from[self.ID] && self.Slots.Count() > 0 {
			sources = append(sources, i)
		}
	}
	loads := make([]*slotLoad, len(st.Members))
	_ = parallel(sources, func(i int) error {
		keys, err := f.For(st.Members[i].Addr).DBSize(ctx)
		if err == nil {
			slots := float64(st.Members[i].Self().Slots.Count())
			loads[i] = &slotLoad{keys: float64(keys) / slots, bytes: float64(mem[st.Members[i].ID()].Dataset) / slots}
		}
		return err
	})
	out := map[string]slotLoad{}
	for _, i := range sources {
		if loads[i] != nil {
			out[st.Members[i].ID()] = *loads[i]
		}
	}
	return out
}

// migrate moves planned slots until the budget is spent or Stop says so. Moves of the same
// source and target go in groups (MigrateSlots), and groups run at once where the streams
// allow: up to streamsPerSource from one source, up to streamsPerTarget into one target.
// A stream takes its next group as soon as its last one is done, without waiting for the
// others', so streams fall out of step: while one is between MIGRATEs (its SETSLOT rounds,
// its listings) another's MIGRATEs keep the source busy.
func migrate(ctx context.Context, f Factory, st *topology.ClusterState, moves []topology.SlotMove, req ScaleRequest, mem map[string]topology.Memory) (ScaleProgress, error) {
	prog := ScaleProgress{Phase: PhaseMigrating, Remaining: len(moves), Mover: MoverLegacy}
	addr := topology.AddrsByID(st)
	opts := req.moveOptions()
	opts.gates = newNodeGates()
	loads := sourceLoads(ctx, f, st, moves, mem)
	pending := groupMoves(moves, func(from string) int {
		load, known := loads[from]
		return req.groupSize(load, known)
	})
	busy := newStreams()
	done := make(chan groupResult)
	inFlight := 0
	start := time.Now()
	var first error
	for {
		if first == nil && !(req.Budget > 0 && time.Since(start) > req.Budget) && !req.stopped() {
			var taken []moveGroup
			taken, pending = busy.take(pending)
			for _, g := range taken {
				inFlight++
				go func() {
					n, err := MigrateSlots(ctx, f, g.slots, MasterAddr{ID: g.from, Addr: addr[g.from]}, MasterAddr{ID: g.to, Addr: addr[g.to]},
						topology.OtherAddrs(st, g.from, g.to), opts)
					done <- groupResult{group: g, keys: n, err: err}
				}()
			}
		}
		if inFlight == 0 {
			break
		}
		r := <-done
		inFlight--
		busy.release(r.group)
		prog.MovedKeys += r.keys
		if r.err != nil {
			if first == nil {
				first = r.err
			}
			continue
		}
		prog.MovedSlots += len(r.group.slots)
		prog.Remaining -= len(r.group.slots)
	}
	if first != nil {
		return prog, partialStep(first)
	}
	return prog, nil
}

// moveGroup is slots to move from one master to another together.
type moveGroup struct {
	from, to string
	slots    []int
}

type groupResult struct {
	group moveGroup
	keys  int
	err   error
}

// groupMoves cuts the moves into groups of at most size(source) slots of one source and
// target, in plan order.
func groupMoves(moves []topology.SlotMove, size func(from string) int) []moveGroup {
	var out []moveGroup
	open := map[[2]string]int{} // pair -> index in out of its group being filled
	for _, mv := range moves {
		pair := [2]string{mv.From, mv.To}
		i, ok := open[pair]
		if !ok || len(out[i].slots) >= size(mv.From) {
			out = append(out, moveGroup{from: mv.From, to: mv.To})
			i = len(out) - 1
			open[pair] = i
		}
		out[i].slots = append(out[i].slots, mv.Slot)
	}
	return out
}

// streamsPerTarget is how many sources stream into one target at once. Scale-out has
// one new master and every old one a source, so one stream per target would move one
// source at a time. A target's side of MIGRATE is RESTORE, which its event loop
// interleaves between the streams.
const streamsPerTarget = 3

// streamsPerSource is how many groups one source moves at once. A
// source's MIGRATE blocks it for its batch, so two MIGRATEs of one source never overlap:
// the second waits for the first, as a client's command does, and no command waits
// behind more than that. A big key's MIGRATE, seconds long, takes its source and target
// to itself (gate.go): the other streams wait for it at the gate, not on the wire, where
// their timeouts would cut them off. What the second stream buys is the rest of a group's time: its
// SETSLOT rounds, key listings and sizes on the other nodes and in the operator, during
// which one stream leaves the source idle. It matters where a single master is emptied
// (scale-in), the one case with one source.
const streamsPerSource = 2

// streams are the groups moving now: a node is the source of up to streamsPerSource
// groups, or the target of up to streamsPerTarget groups, never both.
type streams struct {
	sources map[string]int
	targets map[string]int
	pairs   map[[2]string]int
}

func newStreams() *streams {
	return &streams{sources: map[string]int{}, targets: map[string]int{}, pairs: map[[2]string]int{}}
}

// take takes, in order, the groups that can start beside those moving, and returns them
// and the rest in their order. A source's first stream comes before any source's second,
// so several sources into one target (scale-out) each get a stream before one gets two.
// A source's second stream goes to another target than its first when one is left
// (scale-in plans each target's slots as one run): two targets restore at once.
func (s *streams) take(groups []moveGroup) (taken, rest []moveGroup) {
	for perSource := 1; perSource <= streamsPerSource; perSource++ {
		for _, samePair := range []bool{false, true} {
			rest = nil
			for _, g := range groups {
				pair := [2]string{g.from, g.to}
				if s.sources[g.from] >= perSource || s.targets[g.from] > 0 || s.sources[g.to] > 0 ||
					s.targets[g.to] >= streamsPerTarget || !samePair && s.pairs[pair] > 0 {
					rest = append(rest, g)
					continue
				}
				s.sources[g.from]++
				s.targets[g.to]++
				s.pairs[pair]++
				taken = append(taken, g)
			}
			groups = rest
		}
	}
	return taken, rest
}

// release ends g's stream.
func (s *streams) release(g moveGroup) {
	if s.sources[g.from]--; s.sources[g.from] <= 0 {
		delete(s.sources, g.from)
	}
	pair := [2]string{g.from, g.to}
	if s.pairs[pair]--; s.pairs[pair] <= 0 {
		delete(s.pairs, pair)
	}
	if s.targets[g.to]--; s.targets[g.to] <= 0 {
		delete(s.targets, g.to)
	}
}
