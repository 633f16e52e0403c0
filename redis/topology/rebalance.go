package topology

import (
	"fmt"
	"sort"
	"strings"
)

// MasterSlots is one master and the slots it owns, as a planner input.
type MasterSlots struct {
	ID string
	// Name is the pod running the master, so users may name givers by pod.
	Name  string
	Slots SlotRanges
}

// SlotMove is one slot to migrate from one master to another (node IDs).
type SlotMove struct {
	Slot     int
	From, To string
}

// Assignment is one AssignReceive entry: the new master takes Slots slots from the masters
// in From (node IDs or pod names), in proportion to what they own.
type Assignment struct {
	Slots int
	From  []string
}

// PlanRebalance plans the moves that leave every master of `masters` with total/N slots
// (± 1) and every master of `leaving` with none, moving the fewest slots: the masters
// owning the most keep the extra slot of the remainder, each master gives only its excess
// and each slot moves once. It is the target of `redis-cli --cluster rebalance
// --cluster-use-empty-masters` for scale-out and of emptying the leaving masters for
// scale-in. A distribution already at the target gives no move, which is what makes the
// plan resumable from Redis' own state.
func PlanRebalance(masters, leaving []MasterSlots) []SlotMove {
	if len(masters) == 0 {
		return nil
	}
	total := 0
	for _, m := range masters {
		total += m.Slots.Count()
	}
	for _, m := range leaving {
		total += m.Slots.Count()
	}
	order := make([]int, len(masters))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ca, cb := masters[order[a]].Slots.Count(), masters[order[b]].Slots.Count()
		if ca != cb {
			return ca > cb
		}
		return masters[order[a]].ID < masters[order[b]].ID
	})
	target := make([]int, len(masters))
	for k, i := range order {
		target[i] = total / len(masters)
		if k < total%len(masters) {
			target[i]++
		}
	}
	var give []SlotMove // To left empty, filled below
	for _, m := range leaving {
		give = append(give, takeSlots(m, m.Slots.Count())...)
	}
	for i, m := range masters {
		if excess := m.Slots.Count() - target[i]; excess > 0 {
			give = append(give, takeSlots(m, excess)...)
		}
	}
	k := 0
	for i, m := range masters {
		for need := target[i] - m.Slots.Count(); need > 0 && k < len(give); need-- {
			give[k].To = m.ID
			k++
		}
	}
	return give[:k]
}

// takeSlots lists n slots of m to give away, its highest first, so a master keeps the
// start of its ranges and ranges stay few.
func takeSlots(m MasterSlots, n int) []SlotMove {
	var out []SlotMove
	rs := m.Slots.Normalize()
	for i := len(rs) - 1; i >= 0 && len(out) < n; i-- {
		r := rs[i]
		for s := r.End; s >= r.Start && len(out) < n; s-- {
			out = append(out, SlotMove{Slot: s, From: m.ID})
		}
	}
	return out
}

// AssignError is a refusal of AssignReceive's entries: Index is the entry (-1 for the
// list as a whole), Field the entry's field at fault ("slots", "fromReplicas" or "" for
// the entry itself). redis/ does not know where the entries come from; the caller names
// the field in its own terms.
type AssignError struct {
	Index   int
	Field   string
	Problem string
}

func (e *AssignError) Error() string {
	switch {
	case e.Index < 0:
		return "assignment entries: " + e.Problem
	case e.Field == "":
		return fmt.Sprintf("assignment entry %d: %s", e.Index, e.Problem)
	}
	return fmt.Sprintf("assignment entry %d %s: %s", e.Index, e.Field, e.Problem)
}

func assignErr(i int, field, format string, args ...any) error {
	return &AssignError{Index: i, Field: field, Problem: fmt.Sprintf(format, args...)}
}

