package redis

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

// PlanAssign plans AssignReceive: newMasters[i] ends with assign[i].Slots slots taken
// from the masters assign[i].From names, in proportion to what they own now (largest
// remainders first). What a new master already holds counts, so a half-done plan resumes
// where it is. A giver that is no master holding slots, or more slots asked than the
// givers own, is a refusal naming spec.updateStrategy.assignStrategies[i]; nothing is
// planned then.
func PlanAssign(masters []MasterSlots, newMasters []string, assign []Assignment) ([]SlotMove, error) {
	if len(assign) < len(newMasters) {
		return nil, fmt.Errorf("spec.updateStrategy.assignStrategies: %d new masters need %d entries (type AssignReceive), found %d",
			len(newMasters), len(newMasters), len(assign))
	}
	byKey := map[string]int{}
	for i, m := range masters {
		byKey[m.ID] = i
		if m.Name != "" {
			byKey[m.Name] = i
		}
	}
	isNew := map[string]bool{}
	for _, id := range newMasters {
		isNew[id] = true
	}
	owned := make([]SlotRanges, len(masters))
	for i, m := range masters {
		owned[i] = m.Slots
	}
	var moves []SlotMove
	for i, id := range newMasters {
		field := fmt.Sprintf("spec.updateStrategy.assignStrategies[%d]", i)
		ni, ok := byKey[id]
		if !ok {
			return nil, fmt.Errorf("%s: new master %s is not a member", field, id)
		}
		var givers []int
		seen := map[int]bool{}
		for _, name := range assign[i].From {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			g, ok := byKey[name]
			if !ok || isNew[masters[g].ID] || len(masters[g].Slots) == 0 {
				return nil, fmt.Errorf("%s.fromReplicas: %q is not a master holding slots (give node IDs or pod names of existing masters)", field, name)
			}
			if !seen[g] {
				seen[g] = true
				givers = append(givers, g)
			}
		}
		if len(givers) == 0 {
			return nil, fmt.Errorf("%s.fromReplicas: names no master", field)
		}
		need := assign[i].Slots - owned[ni].Count()
		if need <= 0 {
			continue
		}
		have := 0
		for _, g := range givers {
			have += owned[g].Count()
		}
		if need > have {
			return nil, fmt.Errorf("%s.slots: %d slots asked but the fromReplicas masters own only %d", field, need, have)
		}
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
		}
	}
	return moves, nil
}
