package fsm

import "strings"

// Guard is a named, pure condition on an Observation. A guard is either a
// fact (one check) or built from other guards with allOf / anyOf, so the docs
// and the reasons can name the exact part that holds or is missing.
type Guard struct {
	// Name is CamelCase; it labels the edge in the diagram and becomes the
	// Reason of a decision.
	Name string
	// Doc says in words what holds when the guard holds.
	Doc string

	source string                 // facts: the Observation expression checked
	check  func(Observation) bool // facts: the check itself
	all    []Guard                // every part must hold
	any    []Guard                // one part must hold
}

// fact is a guard with a single check; source spells the check in terms of
// Observation fields, for the docs (a test keeps the two in step).
func fact(name, source, doc string, check func(Observation) bool) Guard {
	return Guard{Name: name, Doc: doc, source: source, check: check}
}

// allOf holds when every part holds.
func allOf(name, doc string, parts ...Guard) Guard {
	return Guard{Name: name, Doc: doc, all: parts}
}

// anyOf holds when at least one part holds.
func anyOf(name, doc string, parts ...Guard) Guard {
	return Guard{Name: name, Doc: doc, any: parts}
}

// Holds evaluates the guard on o.
func (g Guard) Holds(o Observation) bool {
	switch {
	case g.check != nil:
		return g.check(o)
	case g.all != nil:
		for _, p := range g.all {
			if !p.Holds(o) {
				return false
			}
		}
		return true
	default:
		for _, p := range g.any {
			if p.Holds(o) {
				return true
			}
		}
		return false
	}
}

// Parts returns the guards g is built from (nil for a fact).
func (g Guard) Parts() []Guard {
	if g.all != nil {
		return g.all
	}
	return g.any
}

// Formula spells g out in terms of its parts, e.g. "TimedOut or CannotProceed",
// or for a fact the Observation expression it checks.
func (g Guard) Formula() string {
	if g.check != nil {
		return "`" + g.source + "`"
	}
	var names []string
	for _, p := range g.Parts() {
		names = append(names, p.Name)
	}
	if g.all != nil {
		return strings.Join(names, " and ")
	}
	return strings.Join(names, " or ")
}

// why names the fact that decides g on o: when g holds, the part that made it
// hold (so a fail reads "TimedOut", not "OperationStuck"); when it does not,
// the first part that is missing (so a wait reads "PodsReady").
func (g Guard) why(o Observation) Guard {
	switch {
	case g.check != nil:
		return g
	case g.all != nil:
		for _, p := range g.all {
			if !p.Holds(o) {
				return p.why(o)
			}
		}
		return g
	default:
		for _, p := range g.any {
			if p.Holds(o) {
				return p.why(o)
			}
		}
		return g
	}
}
