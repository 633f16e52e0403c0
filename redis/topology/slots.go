package topology

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// SlotCount is the number of hash slots of a Redis Cluster.
const SlotCount = 16384

// SlotRange is an inclusive range of hash slots, Start <= End.
type SlotRange struct {
	Start int
	End   int
}

// Len is the number of slots in the range.
func (r SlotRange) Len() int { return r.End - r.Start + 1 }

// String formats the range as Redis does: "5" for a single slot, "0-5460" otherwise.
func (r SlotRange) String() string {
	if r.Start == r.End {
		return strconv.Itoa(r.Start)
	}
	return fmt.Sprintf("%d-%d", r.Start, r.End)
}

// SlotRanges is a set of slots kept as sorted, non-overlapping, non-adjacent ranges once
// normalized. The status shows it as "0-5460,10923".
type SlotRanges []SlotRange

// String joins the ranges with commas; an empty set is "".
func (s SlotRanges) String() string {
	parts := make([]string, len(s))
	for i, r := range s {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// Count is the number of slots in the set (ranges are assumed normalized).
func (s SlotRanges) Count() int {
	n := 0
	for _, r := range s {
		n += r.Len()
	}
	return n
}

// Contains reports whether slot is in the set.
func (s SlotRanges) Contains(slot int) bool {
	for _, r := range s {
		if slot >= r.Start && slot <= r.End {
			return true
		}
	}
	return false
}

// Normalize sorts the ranges and merges overlapping or adjacent ones, so two sets holding
// the same slots compare equal.
func (s SlotRanges) Normalize() SlotRanges {
	if len(s) == 0 {
		return nil
	}
	rs := append(SlotRanges(nil), s...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start < rs[j].Start })
	out := SlotRanges{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if r.Start <= last.End+1 {
			if r.End > last.End {
				last.End = r.End
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// Equal reports whether both sets hold the same slots.
func (s SlotRanges) Equal(o SlotRanges) bool {
	a, b := s.Normalize(), o.Normalize()
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Intersect returns the slots in both sets.
func (s SlotRanges) Intersect(o SlotRanges) SlotRanges {
	var out SlotRanges
	for _, a := range s.Normalize() {
		for _, b := range o.Normalize() {
			lo, hi := max(a.Start, b.Start), min(a.End, b.End)
			if lo <= hi {
				out = append(out, SlotRange{lo, hi})
			}
		}
	}
	return out.Normalize()
}

// Subtract returns the slots of s that are not in o.
func (s SlotRanges) Subtract(o SlotRanges) SlotRanges {
	cur := s.Normalize()
	for _, b := range o.Normalize() {
		var next SlotRanges
		for _, a := range cur {
			if b.End < a.Start || b.Start > a.End {
				next = append(next, a)
				continue
			}
			if a.Start < b.Start {
				next = append(next, SlotRange{a.Start, b.Start - 1})
			}
			if a.End > b.End {
				next = append(next, SlotRange{b.End + 1, a.End})
			}
		}
		cur = next
	}
	return cur
}

// AllSlots is the full range 0-16383.
func AllSlots() SlotRanges { return SlotRanges{{0, SlotCount - 1}} }

// ParseSlotRanges reads the status form "0-5460,10923"; the empty string is the empty set.
func ParseSlotRanges(text string) (SlotRanges, error) {
	if text == "" {
		return nil, nil
	}
	var out SlotRanges
	for _, part := range strings.Split(text, ",") {
		r, err := parseSlotRange(part)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out.Normalize(), nil
}

// parseSlotRange reads "5" or "0-5460" and checks the bounds.
func parseSlotRange(text string) (SlotRange, error) {
	lo, hi, isRange := strings.Cut(text, "-")
	start, err := parseSlot(lo)
	if err != nil {
		return SlotRange{}, err
	}
	end := start
	if isRange {
		if end, err = parseSlot(hi); err != nil {
			return SlotRange{}, err
		}
	}
	if end < start {
		return SlotRange{}, fmt.Errorf("failed to parse slot range %q: end before start", text)
	}
	return SlotRange{start, end}, nil
}

func parseSlot(text string) (int, error) {
	n, err := strconv.Atoi(text)
	if err != nil || n < 0 || n >= SlotCount {
		return 0, fmt.Errorf("failed to parse slot %q: want an integer in 0-%d", text, SlotCount-1)
	}
	return n, nil
}

// SplitSlots divides the 16384 slots over n masters exactly as `redis-cli --cluster
// create` does (a float cursor rounded with lround), so a cluster formed by the operator
// looks like one formed by hand: for 3 masters 0-5460, 5461-10922, 10923-16383.
func SplitSlots(n int) []SlotRange {
	if n <= 0 {
		return nil
	}
	per := float64(SlotCount) / float64(n)
	out := make([]SlotRange, 0, n)
	first, cursor := 0, 0.0
	for i := 0; i < n; i++ {
		last := int(math.Round(cursor + per - 1))
		if last > SlotCount || i == n-1 {
			last = SlotCount - 1
		}
		if last < first {
			last = first
		}
		out = append(out, SlotRange{first, last})
		first = last + 1
		cursor += per
	}
	return out
}

// KeySlot is Redis Cluster's hash slot of key: CRC16 (XMODEM) of the key, or of its hash
// tag (the part between the first "{" and the next "}", when not empty), modulo 16384.
func KeySlot(key string) int { return keySlot(key) }

// KeySlotBytes is KeySlot of a key held as bytes, without copying it to a string (a
// restore computes it for every key it reads).
func KeySlotBytes(key []byte) int { return keySlot(key) }

func keySlot[K string | []byte](key K) int {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				break
			}
		}
		break
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[i]]
	}
	return int(crc) % SlotCount
}

// crc16Table is CRC16/XMODEM (polynomial 0x1021) a byte at a time.
var crc16Table = func() (t [256]uint16) {
	for b := range t {
		crc := uint16(b) << 8
		for k := 0; k < 8; k++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return t
}()
