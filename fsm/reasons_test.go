package fsm

import (
	"os"
	"sort"
	"strings"
	"testing"
)

// reasonsDocPath is the catalogue of every status reason, condition and event reason.
const reasonsDocPath = "../docs/reference/status-and-events.md"

// Every reason the machine composes from its table appears in the catalogue as `Name`: the
// guard that fires (or the part that made it fire) and, for each phase that waits,
// Awaiting<Fact> for every fact its forward guard can be missing. The set is derived from
// the table, so a guard or fact added later is caught. The literal reasons (Paused,
// UpToDate, Deleting) are found by docs/reasons_test.go, which parses the sources.
func TestReasonsDocListsEveryMachineReason(t *testing.T) {
	raw, err := os.ReadFile(reasonsDocPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	var missing []string
	for _, r := range machineReasons() {
		if !strings.Contains(doc, "`"+r+"`") {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s does not list these reasons of the phase machine; add each as `Name`:\n  %s",
			reasonsDocPath, strings.Join(missing, "\n  "))
	}
}

// The walk agrees with Evaluate on cases the controller meets every day.
func TestMachineReasonsIncludeWhatEvaluateSays(t *testing.T) {
	all := map[string]bool{}
	for _, r := range machineReasons() {
		all[r] = true
	}
	for _, c := range []struct {
		phase Phase
		obs   Observation
	}{
		{None, Observation{}},
		{None, Observation{SpecValid: true}},
		{Creating, Observation{}},
		{Creating, Observation{TimedOut: true}},
		{Scaling, Observation{CannotProceed: true}},
		{Running, Observation{DesiredReplicas: 6, ObservedReplicas: 3}},
		{Running, Observation{Broken: true}},
		{Failed, Observation{ClusterOK: true, SlotsCovered: true}},
		{Upgrading, Observation{AllPodsUpdated: true}},
		{Running, Observation{Deleting: true}},
	} {
		d, err := Evaluate(c.phase, c.obs)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason != "UpToDate" && d.Reason != "SpecRefused" && d.Reason != "Paused" && d.Reason != "Deleting" && !all[d.Reason] {
			t.Errorf("Evaluate(%s, %+v) says %q, which machineReasons does not list", c.phase, c.obs, d.Reason)
		}
	}
}

// machineReasons lists, sorted, every Reason Evaluate can compose from the table.
func machineReasons() []string {
	set := map[string]bool{}
	for _, t := range table {
		// The event fired: why() names the guard or the part of an anyOf that held.
		for _, n := range firedNames(t.Guard) {
			set[n] = true
		}
		// The phase stays: stay() names the first missing part of a forward guard.
		if t.Event == Delete || t.Event == Fail {
			continue
		}
		for _, p := range t.From {
			if p == Running || p == Deleting {
				continue // stay() says UpToDate / Deleting there
			}
			for _, n := range missingNames(t.Guard) {
				set["Awaiting"+n] = true
			}
		}
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// firedNames are the names why() can return when g holds.
func firedNames(g Guard) []string {
	if g.any != nil {
		var out []string
		for _, p := range g.any {
			out = append(out, firedNames(p)...)
		}
		return out
	}
	return []string{g.Name} // a fact, or an allOf that holds as a whole
}

// missingNames are the names why() can return when g does not hold.
func missingNames(g Guard) []string {
	if g.all != nil {
		var out []string
		for _, p := range g.all {
			out = append(out, missingNames(p)...)
		}
		return out
	}
	return []string{g.Name} // a fact, or an anyOf none of whose parts holds
}
