package backup

import "strconv"

// Grouping strings into MSET. A master sets a string for less CPU in an MSET of several
// keys than in a SET of its own: the command's dispatch, cluster check and reply are paid
// once for all of them (64-byte values on Redis 7.0: 0.34 to 0.38 s of a master's CPU for
// 333,333 keys in MSETs of 4 to 64, against 0.40 to 0.43 s in SETs, 5 to 21% less). An
// MSET takes keys of one slot only and sets no expiry, so a string without an expiry whose
// key and value are each at most groupValue bytes waits in its slot's group; the group
// goes as one MSET once it holds msetKeys keys, or once the shard's groups hold the
// shard's share of groupsBudget (every group goes then: with a shard of Redis 7.0, in
// hash-table order, that is most of them), or at the shard's end. The order of the keys
// does not matter: a backup holds each key once.
const (
	msetKeys   = 32
	groupValue = 512
	// groupsBudget is what the groups of all the shards restored at once may hold: each
	// shard's slot lists (slotLists) and an equal share of the rest for its arena and
	// index, at most maxGroupBytes; below minGroupBytes a share is not worth it, and the
	// shards' strings go as SETs (more than some 110 shards at once).
	groupsBudget  = 32 << 20
	slotLists     = 3 * 4 * 16384 // first, last and count, int32 each
	minGroupBytes = 128 << 10
	maxGroupBytes = 4 << 20
	// keyRecord is what a key waiting costs beside its bytes in the arena (groupedKey).
	keyRecord = 24
	// maxGrouped is the most one key and its value take in the arena.
	maxGrouped = 2*groupValue + 2*len("$512\r\n\r\n")
)

// groupBytesFor is each shard's share of groupsBudget when shards are restored at once: 0
// when that is too little to group by.
func groupBytesFor(shards int) int {
	share := groupsBudget/max(1, shards) - slotLists
	if share < minGroupBytes {
		return 0
	}
	return min(maxGroupBytes, share)
}

// groups are the strings of one shard waiting for their MSET: each key and value as RESP
// bulk strings in one arena, one after another, and for every slot a list of its keys
// there. The arena is emptied only once every group went (the limit reached, or the
// source's end): nothing is allocated per key or per group.
type groups struct {
	limit int // what arena and keys may hold (groupBytesFor)
	arena []byte
	keys  []groupedKey
	// first and last are each slot's list (indexes in keys, -1 when empty), count its
	// length.
	first, last, count []int32
}

// groupedKey is a key waiting in arena[at:end] (its name arena[name:name+nameLen]).
type groupedKey struct {
	at, end, name, nameLen int32
	// counted is what the key counts in Progress; next the slot's next key, -1 none.
	counted, next int32
}

func newGroups(slots, limit int) *groups {
	g := &groups{limit: limit, arena: make([]byte, 0, limit+maxGrouped),
		first: make([]int32, slots), last: make([]int32, slots), count: make([]int32, slots)}
	for i := range g.first {
		g.first[i], g.last[i] = -1, -1
	}
	return g
}

// add puts key and value in slot's group; it says whether the group is full.
func (g *groups) add(slot int, key, value []byte) bool {
	at := len(g.arena)
	g.arena = appendHeader(g.arena, '$', len(key))
	name := len(g.arena)
	g.arena = append(append(g.arena, key...), '\r', '\n')
	g.arena = append(append(appendHeader(g.arena, '$', len(value)), value...), '\r', '\n')
	i := int32(len(g.keys))
	g.keys = append(g.keys, groupedKey{at: int32(at), end: int32(len(g.arena)), name: int32(name), nameLen: int32(len(key)),
		counted: int32(len(value)), next: -1})
	if g.last[slot] < 0 {
		g.first[slot] = i
	} else {
		g.keys[g.last[slot]].next = i
	}
	g.last[slot] = i
	g.count[slot]++
	return g.count[slot] >= msetKeys
}

// full says whether the groups hold their limit.
func (g *groups) full() bool { return len(g.arena)+keyRecord*len(g.keys) >= g.limit }

// write writes slot's group into c as one MSET and empties it.
func (g *groups) write(slot int, c *chunk) {
	c.msetHeader(int(g.count[slot]))
	for i := g.first[slot]; i >= 0; i = g.keys[i].next {
		k := &g.keys[i]
		c.write(g.arena[k.at:k.end])
		c.addKey(g.arena[k.name:k.name+k.nameLen], int(k.counted))
	}
	c.cmds = append(c.cmds, int(g.count[slot]))
	g.first[slot], g.last[slot], g.count[slot] = -1, -1, 0
}

// reset empties the arena, once every group was written.
func (g *groups) reset() {
	g.arena, g.keys = g.arena[:0], g.keys[:0]
}

// appendHeader appends a RESP header: kind ('$' a bulk string, '*' an array) and n.
func appendHeader(b []byte, kind byte, n int) []byte {
	b = append(b, kind)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// group puts a string without an expiry in its slot's group, and sends the group once
// full, every group once they hold the shard's share.
func (sr *shardRestore) group(s int, key, value []byte) error {
	if sr.groups == nil {
		sr.groups = newGroups(len(sr.slot), sr.groupBytes)
	}
	if sr.groups.add(s, key, value) {
		if err := sr.flushGroup(s); err != nil {
			return err
		}
	}
	if sr.groups.full() {
		return sr.flushGroups()
	}
	return nil
}

// flushGroup writes slot s's group as an MSET into its master's chunk.
func (sr *shardRestore) flushGroup(s int) error {
	m := sr.slot[s]
	c := sr.chunkFor(m)
	sr.groups.write(s, c)
	if c.full() {
		return sr.send(m)
	}
	return nil
}

// flushGroups writes every group, and empties the arena.
func (sr *shardRestore) flushGroups() error {
	if sr.groups == nil {
		return nil
	}
	for s, n := range sr.groups.count {
		if n == 0 {
			continue
		}
		if err := sr.flushGroup(s); err != nil {
			return err
		}
	}
	sr.groups.reset()
	return nil
}
