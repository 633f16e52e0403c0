package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"testing"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// TestEveryServerBacksUpAndRestores cuts two masters of every server the project ships an
// image for (keys of every type, hashes with field expiries where the server has them),
// configured as the pods are, so the snapshots are diskless (Valkey 9 must be told the
// replica reads its own RDB version, else it fails a hash with field expiries),
// and restores each backup into two masters of every server: into the same server and
// into any server that reads the backup's RDB version every key comes back with its value,
// its field expiries and its expiry; into a server that does not (a newer RDB into an
// older server, Redis 8's RDB 12 into Valkey, Valkey 9's RDB 80 into Redis) the restore is
// refused before any key is written.
func TestEveryServerBacksUpAndRestores(t *testing.T) {
	ctx := context.Background()
	type taken struct {
		rdbs    [][]byte
		version int
		keys    []string
		src     *router
	}
	backups := map[string]taken{}
	targets := map[string][]*redistest.Server{}
	var d Dialer
	for _, img := range redistest.Images {
		bin := redistest.ServerBinary(t, img)
		// Configured as the pods are: the snapshots are diskless.
		src, dialer := serversWith(t, 2, redistest.Config{Binary: bin, Args: podArgs})
		d = dialer
		cc := clusterClient(t, src)
		t.Cleanup(cc.Close)
		keys := loadEveryType(t, ctx, cc)
		cut, snaps, err := Take(ctx, d, redistest.Addrs(src), Options{})
		if err != nil {
			t.Fatalf("%s: %v", img.Name, err)
		}
		if got := cut.Snapshots(); got != "diskless" {
			t.Fatalf("%s: snapshots %s, want diskless", img.Name, got)
		}
		b := taken{keys: keys, src: cc, rdbs: readSnapshots(t, snaps)}
		b.version = rdbVersion(t, b.rdbs[0])
		backups[img.Name] = b
		t.Logf("%s: %d keys cut in %v, RDB %d, %d bytes", img.Name, len(keys), cut.Paused, b.version, len(b.rdbs[0])+len(b.rdbs[1]))
		targets[img.Name], _ = serversOf(t, 2, bin)
	}
	for _, from := range redistest.Images {
		for _, to := range redistest.Images {
			b := backups[from.Name]
			var sources []func() (io.ReadCloser, error)
			for _, r := range b.rdbs {
				sources = append(sources, func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(r)), nil })
			}
			dst := targets[to.Name]
			var p Progress
			err := Restore(ctx, RestoreTarget{Addrs: redistest.Addrs(dst), Dialer: d, Replace: true}, sources, &p)
			readable := readsRDB[to.Name][b.version]
			switch {
			case !readable && errors.Is(err, ErrUnreadable):
				t.Logf("%s -> %s: refused: %v", from.Name, to.Name, err)
				if p.Keys.Load() != 0 {
					t.Fatalf("%s -> %s: refused after writing %d keys", from.Name, to.Name, p.Keys.Load())
				}
				// The server itself refuses such a payload: the check refuses nothing it reads.
				payload := b.src.c("zset-small").Dump(ctx, "zset-small").Val()
				dc := clusterClient(t, dst)
				rerr := dc.c("zset-small").RestoreReplace(ctx, "zset-small", 0, payload).Err()
				dc.Close()
				if rerr == nil {
					t.Fatalf("%s -> %s: refused, but the server RESTOREs the backup's payload", from.Name, to.Name)
				}
				continue
			case !readable:
				t.Fatalf("%s (RDB %d) -> %s: %v, want ErrUnreadable", from.Name, b.version, to.Name, err)
			case err != nil:
				t.Fatalf("%s (RDB %d) -> %s: %v", from.Name, b.version, to.Name, err)
			}
			dc := clusterClient(t, dst)
			for _, k := range b.keys {
				if err := sameValue(ctx, b.src.c(k), dc.c(k), k); err != nil {
					t.Fatalf("%s -> %s: %v", from.Name, to.Name, err)
				}
			}
			dc.Close()
			t.Logf("%s -> %s: %d keys restored and equal", from.Name, to.Name, p.Keys.Load())
		}
	}
}

// readsRDB is what each server RESTOREs (docs/servers.md), written out here so the test
// does not take it from the code it checks.
var readsRDB = map[string]map[int]bool{
	"redis 7.0":  {10: true},
	"redis 8.0":  {10: true, 11: true, 12: true},
	"valkey 8.1": {10: true, 11: true},
	"valkey 9.1": {10: true, 11: true, 80: true},
}

func rdbVersion(t *testing.T, b []byte) int {
	t.Helper()
	var v int
	if _, err := fmt.Sscanf(string(b[5:9]), "%d", &v); err != nil || string(b[:5]) != "REDIS" {
		if _, err := fmt.Sscanf(string(b[6:9]), "%d", &v); err != nil || string(b[:6]) != "VALKEY" {
			t.Fatalf("magic %q", b[:9])
		}
	}
	return v
}

