package topology

import (
	"testing"
	"time"
)

// A key's MIGRATE timeout grows with its size, from the floor up to MaxKeyTimeout, and
// never below the floor even when the floor is above the cap.
func TestBigKeyTimeout(t *testing.T) {
	floor := 2500 * time.Millisecond
	for _, c := range []struct {
		usage int64
		floor time.Duration
		want  time.Duration
	}{
		{0, floor, floor},
		{BigKeyRate, floor, floor},                   // 1 s of RESTORE: the floor
		{10 * BigKeyRate, floor, 10 * time.Second},   // 10 s
		{100 * BigKeyRate, floor, MaxKeyTimeout},     // capped
		{100 * BigKeyRate, time.Minute, time.Minute}, // a floor above the cap wins
	} {
		if got := BigKeyTimeout(c.usage, c.floor); got != c.want {
			t.Errorf("BigKeyTimeout(%d, %v) = %v, want %v", c.usage, c.floor, got, c.want)
		}
	}
}
