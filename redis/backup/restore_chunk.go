package backup

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/hc-middleware/redis-cluster-operator/redis/rdb"
)

// chunk is commands a source encoded for one master, sent in one write, and the keys they
// write (a reply for each command: one for an MSET's keys).
type chunk struct {
	buf []byte
	// big is a value of at least bigValue bytes, sent after buf without being copied into
	// it; after is what follows it. A chunk holds at most one.
	big, after []byte
	// names are the keys end to end (only read to name the key a master refuses), ends
	// where each ends; bytes what each counts in Progress; cmds how many keys each
	// command writes, in order (one reply each: an MSET writes many).
	names []byte
	ends  []int
	bytes []int
	cmds  []int
	num   [20]byte // an expiry's digits
	hdr   [24]byte // a bulk string's header
}

// Chunk sizes: a source hands a chunk to its master's feed once it holds chunkKeys keys or
// chunkBytes of commands; a value of bigValue bytes or more travels in a chunk of its own,
// by reference.
const (
	chunkKeys  = 512
	chunkBytes = 256 << 10
	bigValue   = 1 << 20
)

func (c *chunk) keys() int { return len(c.ends) }

func (c *chunk) full() bool {
	return c.big != nil || len(c.ends) >= chunkKeys || len(c.buf) >= chunkBytes
}

// size is the bytes the chunk sends.
func (c *chunk) size() int { return len(c.buf) + len(c.big) + len(c.after) }

func (c *chunk) name(i int) string {
	start := 0
	if i > 0 {
		start = c.ends[i-1]
	}
	return string(c.names[start:c.ends[i]])
}

// command names the command that writes n keys from key i: the key, or an MSET's first
// key and how many more it writes.
func (c *chunk) command(i, n int) string {
	if n == 1 {
		return strconv.Quote(c.name(i))
	}
	return fmt.Sprintf("%q (and %d more keys of its slot, in one MSET)", c.name(i), n-1)
}

// reset empties c for reuse; a big buffer is let go rather than kept.
func (c *chunk) reset() {
	if cap(c.buf) > 2*chunkBytes {
		c.buf = nil
	}
	c.buf, c.big, c.after = c.buf[:0], nil, nil
	c.names, c.ends, c.bytes, c.cmds = c.names[:0], c.ends[:0], c.bytes[:0], c.cmds[:0]
}

// write appends b to the commands: after a big value, to what follows it.
func (c *chunk) write(b []byte) {
	if c.big != nil {
		c.after = append(c.after, b...)
	} else {
		c.buf = append(c.buf, b...)
	}
}

func (c *chunk) writeString(s string) {
	if c.big != nil {
		c.after = append(c.after, s...)
	} else {
		c.buf = append(c.buf, s...)
	}
}

// bulk writes b as a RESP bulk string; a big value by reference, copied first unless
// owned (not reused by its maker once handed over).
func (c *chunk) bulk(b []byte, owned bool) {
	c.write(appendHeader(c.hdr[:0], '$', len(b)))
	if len(b) >= bigValue && c.big == nil {
		if !owned {
			b = bytes.Clone(b)
		}
		c.big = b
	} else {
		c.write(b)
	}
	c.writeString("\r\n")
}

// set writes SET key value [PXAT expiry]; value is reused by the caller.
func (c *chunk) set(e *rdb.Entry, value []byte) {
	if e.ExpireAtMs != 0 {
		c.writeString("*5\r\n$3\r\nSET\r\n")
	} else {
		c.writeString("*3\r\n$3\r\nSET\r\n")
	}
	c.bulk(e.Key, false)
	c.bulk(value, false)
	if e.ExpireAtMs != 0 {
		c.writeString("$4\r\nPXAT\r\n")
		c.bulk(strconv.AppendInt(c.num[:0], e.ExpireAtMs, 10), false)
	}
	c.added(e.Key, len(value))
}

// restore writes RESTORE key expiry payload ABSTTL [REPLACE]; payload is owned.
func (c *chunk) restore(e *rdb.Entry, payload []byte, replace bool) {
	if replace {
		c.writeString("*6\r\n$7\r\nRESTORE\r\n")
	} else {
		c.writeString("*5\r\n$7\r\nRESTORE\r\n")
	}
	c.bulk(e.Key, false)
	c.bulk(strconv.AppendInt(c.num[:0], e.ExpireAtMs, 10), false)
	c.bulk(payload, true)
	c.writeString("$6\r\nABSTTL\r\n")
	if replace {
		c.writeString("$7\r\nREPLACE\r\n")
	}
	c.added(e.Key, len(payload))
}

// msetHeader starts an MSET of n keys; its keys and values follow (groups.write).
func (c *chunk) msetHeader(n int) {
	c.write(append(appendHeader(c.hdr[:0], '*', 1+2*n), "$4\r\nMSET\r\n"...))
}

// addKey records a key the chunk writes (its command recorded apart, in cmds).
func (c *chunk) addKey(key []byte, size int) {
	c.names = append(c.names, key...)
	c.ends = append(c.ends, len(c.names))
	c.bytes = append(c.bytes, size+len(key))
}

// added records a key written by a command of its own.
func (c *chunk) added(key []byte, size int) {
	c.addKey(key, size)
	c.cmds = append(c.cmds, 1)
}
