package backup

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/rdb"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// restoreOne writes the keys of one RDB file (shardRestore.entry for each), then reads
// the file to its end. An error of the file's content is ErrIncompatible; one of the
// source or of a master is not.
func restoreOne(ctx context.Context, r io.Reader, rt routes, opt shardOptions, h *hold, p *Progress) (err error) {
	sr := &shardRestore{ctx: ctx, shardOptions: opt, routes: rt, h: h, p: p, chunks: make([]*chunk, len(rt.feeds))}
	src := &sourceReader{r: r}
	var stopped error // the callback's own error, if it stopped the scan
	_, err = rdb.Scan(src, func(e *rdb.Entry) error {
		stopped = sr.entry(e)
		return stopped
	})
	if err == nil {
		err = sr.flushGroups()
	}
	if err == nil {
		err = sr.sendAll()
	}
	if err == nil {
		// The RDB ends at its own checksum; read the object to its end so a source that
		// checks the whole object (VerifyingReader) does.
		_, err = io.Copy(io.Discard, src)
	}
	switch {
	case err == nil, stopped != nil, src.err != nil:
		return err
	default:
		return fmt.Errorf("%w: %w", ErrIncompatible, err)
	}
}

// shardOptions are how a shard's keys are written: replace as RestoreTarget.Replace;
// groupBytes what the shard's strings may hold waiting for their MSET (0: no MSET, every
// string in a SET of its own).
type shardOptions struct {
	replace    bool
	groupBytes int
}

// routes lead each slot's keys to its master's feed: slot[s] is the index in feeds of the
// master that owns slot s (an index, not the address: no map lookup per key).
type routes struct {
	slot  []int32
	feeds []*masterFeed
}

func newRoutes(owners []string, feeds map[string]*masterFeed) routes {
	rt := routes{slot: make([]int32, len(owners))}
	index := map[string]int32{}
	for s, addr := range owners {
		i, ok := index[addr]
		if !ok {
			i = int32(len(rt.feeds))
			index[addr] = i
			rt.feeds = append(rt.feeds, feeds[addr])
		}
		rt.slot[s] = i
	}
	return rt
}

// shardRestore is the restore of one RDB file: the chunk it is filling for each master.
type shardRestore struct {
	ctx context.Context
	shardOptions
	routes
	h      *hold
	p      *Progress
	chunks []*chunk // by master, as routes.feeds
	value  []byte   // a string's value, decoded (reused)
	n      int
	// nowMs is the clock an expiry is compared with, read again every 1024 keys (a read
	// per key cost 4% of the restore's CPU): a key expiring meanwhile is sent with its
	// expiry passed, and the master drops it as it would have.
	nowMs int64
	// groups are the strings waiting for an MSET (restore_group.go).
	groups *groups
}

// entry sends one key of the file to the master owning its slot.
func (sr *shardRestore) entry(e *rdb.Entry) error {
	if e.DB != 0 {
		return fmt.Errorf("%w: key %q is in database %d; a cluster has only database 0", ErrIncompatible, e.Key, e.DB)
	}
	if sr.n++; sr.n%1024 == 1 {
		// A master whose keys are rare would have them wait in their chunk for long: send
		// every chunk now and then.
		if err := sr.ctx.Err(); err != nil {
			return err
		}
		if err := sr.sendAll(); err != nil {
			return err
		}
		sr.nowMs = time.Now().UnixMilli()
	}
	if e.ExpireAtMs != 0 && e.ExpireAtMs <= sr.nowMs {
		sr.p.Expired.Add(1)
		return nil
	}
	slot := topology.KeySlotBytes(e.Key)
	m := sr.slot[slot]
	f := sr.feeds[m]
	if f.failed.Load() {
		return f.err
	}
	var v []byte // a string's value, decoded
	if e.Type == rdb.TypeString {
		var err error
		if v, err = sr.stringValue(e); err != nil {
			return err
		}
		if sr.groupBytes > 0 && e.ExpireAtMs == 0 && len(v) <= groupValue && len(e.Key) <= groupValue {
			return sr.group(slot, e.Key, v)
		}
	}
	if len(e.Value) > payloadRate {
		sr.h.cover(sr.ctx, len(e.Value))
	}
	if c := sr.chunks[m]; len(e.Value) >= bigValue && c != nil && c.keys() > 0 {
		// A big value travels alone.
		if err := sr.send(m); err != nil {
			return err
		}
	}
	c := sr.chunkFor(m)
	sr.encode(c, e, v)
	if c.full() {
		return sr.send(m)
	}
	return nil
}

// encode writes e into c (value: a string's, decoded): a string as SET key value [PXAT
// expiry], which costs a master less than half what RESTORE of the same key does (4 µs a
// call against 9 to 10 µs, measured on Redis 7.0 by bench/backup -local) and leaves the
// same key, expiry and encoding; any other type as RESTORE key expiry payload ABSTTL
// [REPLACE], the value as the backup encoded it. The cluster was found empty first (or
// Replace allows overwriting), so SET's overwriting is RESTORE … REPLACE's.
func (sr *shardRestore) encode(c *chunk, e *rdb.Entry, value []byte) {
	if e.Type != rdb.TypeString {
		c.restore(e, e.DumpPayload(e.Version), sr.replace)
		return
	}
	c.set(e, value)
}

// stringValue is e's string value, decoded into sr.value when it must be (valid until
// the next entry).
func (sr *shardRestore) stringValue(e *rdb.Entry) ([]byte, error) {
	v, err := e.StringValueBuf(sr.value)
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", e.Key, err)
	}
	if !sameArray(v, e.Value) {
		sr.value = v[:0] // a decoded value's space, kept for the next
	}
	return v, nil
}

// chunkFor is the chunk being filled for master m, a new one when there is none.
func (sr *shardRestore) chunkFor(m int32) *chunk {
	c := sr.chunks[m]
	if c == nil {
		c = sr.feeds[m].newChunk()
		sr.chunks[m] = c
	}
	return c
}

// send hands the chunk for master m to its feed.
func (sr *shardRestore) send(m int32) error {
	c := sr.chunks[m]
	sr.chunks[m] = nil
	return sr.feeds[m].send(c)
}

// sendAll sends every chunk that holds a key.
func (sr *shardRestore) sendAll() error {
	for m, c := range sr.chunks {
		if c == nil || c.keys() == 0 {
			continue
		}
		if err := sr.send(int32(m)); err != nil {
			return err
		}
	}
	return nil
}

// sameArray says whether a and b are slices of one array (a string's value as the file
// holds it is a slice of the entry's, which the parser reuses).
func sameArray(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:cap(a)][cap(a)-1] == &b[:cap(b)][cap(b)-1]
}