// loadEveryType writes keys of every type in their small and large encodings, a share with
// an expiry, big ones, and hashes with field expiries where the server has HPEXPIRE.
func loadEveryType(t *testing.T, ctx context.Context, cc *router) []string {
	t.Helper()
	var keys []string
	do := func(args ...any) {
		if err := cc.c(args[1].(string)).Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	add := func(k string) string { keys = append(keys, k); return k }
	many := func(cmd, key string, n int, member func(i int) []any) {
		add(key)
		for start := 0; start < n; start += 1000 {
			args := []any{cmd, key}
			for i := start; i < min(start+1000, n); i++ {
				args = append(args, member(i)...)
			}
			do(args...)
		}
	}
	for i := 0; i < 2000; i++ {
		k := add(fmt.Sprint("s:", i))
		v := any(fmt.Sprint("value-", i))
		if i%2 == 0 {
			v = i * 7 // an integer-encoded string
		}
		if i%3 == 0 {
			do("set", k, v, "px", 3600000+i)
		} else {
			do("set", k, v)
		}
	}
	do("set", add("big-string"), string(bytes.Repeat([]byte("0123456789abcdef"), 1<<16)))
	do("rpush", add("list-small"), "a", "b", "c")
	many("rpush", "list-big", 20000, func(i int) []any { return []any{fmt.Sprint("item-", i)} })
	do("hset", add("hash-small"), "f", "v", "g", "1")
	many("hset", "hash-big", 5000, func(i int) []any { return []any{fmt.Sprint("f", i), fmt.Sprint("v", i)} })
	do("sadd", add("set-int"), 1, 2, 3)
	do("sadd", add("set-small"), "x", "y")
	many("sadd", "set-big", 5000, func(i int) []any { return []any{fmt.Sprint("m", i)} })
	do("zadd", add("zset-small"), 1.5, "a", 2, "b")
	many("zadd", "zset-big", 50000, func(i int) []any { return []any{i, fmt.Sprint("member-", i)} })
	do("xadd", add("stream"), "*", "f", "v")
	for i := 0; i < 500; i++ {
		do("xadd", "stream", "*", "n", i)
	}
	if err := cc.c("stream").Do(ctx, "xgroup", "create", "stream", "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := cc.c("stream").Do(ctx, "xreadgroup", "group", "g", "alice", "count", 10, "streams", "stream", ">").Err(); err != nil {
		t.Fatal(err)
	}
	do("pexpire", "hash-big", 7200000)
	do("pexpire", "zset-big", 7200000)
	if info, _ := cc.c("hash-ttl-small").Do(ctx, "command", "info", "hpexpire").Slice(); len(info) == 1 && info[0] != nil {
		do("hset", add("hash-ttl-small"), "a", "1", "b", "2", "c", "3")
		do("hpexpire", "hash-ttl-small", 3600000, "fields", 2, "a", "b")
		many("hset", "hash-ttl-big", 3000, func(i int) []any { return []any{fmt.Sprint("f", i), fmt.Sprint("v", i)} })
		for i := 0; i < 3000; i += 3 {
			do("hpexpire", "hash-ttl-big", 3600000+i, "fields", 1, fmt.Sprint("f", i))
		}
	}
	return keys
}

// sameValue compares key k on two servers by what a client reads: its type, its expiry,
// and its content (for a hash, each field's value and expiry; for a set, its members; for
// the rest, DUMP, whose encoding a restore keeps, or, across servers, the content).
func sameValue(ctx context.Context, a, b *goredis.Client, k string) error {
	ta, err := a.Type(ctx, k).Result()
	if err != nil {
		return err
	}
	if tb, _ := b.Type(ctx, k).Result(); tb != ta {
		return fmt.Errorf("key %s: type %s, want %s", k, tb, ta)
	}
	ea, _ := a.Do(ctx, "pexpiretime", k).Int64()
	if eb, _ := b.Do(ctx, "pexpiretime", k).Int64(); eb != ea {
		return fmt.Errorf("key %s: expiry %d, want %d", k, eb, ea)
	}
	var va, vb any
	switch ta {
	case "string":
		va, vb = a.Get(ctx, k).Val(), b.Get(ctx, k).Val()
	case "list":
		va, vb = a.LRange(ctx, k, 0, -1).Val(), b.LRange(ctx, k, 0, -1).Val()
	case "set":
		ma, mb := a.SMembers(ctx, k).Val(), b.SMembers(ctx, k).Val()
		slices.Sort(ma)
		slices.Sort(mb)
		va, vb = ma, mb
	case "zset":
		va, vb = a.ZRangeWithScores(ctx, k, 0, -1).Val(), b.ZRangeWithScores(ctx, k, 0, -1).Val()
	case "hash":
		ha, hb := a.HGetAll(ctx, k).Val(), b.HGetAll(ctx, k).Val()
		if !maps.Equal(ha, hb) {
			return fmt.Errorf("key %s: %d fields, want %d, or values differ", k, len(hb), len(ha))
		}
		if info, _ := a.Do(ctx, "command", "info", "hpexpiretime").Slice(); len(info) == 1 && info[0] != nil {
			for f := range ha {
				fa, _ := a.Do(ctx, "hpexpiretime", k, "fields", 1, f).Slice()
				fb, _ := b.Do(ctx, "hpexpiretime", k, "fields", 1, f).Slice()
				if fmt.Sprint(fa) != fmt.Sprint(fb) {
					return fmt.Errorf("key %s field %s: expiry %v, want %v", k, f, fb, fa)
				}
			}
		}
		return nil
	case "stream":
		va, vb = a.XRange(ctx, k, "-", "+").Val(), b.XRange(ctx, k, "-", "+").Val()
		ga, gb := a.XInfoGroups(ctx, k).Val(), b.XInfoGroups(ctx, k).Val()
		if fmt.Sprint(ga) != fmt.Sprint(gb) {
			return fmt.Errorf("key %s: groups %v, want %v", k, gb, ga)
		}
	default:
		return fmt.Errorf("key %s: type %s not compared", k, ta)
	}
	if fmt.Sprint(va) != fmt.Sprint(vb) {
		return fmt.Errorf("key %s (%s): content differs", k, ta)
	}
	return nil
}
