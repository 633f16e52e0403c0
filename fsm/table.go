package fsm

// Transition is one row of the table: from any of From, Event moves the
// machine to To when Guard holds (and the cluster is not paused, see pauseGuards).
type Transition struct {
	From  []Phase
	Event Event
	Guard Guard
	To    Phase
}

// notDeleting is "any" in the delete row of docs/fsm.md: every phase but Deleting,
// which has nowhere to go.
var notDeleting = []Phase{None, Creating, Running, Scaling, Upgrading, Failed}

// table is the transition table of docs/fsm.md, row for row. Within one phase, Evaluate offers
// Events in the order of the Events list, not the order of these rows.
var table = []Transition{
	// {from, event, guard, to}
	{[]Phase{None}, Create, specValid, Creating},
	{[]Phase{Creating}, Initialize, clusterFormed, Running},
	{[]Phase{Running}, Scale, sizeDiffers, Scaling},
	{[]Phase{Scaling}, Scaled, scaleDone, Running},
	{[]Phase{Running}, Upgrade, templateChanged, Upgrading},
	{[]Phase{Upgrading}, Upgraded, upgradeDone, Running},
	{[]Phase{Creating, Scaling, Upgrading}, Fail, operationStuck, Failed},
	{[]Phase{Running}, Fail, broken, Failed},
	{[]Phase{Failed}, Recover, causeCleared, Running},
	{notDeleting, Delete, deletionRequested, Deleting},
}

// pauseGuards reports whether spec.pause blocks e. Pause guards every event
// except delete: a deletionTimestamp is the user's explicit, later wish, the
// API server has already started garbage collection of the owned objects, and
// refusing it would leave `kubectl delete` hanging on the finalizer until
// someone un-pauses. Moving to Deleting changes nothing in Redis.
func pauseGuards(e Event) bool {
	return e != Delete
}

// row returns the row that moves from p on e.
func row(p Phase, e Event) (Transition, bool) {
	for _, t := range table {
		if t.Event != e {
			continue
		}
		for _, f := range t.From {
			if f == p {
				return t, true
			}
		}
	}
	return Transition{}, false
}
