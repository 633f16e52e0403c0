package fsm

import (
	"context"
	"errors"
	"math/rand"
	"reflect"
	"testing"

	looplab "github.com/looplab/fsm"
	. "github.com/onsi/gomega"
)

// The table is docs/fsm.md's, pinned here so that an edit to table.go has
// to be an edit to this list (and to the documented contract) as well.
func TestTableIsTheDesignTable(t *testing.T) {
	type edge struct {
		From  Phase
		Event Event
		Guard string
		To    Phase
	}
	want := []edge{
		{None, Create, "SpecValid", Creating},
		{Creating, Initialize, "ClusterFormed", Running},
		{Running, Scale, "SizeDiffers", Scaling},
		{Scaling, Scaled, "ScaleDone", Running},
		{Running, Upgrade, "TemplateChanged", Upgrading},
		{Upgrading, Upgraded, "UpgradeDone", Running},
		{Creating, Fail, "OperationStuck", Failed},
		{Scaling, Fail, "OperationStuck", Failed},
		{Upgrading, Fail, "OperationStuck", Failed},
		{Running, Fail, "Broken", Failed},
		{Failed, Recover, "CauseCleared", Running},
	}
	for _, p := range []Phase{None, Creating, Running, Scaling, Upgrading, Failed} {
		want = append(want, edge{p, Delete, "DeletionRequested", Deleting})
	}
	var got []edge
	for _, tr := range table {
		for _, f := range tr.From {
			got = append(got, edge{f, tr.Event, tr.Guard.Name, tr.To})
		}
	}
	g := NewWithT(t)
	g.Expect(got).To(ConsistOf(want))
	g.Expect(clusterFormed.Formula()).To(Equal("PodsReady and AllMet and SlotsCovered and ReplicasAttached and ClusterOK and NodesAgree and Restored"))
	g.Expect(scaleDone.Formula()).To(Equal("StatefulSetAtSize and SizeMatches and SlotsPlaced and RemovedNodesForgotten and ReplicasAttached and ClusterOK"))
	g.Expect(upgradeDone.Formula()).To(Equal("AllPodsUpdated and TemplateCurrent and PodsReady and AllMet and ReplicasInSync and ClusterOK"))
	g.Expect(operationStuck.Formula()).To(Equal("TimedOut or CannotProceed"))
}

// everything makes every fact true that does not stop the others: the most
// permissive observation, under which only the table keeps a move out.
func everything() Observation {
	o := base()
	o.TemplateChanged, o.SpecChanged, o.TimedOut, o.CannotProceed, o.Broken = true, true, true, true, true
	return o
}

// The machine refuses every (phase, event) the table has no row for, even
// when every guard would hold.
func TestIllegalMovesAreRefused(t *testing.T) {
	for _, p := range Phases {
		for _, e := range Events {
			if _, ok := row(p, e); ok {
				continue
			}
			g := NewWithT(t)
			obs := everything()
			obs.Deleting = true
			m := newMachine(p, obs)
			g.Expect(m.Can(string(e))).To(BeFalse(), "%s from %s", e, p)
			err := m.Event(context.Background(), string(e))
			var invalid looplab.InvalidEventError
			g.Expect(errors.As(err, &invalid)).To(BeTrue(), "%s from %s: %v", e, p, err)
			g.Expect(m.Current()).To(Equal(string(p)))
		}
	}
}

// Moves the design forbids, named: none of them is an edge, and no
// observation makes Evaluate take one.
func TestForbiddenMovesNeverHappen(t *testing.T) {
	forbidden := [][2]Phase{
		{None, Running}, {None, Scaling}, {None, Failed},
		{Creating, Scaling}, {Creating, Upgrading}, {Creating, None},
		{Running, Creating}, {Running, None},
		{Scaling, Upgrading}, {Upgrading, Scaling}, {Scaling, Creating},
		{Failed, Scaling}, {Failed, Upgrading}, {Failed, Creating},
		{Deleting, Running}, {Deleting, None}, {Deleting, Failed},
	}
	edges := map[[2]Phase]bool{}
	for _, tr := range table {
		for _, f := range tr.From {
			edges[[2]Phase{f, tr.To}] = true
		}
	}
	rng := rand.New(rand.NewSource(1))
	for _, move := range forbidden {
		g := NewWithT(t)
		g.Expect(edges).NotTo(HaveKey(move))
		for i := 0; i < 200; i++ {
			d, err := Evaluate(move[0], randomObservation(rng))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Phase).NotTo(Equal(move[1]), "%s -> %s", move[0], move[1])
		}
	}
}

