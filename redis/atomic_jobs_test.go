package redis

import (
	"fmt"
	"testing"
)

// The plan's slots of a pair are cut into as few jobs of at most AtomicJobKeys keys as hold
// them, of sizes differing by one slot at most, every slot once and in slot order: no small
// remainder job that hands off right before (or after) a full one.
func TestAtomicChunksCutEvenly(t *testing.T) {
	slots := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = 16383 - i // the plan's order need not be the slots'
		}
		return s
	}
	for _, c := range []struct {
		slots       int
		keysPerSlot float64
		want        []int // slots a job
	}{
		{slots: 1366, keysPerSlot: 61, want: []int{228, 228, 228, 228, 227, 227}}, // 268 a job (16,384 keys) would leave 26
		{slots: 1365, keysPerSlot: 0, want: []int{1365}},                          // load unknown: one job
		{slots: 100, keysPerSlot: 10, want: []int{100}},                           // fits in one job
		{slots: 5, keysPerSlot: 100_000, want: []int{1, 1, 1, 1, 1}},              // a slot over the bound: a job each
		{slots: 537, keysPerSlot: 61, want: []int{179, 179, 179}},                 // not 268, 268, 1
	} {
		t.Run(fmt.Sprintf("%d slots of %v keys", c.slots, c.keysPerSlot), func(t *testing.T) {
			p := &atomicPair{from: "a", to: "b", slots: slots(c.slots)}
			got := p.chunks(slotLoad{keys: c.keysPerSlot})
			if len(got) == 1 && got[0] == p && len(c.want) == 1 && c.want[0] == c.slots {
				return // the whole pair, as planned
			}
			next := 16384 - c.slots
			var sizes []int
			for _, ch := range got {
				sizes = append(sizes, len(ch.slots))
				if ch.from != "a" || ch.to != "b" {
					t.Errorf("chunk of %s -> %s, want a -> b", ch.from, ch.to)
				}
				if float64(len(ch.slots))*c.keysPerSlot > AtomicJobKeys && len(ch.slots) > 1 {
					t.Errorf("chunk of %d slots holds %v keys, over %v", len(ch.slots), float64(len(ch.slots))*c.keysPerSlot, AtomicJobKeys)
				}
				for _, s := range ch.slots {
					if s != next {
						t.Fatalf("slot %d where %d was due: slots lost, repeated or out of order", s, next)
					}
					next++
				}
			}
			if fmt.Sprint(sizes) != fmt.Sprint(c.want) {
				t.Errorf("jobs of %v slots, want %v", sizes, c.want)
			}
		})
	}
}

// A source starts a job only while it runs fewer than AtomicJobsPerSource, and a target
// takes a new source only while fewer than AtomicSourcesPerTarget export to it (0: no limit).
func TestAtomicMayStartWithinLimits(t *testing.T) {
	defer func(j, s int) { AtomicJobsPerSource, AtomicSourcesPerTarget = j, s }(AtomicJobsPerSource, AtomicSourcesPerTarget)
	none, one := map[string]bool{}, map[string]bool{"x": true}
	for _, c := range []struct {
		jobsPerSource, sourcesPerTarget int
		exporting                       map[string]bool
		source                          string
		running                         int
		want                            bool
	}{
		{1, 1, none, "x", 0, true},
		{1, 1, one, "x", 1, false}, // one job a source: the next waits for the hand-off
		{1, 1, one, "y", 0, false}, // one source a target
		{1, 2, one, "y", 0, true},
		{0, 1, one, "x", 3, true}, // every job of a source at once
		{2, 1, one, "x", 1, true},
		{2, 0, one, "y", 2, false},
		{1, 0, one, "y", 0, true},
	} {
		AtomicJobsPerSource, AtomicSourcesPerTarget = c.jobsPerSource, c.sourcesPerTarget
		if got := mayStart(c.exporting, c.source, c.running); got != c.want {
			t.Errorf("jobs a source %d, sources a target %d, target's sources %v, source %s running %d: mayStart %v, want %v",
				c.jobsPerSource, c.sourcesPerTarget, c.exporting, c.source, c.running, got, c.want)
		}
	}
}
