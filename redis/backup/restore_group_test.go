package backup

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestGroupsWriteOneMSETPerSlot: keys of a slot wait in its group, which says it is full at
// msetKeys keys; written, the group is one MSET of every key and value (RESP), one reply
// for all of them, each key named and counted; a group left short is written alike, and
// groups of other slots are left alone.
func TestGroupsWriteOneMSETPerSlot(t *testing.T) {
	g := newGroups(16384, maxGroupBytes)
	arena := cap(g.arena)
	var want strings.Builder
	fmt.Fprintf(&want, "*%d\r\n$4\r\nMSET\r\n", 1+2*msetKeys)
	for i := 0; i < msetKeys; i++ {
		k, v := fmt.Sprint("k", i), strings.Repeat("v", i)
		fmt.Fprintf(&want, "$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v)
		if full := g.add(5, []byte(k), []byte(v)); full != (i == msetKeys-1) {
			t.Fatalf("after %d keys: full %v", i+1, full)
		}
		if i == 3 {
			g.add(7, []byte("other"), nil)
		}
	}
	c := &chunk{}
	g.write(5, c)
	if string(c.buf) != want.String() {
		t.Fatalf("MSET written:\n%q\nwant\n%q", c.buf, want.String())
	}
	if !slices.Equal(c.cmds, []int{msetKeys}) || c.keys() != msetKeys || c.name(msetKeys-1) != fmt.Sprint("k", msetKeys-1) ||
		c.bytes[msetKeys-1] != len(fmt.Sprint("k", msetKeys-1))+msetKeys-1 {
		t.Fatalf("chunk: cmds %v, %d keys, last %q counting %d", c.cmds, c.keys(), c.name(c.keys()-1), c.bytes[c.keys()-1])
	}
	if g.count[5] != 0 || g.first[5] != -1 || g.count[7] != 1 {
		t.Fatalf("after writing slot 5: counts %d, %d", g.count[5], g.count[7])
	}
	c.added([]byte("single"), 1) // a SET after it: its own reply
	g.write(7, c)
	if !strings.HasSuffix(string(c.buf), "*3\r\n$4\r\nMSET\r\n$5\r\nother\r\n$0\r\n\r\n") || !slices.Equal(c.cmds, []int{msetKeys, 1, 1}) ||
		c.command(msetKeys+1, 1) != `"other"` || c.command(0, msetKeys) != fmt.Sprintf(`"k0" (and %d more keys of its slot, in one MSET)`, msetKeys-1) {
		t.Fatalf("second MSET: %q, cmds %v", c.buf, c.cmds)
	}
	g.reset()
	if len(g.arena) != 0 || len(g.keys) != 0 || g.full() || cap(g.arena) != arena {
		t.Fatalf("reset left keys, or the arena grew from %d to %d", arena, cap(g.arena))
	}
	for shards, want := range map[int]int{1: maxGroupBytes, 7: maxGroupBytes, 50: groupsBudget/50 - slotLists, 200: 0} {
		if got := groupBytesFor(shards); got != want {
			t.Errorf("groupBytesFor(%d) = %d, want %d", shards, got, want)
		}
	}
}
