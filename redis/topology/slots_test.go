package topology

import (
	"testing"
)

func TestSplitSlotsMatchesRedisCli(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{1, "0-16383"},
		{3, "0-5460|5461-10922|10923-16383"},
		{4, "0-4095|4096-8191|8192-12287|12288-16383"},
		{5, "0-3276|3277-6553|6554-9829|9830-13106|13107-16383"},
		{6, "0-2730|2731-5460|5461-8191|8192-10922|10923-13652|13653-16383"},
	}
	for _, tt := range tests {
		got := ""
		total := 0
		for i, r := range SplitSlots(tt.n) {
			if i > 0 {
				got += "|"
			}
			got += r.String()
			total += r.Len()
		}
		if got != tt.want {
			t.Errorf("SplitSlots(%d) = %s, want %s", tt.n, got, tt.want)
		}
		if total != SlotCount {
			t.Errorf("SplitSlots(%d) covers %d slots", tt.n, total)
		}
	}
}

func TestSlotRangesStringAndNormalize(t *testing.T) {
	tests := []struct {
		in   SlotRanges
		want string
	}{
		{nil, ""},
		{SlotRanges{{0, 5460}}, "0-5460"},
		{SlotRanges{{10923, 10923}, {0, 5460}}, "0-5460,10923"},
		{SlotRanges{{0, 10}, {11, 20}}, "0-20"},
		{SlotRanges{{5, 10}, {0, 7}}, "0-10"},
	}
	for _, tt := range tests {
		if got := tt.in.Normalize().String(); got != tt.want {
			t.Errorf("%v.Normalize().String() = %q, want %q", tt.in, got, tt.want)
		}
		back, err := ParseSlotRanges(tt.want)
		if err != nil || !back.Equal(tt.in) {
			t.Errorf("ParseSlotRanges(%q) = %v, %v; want %v", tt.want, back, err, tt.in)
		}
	}
}

func TestSlotRangesSetOperations(t *testing.T) {
	all := AllSlots()
	held := SlotRanges{{0, 5460}, {10923, 16383}}
	if got := all.Subtract(held).String(); got != "5461-10922" {
		t.Errorf("Subtract = %s", got)
	}
	if got := held.Intersect(SlotRanges{{5000, 11000}}).String(); got != "5000-5460,10923-11000" {
		t.Errorf("Intersect = %s", got)
	}
	if held.Count() != 5461+5461 {
		t.Errorf("Count = %d", held.Count())
	}
	if !held.Contains(0) || held.Contains(5461) {
		t.Errorf("Contains is wrong")
	}
}

func TestParseSlotRangesRejectsBadInput(t *testing.T) {
	for _, in := range []string{"-1", "16384", "5-3", "a", "1,", "1--2"} {
		if _, err := ParseSlotRanges(in); err == nil {
			t.Errorf("ParseSlotRanges(%q) accepted bad input", in)
		}
	}
}

// FuzzSlotRanges checks that formatting and parsing are inverse and that Subtract and
// Intersect partition a set.
func FuzzSlotRanges(f *testing.F) {
	f.Add("0-5460,10923")
	f.Add("0-16383")
	f.Add("5,7,9-20")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseSlotRanges(text)
		if err != nil {
			return
		}
		back, err := ParseSlotRanges(s.String())
		if err != nil || !back.Equal(s) {
			t.Fatalf("round trip of %q: %v, %v", text, back, err)
		}
		other := SlotRanges{{100, 9000}}
		if s.Subtract(other).Count()+s.Intersect(other).Count() != s.Count() {
			t.Fatalf("subtract + intersect do not partition %q", text)
		}
	})
}

func TestKeySlot(t *testing.T) {
	// Values from CLUSTER KEYSLOT and the Redis Cluster specification.
	for key, want := range map[string]int{
		"123456789": 12739, "foo": 12182, "{user1000}.following": KeySlot("user1000"),
		"foo{}{bar}": KeySlot("foo{}{bar}"), "{bar": KeySlot("{bar"),
	} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
	if KeySlot("foo{}{bar}") == KeySlot("bar") {
		t.Error("an empty hash tag must hash the whole key")
	}
}
