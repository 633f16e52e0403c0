package topology

import (
	"errors"
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
		assign       []Assignment
		index        int
		field, would string
	}{
		{[]Assignment{{Slots: 100, From: []string{"zz"}}}, 0, "fromReplicas", `"zz" is not an existing master`},
		{[]Assignment{{Slots: 6000, From: []string{"a"}}}, 0, "slots", "6000 slots asked but the fromReplicas masters own only 5461"},
		{[]Assignment{{Slots: 5461, From: []string{"a"}}}, 0, "slots", "own only 5461, and each must keep at least one"},
		{nil, -1, "", "found none"},
		{[]Assignment{{Slots: 1, From: []string{"a"}}, {Slots: 1, From: []string{"b"}}}, -1, "", "2 entries, but this scale-out adds 1 masters"},
		{[]Assignment{{Slots: 0, From: []string{"a"}}}, 0, "slots", "0 is out of range"},
		{[]Assignment{{Slots: -5, From: []string{"a"}}}, 0, "slots", "-5 is out of range"},
		{[]Assignment{{Slots: 16385, From: []string{"a"}}}, 0, "slots", "16385 is out of range"},
		{[]Assignment{{Slots: 10, From: []string{"a", "pod-a"}}}, 0, "fromReplicas", `"a" and "pod-a" name the same master`},
		{[]Assignment{{Slots: 10, From: []string{" ", ""}}}, 0, "fromReplicas", "names no master"},
		{[]Assignment{{Slots: 10, From: []string{"d"}}}, 0, "fromReplicas", `"d" is not an existing master`},
	} {
		_, err := PlanAssign(masters, []string{"d"}, tt.assign)
		var ae *AssignError
		if !errors.As(err, &ae) || ae.Index != tt.index || ae.Field != tt.field || !strings.Contains(ae.Problem, tt.would) {
			t.Errorf("%v: got %#v (%v), want entry %d %s: %q", tt.assign, ae, err, tt.index, tt.field, tt.would)
		}
	}
	// A giver whose proportional share would be all it owns is refused, not emptied.
	tiny := []MasterSlots{ms("a", SlotRange{0, 0}), ms("b", SlotRange{1, 16383}), ms("d")}
	if _, err := PlanAssign(tiny, []string{"d"}, []Assignment{{Slots: 16000, From: []string{"a", "b"}}}); err == nil {
		t.Error("a giver was emptied")
	}
}

// FuzzPlanAssign: any entries give either an *AssignError or moves from owners that leave
// every new master with exactly its slots and every giver with at least one; never a panic.
func FuzzPlanAssign(f *testing.F) {
	f.Add(3, 1, 1000, "a,b", 0, "")
	f.Add(3, 5, 1, "a", -3, "a,a")
	f.Add(4, 2, 20000, "pod-a,zz", 16384, " ")
	f.Fuzz(func(t *testing.T, old, entries, slots int, from string, slots2 int, from2 string) {
		old, entries = 1+abs(old)%6, abs(entries)%8
		var masters []MasterSlots
		per := SlotCount / old
		for i := 0; i < old; i++ {
			end := (i+1)*per - 1
			if i == old-1 {
				end = SlotCount - 1
			}
			masters = append(masters, ms(string(rune('a'+i)), SlotRange{i * per, end}))
		}
		newIDs := []string{"x", "y"}
		for _, id := range newIDs {
			masters = append(masters, ms(id))
		}
		var assign []Assignment
		for i := 0; i < entries; i++ {
			a := Assignment{Slots: slots, From: strings.Split(from, ",")}
			if i%2 == 1 {
				a = Assignment{Slots: slots2, From: strings.Split(from2, ",")}
			}
			assign = append(assign, a)
		}
		moves, err := PlanAssign(masters, newIDs, assign)
		if err != nil {
			var ae *AssignError
			if !errors.As(err, &ae) || ae.Index >= len(assign) {
				t.Fatalf("error %v is no *AssignError of an entry", err)
			}
			return
		}
		count := apply(t, masters, moves)
		for i, id := range newIDs {
			if count[id] != assign[i].Slots {
				t.Fatalf("%s holds %d slots, entry asks %d", id, count[id], assign[i].Slots)
			}
		}
		for _, m := range masters[:old] {
			if count[m.ID] == 0 {
				t.Fatalf("giver %s emptied", m.ID)
			}
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
