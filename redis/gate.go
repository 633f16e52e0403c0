package redis

import (
	"slices"
	"sync"
)

// Gates: the streams of one step (migrate) share their nodes, two streams a source and
// three a target. Redis runs MIGRATE synchronously: the source serves nothing until the
// target has restored the batch, and the target nothing while it restores. For a batch
// that is milliseconds, and a sibling stream's command simply waits its turn on the wire.
// A big key's MIGRATE is seconds (bigkey.go), longer than the 3 s read timeout of the
// sibling's commands and than any MIGRATE timeout of its batches: on the wire they would
// be cut off, the step would end with an error, and a batch could be named stuck.
//
// So each node a step moves keys between has a gate in the operator: every command a stream
// sends to its source or target to list, size, mark or move keys shares the two gates, and
// a big key's MIGRATE takes both alone. The others then wait at the gate, without a
// timeout, and go on once it has moved. Gates are taken in address order, so two streams
// never hold one each and wait for the other's. Not gated: the hold of failure detection
// around a big key (CONFIG GET/SET of cluster-node-timeout, bigkey.go), which holdMu
// makes one at a time, and the other masters told of a closed slot (their errors are
// ignored; they learn by gossip).

// nodeGates are the gates of one step's nodes, by address.
type nodeGates struct {
	mu    sync.Mutex
	gates map[string]*sync.RWMutex
}

func newNodeGates() *nodeGates { return &nodeGates{gates: map[string]*sync.RWMutex{}} }

// of is the gates of addrs in address order; nil for nil gates (moves outside a step).
func (g *nodeGates) of(addrs ...string) []*sync.RWMutex {
	if g == nil {
		return nil
	}
	addrs = slices.Clone(addrs)
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*sync.RWMutex, 0, len(addrs))
	for _, a := range addrs {
		if g.gates[a] == nil {
			g.gates[a] = &sync.RWMutex{}
		}
		out = append(out, g.gates[a])
	}
	return out
}

// shared waits until no stream has the source or the target to itself and returns what
// lets them go. Take no gate, shared or alone, while holding it: a read lock is not
// reentrant once a writer waits.
func (km *keyMover) shared() func() {
	gates := km.gates
	for _, g := range gates {
		g.RLock()
	}
	return func() {
		for _, g := range slices.Backward(gates) {
			g.RUnlock()
		}
	}
}

// alone waits until the stream has the source and the target to itself and returns what
// lets them go.
func (km *keyMover) alone() func() {
	gates := km.gates
	for _, g := range gates {
		g.Lock()
	}
	return func() {
		for _, g := range slices.Backward(gates) {
			g.Unlock()
		}
	}
}