// PlanAssign plans AssignReceive: newMasters[i] ends with assign[i].Slots slots taken
// from the masters assign[i].From names, in proportion to what they own now (largest
// remainders first). What a new master already holds counts, so a half-done plan resumes
// where it is. Entries that do not match the new masters one to one, a slot count out of
// range, a giver that is no old master holding slots (or named twice), more slots asked
// than the givers own, or a giver left with no slot at all is an *AssignError; nothing is
// planned then.
func PlanAssign(masters []MasterSlots, newMasters []string, assign []Assignment) ([]SlotMove, error) {
	if err := checkAssignCount(len(newMasters), assign); err != nil {
		return nil, err
	}
	byKey, isNew, owned := assignIndex(masters, newMasters)
	var moves []SlotMove
	for i, id := range newMasters {
		ni, ok := byKey[id]
		if !ok {
			return nil, assignErr(i, "", "new master %s is not a member", id)
		}
		givers, err := assignGivers(masters, byKey, isNew, i, assign[i].From)
		if err != nil {
			return nil, err
		}
		need := assign[i].Slots - owned[ni].Count()
		if need < 0 {
			// PlanAssign never gives a new master more than its entry: this one was a
			// master before, so the entries do not match the masters being added.
			return nil, assignErr(i, "slots", "%d slots asked, but %s already holds %d: it is no new master (one entry per master added, in order)",
				assign[i].Slots, nameOf(masters[ni]), owned[ni].Count())
		}
		if need == 0 {
			continue
		}
		have := 0
		for _, g := range givers {
			have += owned[g].Count()
		}
		if need >= have {
			return nil, assignErr(i, "slots", "%d slots asked but the fromReplicas masters own only %d, and each must keep at least one", need, have)
		}
		share := shares(need, have, givers, owned)
		for k, g := range givers {
			taken := takeSlots(MasterSlots{ID: masters[g].ID, Slots: owned[g]}, share[k])
			var tr SlotRanges
			for _, t := range taken {
				t.To = masters[ni].ID
				moves = append(moves, t)
				tr = append(tr, SlotRange{t.Slot, t.Slot})
			}
			owned[g] = owned[g].Subtract(tr.Normalize())
			owned[ni] = append(owned[ni], tr...).Normalize()
			if owned[g].Count() == 0 {
				// A master with no slot left turns itself into a replica
				// (cluster-allow-replica-migration): the cluster would lose a master.
				return nil, assignErr(i, "fromReplicas", "would take every slot of %s; a master must keep at least one", nameOf(masters[g]))
			}
		}
	}
	return moves, nil
}

// assignIndex indexes the masters by node ID and pod name, marks the new ones, and copies
// what each owns, for PlanAssign to take slots from.
func assignIndex(masters []MasterSlots, newMasters []string) (byKey map[string]int, isNew map[string]bool, owned []SlotRanges) {
	byKey = map[string]int{}
	for i, m := range masters {
		byKey[m.ID] = i
		if m.Name != "" {
			byKey[m.Name] = i
		}
	}
	isNew = map[string]bool{}
	for _, id := range newMasters {
		isNew[id] = true
	}
	owned = make([]SlotRanges, len(masters))
	for i, m := range masters {
		owned[i] = m.Slots
	}
	return byKey, isNew, owned
}

// shares splits need slots among the givers in proportion to what each owns (owned[g]
// of have in all), the remainder going to the largest remainders first.
func shares(need, have int, givers []int, owned []SlotRanges) []int {
	share := make([]int, len(givers))
	rem := make([]int, len(givers))
	sum := 0
	for k, g := range givers {
		share[k] = need * owned[g].Count() / have
		rem[k] = need * owned[g].Count() % have
		sum += share[k]
	}
	idx := make([]int, len(givers))
	for k := range idx {
		idx[k] = k
	}
	sort.SliceStable(idx, func(a, b int) bool { return rem[idx[a]] > rem[idx[b]] })
	for k := 0; sum < need; k = (k + 1) % len(idx) {
		share[idx[k]]++
		sum++
	}
	return share
}

// checkAssignCount refuses entries that are not one per new master, or whose slot count
// is out of range, before anything is planned.
func checkAssignCount(newMasters int, assign []Assignment) error {
	if len(assign) == 0 {
		return assignErr(-1, "", "AssignReceive needs one entry per master added, found none")
	}
	if len(assign) != newMasters {
		return assignErr(-1, "", "%d entries, but this scale-out adds %d masters: give exactly one entry per master added", len(assign), newMasters)
	}
	for i, a := range assign {
		if a.Slots < 1 || a.Slots > SlotCount {
			return assignErr(i, "slots", "%d is out of range: a new master takes 1 to %d slots", a.Slots, SlotCount)
		}
	}
	return nil
}

// assignGivers resolves entry i's fromReplicas to master indexes: each must be an old
// master holding slots, named once.
func assignGivers(masters []MasterSlots, byKey map[string]int, isNew map[string]bool, i int, from []string) ([]int, error) {
	var givers []int
	seen := map[int]string{}
	for _, name := range from {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		g, ok := byKey[name]
		if !ok || isNew[masters[g].ID] || len(masters[g].Slots) == 0 {
			return nil, assignErr(i, "fromReplicas", "%q is not an existing master holding slots (give node IDs or pod names of the masters before this scale-out)", name)
		}
		if first, dup := seen[g]; dup {
			return nil, assignErr(i, "fromReplicas", "%q and %q name the same master", first, name)
		}
		seen[g] = name
		givers = append(givers, g)
	}
	if len(givers) == 0 {
		return nil, assignErr(i, "fromReplicas", "names no master")
	}
	return givers, nil
}

func nameOf(m MasterSlots) string {
	if m.Name != "" {
		return m.Name
	}
	return m.ID
}
