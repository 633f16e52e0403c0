package backup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// mixedKey is a key of the mixed load: its type, its value as GET (strings) or DUMP
// (others) gives it, and its absolute expiry (-1: none).
type mixedKey struct {
	typ, value string
	expireAt   int64
}

// mixedValue is string i of the mixed load, in each of the encodings the RDB writes: an
// integer (int-encoded), a short string, a long compressible one (LZF), an
// incompressible one, and every 20,000th a big one (over bigValue: it travels alone, by
// reference), compressible or not.
func mixedValue(i int, rnd *rand.Rand) string {
	switch {
	case i%20000 == 7:
		return strings.Repeat(fmt.Sprint("big-", i, "-"), 300000) // LZF, decoded past bigValue
	case i%20000 == 11:
		b := make([]byte, 3*bigValue/2)
		rnd.Read(b)
		return string(b)
	}
	switch i % 5 {
	case 0:
		return fmt.Sprint(i - 50000)
	case 1:
		return fmt.Sprint("v", i)
	case 2:
		return strings.Repeat(fmt.Sprint("compressible-", i%97, "-"), 8)
	case 3:
		b := make([]byte, 40+i%200)
		rnd.Read(b)
		return string(b)
	}
	return ""
}

// loadMixed writes n strings (mixedValue; a third with an expiry) and n/100 keys of each
// other type (lists, hashes, sets, sorted sets, a third with an expiry), plus a sorted set
// whose payload is over bigValue, pipelined, and returns what each key holds.
func loadMixed(t *testing.T, ctx context.Context, cc *router, n int) map[string]mixedKey {
	t.Helper()
	rnd := rand.New(rand.NewSource(1))
	expireBase := time.Now().Add(time.Hour).UnixMilli()
	var cmds [][]any
	for i := 0; i < n; i++ {
		k := fmt.Sprint("s:", i)
		if i%3 == 0 {
			cmds = append(cmds, []any{"set", k, mixedValue(i, rnd), "pxat", expireBase + int64(i)})
		} else {
			cmds = append(cmds, []any{"set", k, mixedValue(i, rnd)})
		}
	}
	for i := 0; i < n/100; i++ {
		cmds = append(cmds, []any{"rpush", fmt.Sprint("l:", i), "a", i, "c"},
			[]any{"hset", fmt.Sprint("h:", i), "f", i, "g", strings.Repeat("w", i%300)},
			[]any{"sadd", fmt.Sprint("e:", i), "x", i, "y"},
			[]any{"zadd", fmt.Sprint("z:", i), 1, "a", float64(i) / 3, "b"})
		if i%3 == 0 {
			cmds = append(cmds, []any{"pexpireat", fmt.Sprint("h:", i), expireBase + int64(i)},
				[]any{"pexpireat", fmt.Sprint("z:", i), expireBase + int64(i)})
		}
	}
	pipeline(t, ctx, cc, cmds, func(string, goredis.Cmder) {})
	for start := 0; start < 100000; start += 1000 {
		args := []any{"zadd", "zbig"}
		for i := start; i < start+1000; i++ {
			args = append(args, i, fmt.Sprint("member-", i))
		}
		pipeline(t, ctx, cc, [][]any{args}, func(string, goredis.Cmder) {})
	}
	return readMixed(t, ctx, cc, keysOf(n))
}

func keysOf(n int) []string {
	keys := []string{"zbig"}
	for i := 0; i < n; i++ {
		keys = append(keys, fmt.Sprint("s:", i))
	}
	for i := 0; i < n/100; i++ {
		keys = append(keys, fmt.Sprint("l:", i), fmt.Sprint("h:", i), fmt.Sprint("e:", i), fmt.Sprint("z:", i))
	}
	return keys
}

// readMixed reads each key's type, value (GET for a string, else DUMP) and PEXPIRETIME.
func readMixed(t *testing.T, ctx context.Context, cc *router, keys []string) map[string]mixedKey {
	t.Helper()
	out := make(map[string]mixedKey, len(keys))
	var cmds [][]any
	for _, k := range keys {
		cmds = append(cmds, []any{"type", k}, []any{"pexpiretime", k})
	}
	pipeline(t, ctx, cc, cmds, func(k string, c goredis.Cmder) {
		m := out[k]
		switch v := c.(*goredis.Cmd).Val().(type) {
		case string:
			m.typ = v
		case int64:
			m.expireAt = max(v, -1)
		}
		out[k] = m
	})
	cmds = cmds[:0]
	for _, k := range keys {
		if out[k].typ == "string" {
			cmds = append(cmds, []any{"get", k})
		} else {
			cmds = append(cmds, []any{"dump", k})
		}
	}
	pipeline(t, ctx, cc, cmds, func(k string, c goredis.Cmder) {
		m := out[k]
		m.value, _ = c.(*goredis.Cmd).Val().(string)
		out[k] = m
	})
	return out
}

