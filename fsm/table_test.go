package fsm

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
)

// Every row fires from each of its phases when its guard holds, and only then.
func TestEveryRowFiresWhenItsGuardHolds(t *testing.T) {
	for _, tr := range table {
		for _, from := range tr.From {
			t.Run(fmt.Sprintf("%s/%s", from, tr.Event), func(t *testing.T) {
				g := NewWithT(t)
				obs := makeHold(base(), tr.Guard, true)
				if tr.Event == Create {
					obs = makeHold(Observation{}, tr.Guard, true) // a fresh CR: nothing observed yet
				}
				d, err := Evaluate(from, obs)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(d.Event).To(Equal(tr.Event))
				g.Expect(d.Phase).To(Equal(tr.To))
				g.Expect(d.Changed()).To(BeTrue())
			})
		}
	}
}

// Each part of a guard is needed: take it away and the row does not fire.
func TestEveryRowStaysWhenItsGuardFails(t *testing.T) {
	for _, tr := range table {
		for _, from := range tr.From {
			holding := makeHold(base(), tr.Guard, true)
			cases := map[string]Observation{tr.Guard.Name: makeHold(holding, tr.Guard, false)}
			if tr.Guard.all != nil {
				for _, p := range tr.Guard.all {
					cases["without "+p.Name] = makeHold(holding, p, false)
				}
			}
			for name, obs := range cases {
				t.Run(fmt.Sprintf("%s/%s/%s", from, tr.Event, name), func(t *testing.T) {
					g := NewWithT(t)
					g.Expect(tr.Guard.Holds(obs)).To(BeFalse())
					d, err := Evaluate(from, obs)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(d.Event).NotTo(Equal(tr.Event))
				})
			}
		}
	}
}

// With nothing observed no phase moves, and each says why.
func TestNothingObservedMovesNothing(t *testing.T) {
	for _, from := range Phases {
		g := NewWithT(t)
		d, err := Evaluate(from, Observation{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d).To(MatchFields(IgnoreExtras, Fields{"From": Equal(from), "Phase": Equal(from), "Event": BeEmpty()}))
		g.Expect(d.Reason).NotTo(BeEmpty())
		g.Expect(d.Message).NotTo(BeEmpty())
	}
}

// OperationStuck holds on either part alone.
func TestFailFiresOnEitherCause(t *testing.T) {
	for _, from := range []Phase{Creating, Scaling, Upgrading} {
		for _, cause := range operationStuck.any {
			g := NewWithT(t)
			d, err := Evaluate(from, setFact(base(), cause, true))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Event).To(Equal(Fail), "%s with %s", from, cause.Name)
			g.Expect(d.Reason).To(Equal(cause.Name))
		}
	}
}

// Every fact's source names the Observation field its check reads.
func TestFactSourcesMatchTheirChecks(t *testing.T) {
	for _, f := range facts() {
		g := NewWithT(t)
		g.Expect(f.Holds(setFact(base(), f, true))).To(BeTrue(), f.Name)
		g.Expect(f.Holds(setFact(base(), f, false))).To(BeFalse(), f.Name)
		g.Expect(f.Holds(setFact(Observation{}, f, true))).To(BeTrue(), f.Name)
		g.Expect(f.Holds(setFact(Observation{}, f, false))).To(BeFalse(), f.Name)
	}
}

// The table has one row per (phase, event): looplab keys transitions that way,
// and a second row would silently replace the first.
func TestTableHasOneRowPerPhaseAndEvent(t *testing.T) {
	g := NewWithT(t)
	seen := map[string]bool{}
	for _, tr := range table {
		for _, from := range tr.From {
			key := fmt.Sprintf("%s/%s", from, tr.Event)
			g.Expect(seen).NotTo(HaveKey(key))
			seen[key] = true
			g.Expect(Phases).To(ContainElement(from))
		}
		g.Expect(Phases).To(ContainElement(tr.To))
		g.Expect(Events).To(ContainElement(tr.Event))
	}
}
