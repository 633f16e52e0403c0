package fsm

import (
	"fmt"
	"reflect"
	"strings"
)

// base is an observation of a healthy six-instance cluster that matches its
// spec, with nothing asked: no event holds from Running.
func base() Observation {
	return Observation{
		SpecValid: true, DesiredReplicas: 6, ObservedReplicas: 6,
		StatefulSetAtSize: true, PodsReady: true, AllMet: true, NodesAgree: true,
		SlotsCovered: true, ReplicasAttached: true, ClusterOK: true,
		SlotsPlaced: true, RemovedNodesForgotten: true, AllPodsUpdated: true, ReplicasInSync: true,
		Restored: true,
	}
}

// setFact makes the fact f hold (or not) on o by writing the Observation
// fields its source names. It is the docs' formula read back, so a fact whose
// source lies about its check fails the tests.
func setFact(o Observation, f Guard, holds bool) Observation {
	src := f.source
	switch src {
	case "DesiredReplicas != ObservedReplicas", "DesiredReplicas == ObservedReplicas":
		differ := holds == strings.Contains(src, "!=")
		o.ObservedReplicas = o.DesiredReplicas
		if differ {
			o.ObservedReplicas = o.DesiredReplicas + 2
		}
		return o
	}
	value := holds
	if strings.HasPrefix(src, "!") {
		src, value = src[1:], !holds
	}
	field := reflect.ValueOf(&o).Elem().FieldByName(src)
	if !field.IsValid() || field.Kind() != reflect.Bool {
		panic(fmt.Sprintf("fact %s: source %q is not a bool field of Observation", f.Name, f.source))
	}
	field.SetBool(value)
	return o
}

// makeHold makes g hold (or not) on o with the fewest changes: every part of
// an allOf, the first part of an anyOf; false is the first part of an allOf,
// every part of an anyOf.
func makeHold(o Observation, g Guard, holds bool) Observation {
	switch {
	case g.check != nil:
		return setFact(o, g, holds)
	case g.all != nil && holds, g.any != nil && !holds:
		for _, p := range g.Parts() {
			o = makeHold(o, p, holds)
		}
		return o
	default:
		return makeHold(o, g.Parts()[0], holds)
	}
}

// facts lists every fact the table's guards are built from.
func facts() []Guard {
	seen := map[string]bool{}
	var out []Guard
	var walk func(Guard)
	walk = func(g Guard) {
		if seen[g.Name] {
			return
		}
		seen[g.Name] = true
		if g.check != nil {
			out = append(out, g)
		}
		for _, p := range g.Parts() {
			walk(p)
		}
	}
	walk(paused)
	for _, t := range table {
		walk(t.Guard)
	}
	return out
}