// Pause blocks every event but delete.
func TestPauseBlocksEveryEventButDelete(t *testing.T) {
	for _, tr := range table {
		for _, from := range tr.From {
			g := NewWithT(t)
			obs := makeHold(base(), tr.Guard, true)
			obs.Paused = true
			d, err := Evaluate(from, obs)
			g.Expect(err).NotTo(HaveOccurred())
			if tr.Event == Delete {
				g.Expect(d.Event).To(Equal(Delete))
				g.Expect(d.Phase).To(Equal(Deleting))
				continue
			}
			g.Expect(d.Event).To(BeEmpty(), "%s from %s while paused", tr.Event, from)
			g.Expect(d.Phase).To(Equal(from))
			g.Expect(d.Reason).To(Equal("Paused"))
		}
	}
}

// The order events are offered in: delete beats fail beats forward moves;
// scale goes before upgrade.
func TestPriority(t *testing.T) {
	cases := []struct {
		name string
		from Phase
		obs  func(o *Observation)
		want Event
	}{
		{"delete beats fail", Creating, func(o *Observation) { o.Deleting, o.TimedOut = true, true }, Delete},
		{"delete beats scale", Running, func(o *Observation) { o.Deleting, o.DesiredReplicas = true, 8 }, Delete},
		{"fail beats initialize", Creating, func(o *Observation) { o.TimedOut = true }, Fail},
		{"fail beats scaled", Scaling, func(o *Observation) { o.CannotProceed = true }, Fail},
		{"fail beats scale", Running, func(o *Observation) { o.Broken, o.DesiredReplicas = true, 8 }, Fail},
		{"scale before upgrade", Running, func(o *Observation) { o.TemplateChanged, o.DesiredReplicas = true, 8 }, Scale},
	}
	for _, c := range cases {
		g := NewWithT(t)
		obs := base()
		c.obs(&obs)
		d, err := Evaluate(c.from, obs)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Event).To(Equal(c.want), c.name)
	}
}

// Reasons name the fact that decided, for status.reason and events.
func TestReasons(t *testing.T) {
	g := NewWithT(t)
	obs := base()
	obs.PodsReady = false
	d, _ := Evaluate(Creating, obs)
	g.Expect(d.Reason).To(Equal("AwaitingPodsReady"))
	g.Expect(d.Message).To(ContainSubstring("every pod is Ready"))

	obs = base()
	obs.CannotProceed, obs.CannotProceedMessage = true, "assignStrategies[0] names unknown node abc"
	d, _ = Evaluate(Scaling, obs)
	g.Expect(d.Reason).To(Equal("CannotProceed"))
	g.Expect(d.Message).To(ContainSubstring("unknown node abc"))

	obs = base()
	obs.DesiredReplicas = 8
	d, _ = Evaluate(Running, obs)
	g.Expect(d.Reason).To(Equal("SizeDiffers"))
	g.Expect(d.Message).To(ContainSubstring("8 asked, 6 in the cluster"))

	d, _ = Evaluate(Running, base())
	g.Expect(d.Reason).To(Equal("UpToDate"))

	// A refused spec leaves a Running cluster serving, and the reason says so instead of
	// calling the cluster up to date.
	obs = base()
	obs.SpecValid = false
	d, _ = Evaluate(Running, obs)
	g.Expect(d.Phase).To(Equal(Running))
	g.Expect(d.Reason).To(Equal("SpecRefused"))

	obs = base()
	obs.Broken = true
	d, _ = Evaluate(Failed, obs)
	g.Expect(d.Reason).To(Equal("AwaitingNotBroken"))
}

