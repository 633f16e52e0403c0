package redis

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func ms(id string, rs ...SlotRange) MasterSlots {
	return MasterSlots{ID: id, Name: "pod-" + id, Slots: rs}
}

// apply moves the slots and returns each master's count; it fails on a move from a master
// that does not own the slot.
func apply(t *testing.T, masters []MasterSlots, moves []SlotMove) map[string]int {
	t.Helper()
	own := map[int]string{}
	for _, m := range masters {
		for _, r := range m.Slots {
			for s := r.Start; s <= r.End; s++ {
				own[s] = m.ID
			}
		}
	}
	for _, mv := range moves {
		if own[mv.Slot] != mv.From {
			t.Fatalf("slot %d moved from %s but owned by %s", mv.Slot, mv.From, own[mv.Slot])
		}
		own[mv.Slot] = mv.To
	}
	count := map[string]int{}
	for _, id := range own {
		count[id]++
	}
	return count
}

func TestPlanRebalance(t *testing.T) {
	three := []MasterSlots{ms("a", SlotRange{0, 5460}), ms("b", SlotRange{5461, 10922}), ms("c", SlotRange{10923, 16383})}
	tests := []struct {
		name            string
		masters, leave  []MasterSlots
		wantMoves       int
		wantMin, wantMx int
	}{
		{"3 to 4", append(append([]MasterSlots{}, three...), ms("d")), nil, 4096, 4096, 4096},
		{"3 to 5", append(append([]MasterSlots{}, three...), ms("d"), ms("e")), nil, 3277 + 3276, 3276, 3277},
		{"balanced", three, nil, 0, 5461, 5462},
		{"4 to 3", []MasterSlots{ms("a", SlotRange{0, 4095}), ms("b", SlotRange{4096, 8191}), ms("c", SlotRange{8192, 12287})},
			[]MasterSlots{ms("d", SlotRange{12288, 16383})}, 4096, 5461, 5462},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moves := PlanRebalance(tt.masters, tt.leave)
			if len(moves) != tt.wantMoves {
				t.Fatalf("got %d moves, want %d", len(moves), tt.wantMoves)
			}
			count := apply(t, append(append([]MasterSlots{}, tt.masters...), tt.leave...), moves)
			for _, m := range tt.masters {
				if c := count[m.ID]; c < tt.wantMin || c > tt.wantMx {
					t.Errorf("%s ends with %d slots, want %d..%d", m.ID, c, tt.wantMin, tt.wantMx)
				}
			}
			for _, m := range tt.leave {
				if count[m.ID] != 0 {
					t.Errorf("leaving %s keeps %d slots", m.ID, count[m.ID])
				}
			}
		})
	}
}

// FuzzPlanRebalance: any split of the slots over 1-8 masters ends even (± 1), with the
// fewest moves (the sum of the excesses over the target), and replanning gives nothing.
func FuzzPlanRebalance(f *testing.F) {
	f.Add(uint64(1), uint8(3), uint8(1))
	f.Add(uint64(7), uint8(5), uint8(0))
	f.Fuzz(func(t *testing.T, seed uint64, n, leaving uint8) {
		k := int(n%8) + 1
		l := int(leaving % 3)
		r := rand.New(rand.NewPCG(seed, seed))
		all := make([]MasterSlots, k+l)
		for i := range all {
			all[i].ID = fmt.Sprintf("n%d", i)
		}
		for s := 0; s < SlotCount; s++ {
			i := r.IntN(k + l)
			all[i].Slots = append(all[i].Slots, SlotRange{s, s})
		}
		for i := range all {
			all[i].Slots = all[i].Slots.Normalize()
		}
		masters, leave := all[:k], all[k:]
		moves := PlanRebalance(masters, leave)
		count := apply(t, all, moves)
		lo, hi := SlotCount/k, (SlotCount+k-1)/k
		for _, m := range masters {
			if c := count[m.ID]; c < lo || c > hi {
				t.Fatalf("%s ends with %d, want %d..%d", m.ID, c, lo, hi)
			}
		}
		after := make([]MasterSlots, k)
		for i, m := range masters {
			after[i] = MasterSlots{ID: m.ID}
		}
		own := map[string]SlotRanges{}
		for _, m := range all {
			own[m.ID] = m.Slots
		}
		for _, mv := range moves {
			own[mv.From] = own[mv.From].Subtract(SlotRanges{{mv.Slot, mv.Slot}})
			own[mv.To] = append(own[mv.To], SlotRange{mv.Slot, mv.Slot}).Normalize()
		}
		for i := range after {
			after[i].Slots = own[after[i].ID]
		}
		if again := PlanRebalance(after, nil); len(again) != 0 {
			t.Fatalf("replanning a balanced cluster moves %d slots", len(again))
		}
	})
}

func TestPlanAssign(t *testing.T) {
	masters := []MasterSlots{ms("a", SlotRange{0, 5460}), ms("b", SlotRange{5461, 10922}), ms("c", SlotRange{10923, 16383}), ms("d")}
	moves, err := PlanAssign(masters, []string{"d"}, []Assignment{{Slots: 1000, From: []string{"a", "pod-b"}}})
	if err != nil {
		t.Fatal(err)
	}
	count := apply(t, masters, moves)
	if count["d"] != 1000 || count["a"] != 5461-500 || count["b"] != 5462-500 || count["c"] != 5461 {
		t.Fatalf("counts %v", count)
	}
	// Resuming with d already holding some of them plans only the rest.
	half := []MasterSlots{ms("a", SlotRange{0, 4960}), ms("b", SlotRange{5461, 10922}), ms("c", SlotRange{10923, 16383}), ms("d", SlotRange{4961, 5460})}
	moves, err = PlanAssign(half, []string{"d"}, []Assignment{{Slots: 1000, From: []string{"a", "b"}}})
	if err != nil || len(moves) != 500 {
		t.Fatalf("resume: %d moves, %v", len(moves), err)
	}
	for _, tt := range []struct {
		assign []Assignment
		want   string
	}{
		{[]Assignment{{Slots: 100, From: []string{"zz"}}}, `spec.updateStrategy.assignStrategies[0].fromReplicas: "zz"`},
		{[]Assignment{{Slots: 6000, From: []string{"a"}}}, "spec.updateStrategy.assignStrategies[0].slots: 6000 slots asked"},
		{nil, "spec.updateStrategy.assignStrategies: 1 new masters"},
	} {
		if _, err := PlanAssign(masters, []string{"d"}, tt.assign); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want %q", err, tt.want)
		}
	}
}
