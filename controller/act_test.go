package controller

import (
	"testing"

	"github.com/hc-middleware/redis-cluster-operator/fsm"
)

// TestEveryPhaseHasAnAction keeps the act table whole: a phase added to the machine
// without an action would fail every reconcile that enters it.
func TestEveryPhaseHasAnAction(t *testing.T) {
	for _, p := range fsm.Phases {
		if phaseActions[p] == nil {
			t.Errorf("phase %s has no entry in phaseActions", p)
		}
	}
	if len(phaseActions) != len(fsm.Phases) {
		t.Errorf("phaseActions has %d entries for %d phases", len(phaseActions), len(fsm.Phases))
	}
}