// The empty phase of a fresh CR is None; an unknown phase is an error.
func TestPhaseNormalisation(t *testing.T) {
	g := NewWithT(t)
	d, err := Evaluate("", Observation{SpecValid: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.From).To(Equal(None))
	g.Expect(d.Phase).To(Equal(Creating))

	d, err = Evaluate("", Observation{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Phase).To(Equal(None))

	_, err = Evaluate("Bogus", base())
	g.Expect(err).To(MatchError(ContainSubstring(`unknown phase "Bogus"`)))
}

// Failed recovers to Running, and the next evaluation starts what the spec
// now needs; without a spec change it waits for the cluster to match.
func TestRecoverThenTheSpecsPhase(t *testing.T) {
	g := NewWithT(t)
	obs := base()
	obs.DesiredReplicas = 8 // a scale-out that failed
	d, _ := Evaluate(Failed, obs)
	g.Expect(d.Event).To(BeEmpty())
	g.Expect(d.Reason).To(Equal("AwaitingMatchesSpecOrSpecChanged"))

	obs.SpecChanged = true // the user edited the spec since
	d, _ = Evaluate(Failed, obs)
	g.Expect(d.Event).To(Equal(Recover))
	d, _ = Evaluate(d.Phase, obs)
	g.Expect(d.Event).To(Equal(Scale))
	g.Expect(d.Phase).To(Equal(Scaling))
}

// Under one fixed observation (TimedOut false: the controller measures it from
// the current phase's start, so it is false right after any move) repeated
// evaluation settles within a few steps: the guards never make the machine
// bounce. Every fired event's guard holds, pause is respected, and every move
// is an edge of the table.
func TestRandomObservationsSettle(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	for i := 0; i < 20000; i++ {
		g := NewWithT(t)
		obs := randomObservation(rng)
		obs.TimedOut = false
		p := Phases[rng.Intn(len(Phases))]
		for step := 0; ; step++ {
			g.Expect(step).To(BeNumerically("<", 4), "no fixpoint from %s under %+v", p, obs)
			d, err := Evaluate(p, obs)
			g.Expect(err).NotTo(HaveOccurred())
			if !d.Changed() {
				break
			}
			tr, ok := row(p, d.Event)
			g.Expect(ok).To(BeTrue())
			g.Expect(tr.To).To(Equal(d.Phase))
			g.Expect(tr.Guard.Holds(obs)).To(BeTrue())
			if obs.Paused {
				g.Expect(d.Event).To(Equal(Delete))
			}
			if obs.Deleting {
				g.Expect(d.Event).To(Equal(Delete))
			}
			p = d.Phase
		}
	}
}

// randomObservation flips every bool field of Observation at random.
func randomObservation(rng *rand.Rand) Observation {
	var o Observation
	v := reflect.ValueOf(&o).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Kind() == reflect.Bool {
			v.Field(i).SetBool(rng.Intn(2) == 0)
		}
	}
	o.DesiredReplicas = int32(3 + rng.Intn(2)*3)
	o.ObservedReplicas = int32(3 + rng.Intn(2)*3)
	return o
}

// Every phase can reach Running or Deleting along the table's edges.
func TestEveryPhaseReachesRunningOrDeleting(t *testing.T) {
	next := map[Phase][]Phase{}
	for _, tr := range table {
		for _, f := range tr.From {
			next[f] = append(next[f], tr.To)
		}
	}
	reaches := func(from, goal Phase) bool {
		seen := map[Phase]bool{from: true}
		queue := []Phase{from}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if p == goal {
				return true
			}
			for _, q := range next[p] {
				if !seen[q] {
					seen[q] = true
					queue = append(queue, q)
				}
			}
		}
		return false
	}
	for _, p := range Phases {
		g := NewWithT(t)
		g.Expect(reaches(p, Running) || reaches(p, Deleting)).To(BeTrue(), string(p))
		if p != Deleting {
			// Stronger: every live phase can still get to Running, and be deleted.
			g.Expect(reaches(p, Running)).To(BeTrue(), string(p))
			g.Expect(reaches(p, Deleting)).To(BeTrue(), string(p))
		}
	}
	g := NewWithT(t)
	g.Expect(next[Deleting]).To(BeEmpty(), "Deleting is terminal")
}

// A cluster with spec.restoreFrom is formed first and restored after, still Creating:
// Running only once Restored holds. Without restoreFrom Restored is always true, so the
// machine decides exactly as before for every other cluster.
func TestCreatingWaitsForTheRestore(t *testing.T) {
	g := NewWithT(t)
	o := base()
	o.Restored = false
	g.Expect(Formed(o)).To(BeTrue(), "formed: the restore may run")
	d, err := Evaluate(Creating, o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Changed()).To(BeFalse())
	g.Expect(d.Phase).To(Equal(Creating))
	g.Expect(d.Reason).To(Equal("AwaitingRestored"))

	// Not formed yet: the wait names what the bootstrap still lacks, not the restore.
	o.PodsReady = false
	g.Expect(Formed(o)).To(BeFalse())
	d, _ = Evaluate(Creating, o)
	g.Expect(d.Reason).To(Equal("AwaitingPodsReady"))

	o = base()
	d, _ = Evaluate(Creating, o)
	g.Expect(d.Event).To(Equal(Initialize))
	g.Expect(d.Reason).To(Equal("ClusterFormed"), "the reason of the move is unchanged")
	g.Expect(d.Message).To(Equal("initialize: Creating -> Running because the Redis cluster is formed and every node agrees"))

	// Creating timed out mid-restore: Failed recovers only once the keys are in.
	o.Restored = false
	d, _ = Evaluate(Failed, o)
	g.Expect(d.Changed()).To(BeFalse())
	g.Expect(d.Reason).To(Equal("AwaitingRestored"))
	o.Restored = true
	d, _ = Evaluate(Failed, o)
	g.Expect(d.Event).To(Equal(Recover))
}