// pipeline sends cmds (args[1] the key) to their masters, 1,000 a round trip, and hands
// each reply to got.
func pipeline(t *testing.T, ctx context.Context, cc *router, cmds [][]any, got func(key string, c goredis.Cmder)) {
	t.Helper()
	byMaster := map[*goredis.Client][][]any{}
	for _, c := range cmds {
		m := cc.c(c[1].(string))
		byMaster[m] = append(byMaster[m], c)
	}
	for m, cmds := range byMaster {
		for start := 0; start < len(cmds); start += 1000 {
			p := m.Pipeline()
			var sent []goredis.Cmder
			for _, c := range cmds[start:min(len(cmds), start+1000)] {
				sent = append(sent, p.Do(ctx, c...))
			}
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			for i, c := range sent {
				got(cmds[start+i][1].(string), c)
			}
		}
	}
}

// TestRestoreMixedKeysIntoFewerMasters restores 120,000 strings in every encoding (big
// ones included, over bigValue) and 4,800 keys of other types, a third with an expiry,
// cut from 3 masters, into 2: every key reads back with its type, value and expiry, and
// none more; keys that expired between the cut and the restore are skipped and counted.
func TestRestoreMixedKeysIntoFewerMasters(t *testing.T) {
	ctx := context.Background()
	src, d := servers(t, 3)
	cc := clusterClient(t, src)
	defer cc.Close()
	const n = 120000
	loaded := loadMixed(t, ctx, cc, n)
	// Keys that expire after the cut and before the restore.
	var short [][]any
	for i := 0; i < 500; i++ {
		short = append(short, []any{"set", fmt.Sprint("gone:", i), "x", "px", 1500})
	}
	pipeline(t, ctx, cc, short, func(string, goredis.Cmder) {})
	_, rdbs := snapshots(t, ctx, d, redistest.Addrs(src))
	time.Sleep(1600 * time.Millisecond)

	dst, _ := servers(t, 2)
	p := restoreInto(t, ctx, redistest.Addrs(dst), d, memSources(rdbs))
	if p.Keys.Load() != int64(len(loaded)) || p.Expired.Load() != 500 {
		t.Fatalf("restored %d keys, %d expired; want %d and 500", p.Keys.Load(), p.Expired.Load(), len(loaded))
	}
	dc := clusterClient(t, dst)
	defer dc.Close()
	got := readMixed(t, ctx, dc, keysOf(n))
	for k, want := range loaded {
		g := got[k]
		// A set or hash in a hash table is rebuilt by RESTORE and DUMPs its members in
		// another order: those compare by their members.
		sameValue := g.value == want.value || want.typ == "set" && sameSet(ctx, cc.c(k), dc.c(k), k) ||
			want.typ == "hash" && sameHash(ctx, cc.c(k), dc.c(k), k)
		if g.typ != want.typ || !sameValue || g.expireAt != want.expireAt {
			t.Fatalf("key %s: %s of %d bytes expiring at %d, want %s of %d bytes expiring at %d",
				k, g.typ, len(g.value), g.expireAt, want.typ, len(want.value), want.expireAt)
		}
	}
	var total int64
	for _, s := range dst {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr, Password: password})
		n, _ := c.DBSize(ctx).Result()
		c.Close()
		total += n
	}
	if total != int64(len(loaded)) {
		t.Fatalf("target holds %d keys, want %d", total, len(loaded))
	}
	// The strings without an expiry went by slot, in MSET (more than the 4 MB a shard's
	// groups hold: every group went at least once before the shard's end).
	msets := commandCalls(t, ctx, dst, "mset")
	if msets == 0 || msets > n/2 {
		t.Fatalf("%d MSET calls for %d strings, two thirds without an expiry", msets, n)
	}
	t.Logf("%d MSET calls", msets)
}

// sameHash compares a hash by its fields and values.
func sameHash(ctx context.Context, a, b *goredis.Client, k string) bool {
	ma, err := a.HGetAll(ctx, k).Result()
	if err != nil {
		return false
	}
	mb, err := b.HGetAll(ctx, k).Result()
	return err == nil && maps.Equal(ma, mb)
}

// memSources are sources reading rdbs from memory.
func memSources(rdbs [][]byte) []func() (io.ReadCloser, error) {
	var sources []func() (io.ReadCloser, error)
	for _, b := range rdbs {
		sources = append(sources, func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	}
	return sources
}

// restoreInto restores sources into the masters at addrs, failing the test on an error.
func restoreInto(t *testing.T, ctx context.Context, addrs []string, d Dialer, sources []func() (io.ReadCloser, error)) *Progress {
	t.Helper()
	var p Progress
	began := time.Now()
	if err := Restore(ctx, RestoreTarget{Addrs: addrs, Dialer: d}, sources, &p); err != nil {
		t.Fatal(err)
	}
	t.Logf("restored %d keys, %d bytes in %v; %d expired", p.Keys.Load(), p.Bytes.Load(), time.Since(began), p.Expired.Load())
	return &p
}
