package fsm

import (
	"context"
	"errors"
	"fmt"

	looplab "github.com/looplab/fsm"
)

// Decision is the outcome of one evaluation.
type Decision struct {
	// From is the phase evaluated (None for an empty phase).
	From Phase
	// Phase is the phase to act for and to write to status.phase.
	Phase Phase
	// Event is the event that fired, or "" when the phase stays.
	Event Event
	// Reason is CamelCase, for status.reason and events: the guard (or the
	// part of it) that fired, "Paused", or "Awaiting<Fact>" while waiting.
	Reason string
	// Message says the same in words, for users.
	Message string
}

// Changed reports whether the phase moved; the controller then emits an
// event and requeues at once so the next step is evaluated.
func (d Decision) Changed() bool { return d.Event != "" }

// Evaluate fires at most one event from current, given what was observed.
//
// One step per reconcile: every step is then a status write and an event the
// user can read, and requeueing after a change evaluates the next step with
// fresh observations instead of the stale ones this call got. Events are
// offered in the order of Events (delete, fail, then the forward ones); the
// first whose row exists for current, whose guard holds and which pause does
// not block, fires.
func Evaluate(current Phase, obs Observation) (Decision, error) {
	from := normalize(current)
	if !known(from) {
		return Decision{}, fmt.Errorf("failed to evaluate phase: unknown phase %q", current)
	}
	m := newMachine(from, obs)
	for _, e := range Events {
		if m.Cannot(string(e)) {
			continue
		}
		err := m.Event(context.Background(), string(e))
		var canceled looplab.CanceledError
		switch {
		case err == nil:
			t, _ := row(from, e)
			why := t.Guard.why(obs)
			return Decision{From: from, Phase: Phase(m.Current()), Event: e,
				Reason: why.Name, Message: firedMessage(from, t, why, obs)}, nil
		case errors.As(err, &canceled):
			continue // guard or pause said no
		default:
			return Decision{}, fmt.Errorf("failed to fire %s from %s: %w", e, from, err)
		}
	}
	return stay(from, obs), nil
}

// newMachine builds a looplab machine on the table whose before_event
// callback refuses an event unless pause allows it and its row's guard holds.
// A machine per evaluation keeps Evaluate free of shared state.
func newMachine(current Phase, obs Observation) *looplab.FSM {
	var events looplab.Events
	for _, t := range table {
		src := make([]string, len(t.From))
		for i, f := range t.From {
			src[i] = string(f)
		}
		events = append(events, looplab.EventDesc{Name: string(t.Event), Src: src, Dst: string(t.To)})
	}
	return looplab.NewFSM(string(current), events, looplab.Callbacks{
		"before_event": func(_ context.Context, e *looplab.Event) {
			if obs.Paused && pauseGuards(Event(e.Event)) {
				e.Cancel()
				return
			}
			t, ok := row(Phase(e.Src), Event(e.Event))
			if !ok || !t.Guard.Holds(obs) {
				e.Cancel()
			}
		},
	})
}

// firedMessage tells the user what happened and why.
func firedMessage(from Phase, t Transition, why Guard, obs Observation) string {
	msg := fmt.Sprintf("%s: %s -> %s because %s", t.Event, from, t.To, why.Doc)
	switch {
	case why.Name == sizeDiffers.Name:
		msg += fmt.Sprintf(" (%d asked, %d in the cluster)", obs.DesiredReplicas, obs.ObservedReplicas)
	case why.Name == cannotProceed.Name && obs.CannotProceedMessage != "":
		msg += ": " + obs.CannotProceedMessage
	}
	return msg
}

// stay explains why no event fired from p.
func stay(p Phase, obs Observation) Decision {
	d := Decision{From: p, Phase: p}
	if obs.Paused {
		d.Reason = "Paused"
		d.Message = fmt.Sprintf("spec.pause is true: the operator changes nothing and stays %s until it is false", p)
		return d
	}
	switch p {
	case Running:
		d.Reason = "UpToDate"
		d.Message = "the cluster matches the spec"
		if !obs.SpecValid {
			// The cluster keeps serving as it was; the refusal itself follows in the status.
			d.Reason = "SpecRefused"
			d.Message = "the spec cannot be acted on; the cluster keeps serving as it was"
		}
	case Deleting:
		d.Reason = "Deleting"
		d.Message = "the RedisCluster is being deleted"
	default:
		// The phase waits for its forward guard; name the first missing fact.
		for _, t := range table {
			if t.Event == Delete || t.Event == Fail || !contains(t.From, p) {
				continue
			}
			missing := t.Guard.why(obs)
			d.Reason = "Awaiting" + missing.Name
			d.Message = fmt.Sprintf("%s: waiting until %s", p, missing.Doc)
			break
		}
	}
	return d
}

func contains(ps []Phase, p Phase) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}
