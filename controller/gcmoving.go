package controller

import (
	"runtime/debug"
	"sync"
)

// gcWhileMoving raises the Go collector's target (GOGC) while resize steps move slots, and
// puts it back when the last one returns. The operator's default target is low for an
// idle fleet (main.go), but a step moving tens of thousands of keys a second allocates
// fast, and at that target the collector took about a third of the operator's CPU while
// keys moved, on cores Redis needed (bench/README.md). GOMEMLIMIT, which the manifests set
// to the container's limit, still bounds the heap.
type gcWhileMoving struct {
	percent int // 0 leaves the collector alone (GOGC set by the user)

	mu   sync.Mutex
	n    int // steps running
	prev int // the target before the first of them
}

// hold raises the target for one step; the returned function lowers it again.
func (g *gcWhileMoving) hold() func() {
	if g.percent <= 0 {
		return func() {}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n == 0 {
		g.prev = debug.SetGCPercent(g.percent)
	}
	g.n++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.n--
		if g.n == 0 {
			debug.SetGCPercent(g.prev)
		}
	}
}
