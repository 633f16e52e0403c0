package controller

import (
	"runtime/debug"
	"testing"
)

func TestGCWhileMovingRaisesUntilTheLastStepReturns(t *testing.T) {
	before := debug.SetGCPercent(40)
	defer debug.SetGCPercent(before)

	g := &gcWhileMoving{percent: 200}
	first := g.hold()
	second := g.hold()
	if got := debug.SetGCPercent(200); got != 200 {
		t.Fatalf("GC percent while two steps run = %d, want 200", got)
	}
	first()
	if got := debug.SetGCPercent(200); got != 200 {
		t.Fatalf("GC percent while one step still runs = %d, want 200", got)
	}
	second()
	if got := debug.SetGCPercent(40); got != 40 {
		t.Fatalf("GC percent after the last step = %d, want 40 again", got)
	}

	off := &gcWhileMoving{}
	off.hold()()
	if got := debug.SetGCPercent(40); got != 40 {
		t.Fatalf("GC percent with MovingGCPercent 0 = %d, want 40 untouched", got)
	}
}
