package rdb

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc64"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

func TestCRC64MatchesRedis(t *testing.T) {
	// crc64.c's own test vector.
	if got := CRC64(0, []byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("CRC64(123456789) = %x, want e9c6d914c4b8d9ca", got)
	}
}

// TestScanGivesWhatDumpGives saves, on every server the project ships an image for, every
// type the server has, in its small and large encodings, with and without expiry (hashes
// with field expiries where the server has them), and requires Scan to give for each key
// exactly the payload DUMP gives, and the expiry PEXPIRETIME gives: what RESTORE gets from
// a backup is then what a live MIGRATE would carry.
func TestScanGivesWhatDumpGives(t *testing.T) {
	want := map[string]struct {
		version int
		valkey  bool
		server  string
	}{
		"redis 7.0":  {10, false, "redis 7.0."},
		"redis 8.0":  {12, false, "redis 8.0."},
		"valkey 8.1": {11, false, "valkey 8.1."},
		"valkey 9.1": {80, true, "valkey 9.1."},
	}
	for _, img := range redistest.Images {
		t.Run(img.Name, func(t *testing.T) {
			srv, c := oneNodeCluster(t, redistest.Config{Binary: redistest.ServerBinary(t, img)})
			ctx := context.Background()
			keys := fill(t, ctx, c)
			if err := c.Do(ctx, "save").Err(); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(filepath.Join(srv.Dir, "dump.rdb"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			seen := map[string]bool{}
			types := map[byte]int{}
			h, err := Scan(f, func(e *Entry) error {
				k := string(e.Key)
				seen[k] = true
				types[e.Type]++
				want, err := c.Dump(ctx, k).Result()
				if err != nil {
					return fmt.Errorf("DUMP %s: %w", k, err)
				}
				if got := e.DumpPayload(e.Version); !bytes.Equal(got, []byte(want)) {
					return fmt.Errorf("key %s (type %d): payload of %d bytes differs from DUMP's %d", k, e.Type, len(got), len(want))
				}
				if e.Type == TypeString {
					v, err := e.StringValue()
					if err != nil {
						return fmt.Errorf("key %s: %w", k, err)
					}
					if want := c.Get(ctx, k).Val(); string(v) != want {
						return fmt.Errorf("key %s: string value %.40q, GET %.40q", k, v, want)
					}
				}
				exp, err := c.Do(ctx, "pexpiretime", k).Int64()
				if err != nil {
					return err
				}
				if exp < 0 {
					exp = 0
				}
				if exp != e.ExpireAtMs {
					return fmt.Errorf("key %s: expiry %d, PEXPIRETIME %d", k, e.ExpireAtMs, exp)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			w := want[img.Name]
			if h.Version != w.version || h.Valkey != w.valkey || !strings.HasPrefix(h.Server(), w.server) {
				t.Fatalf("header: version %d, valkey %v, server %q; want %d, %v, %s*", h.Version, h.Valkey, h.Server(), w.version, w.valkey, w.server)
			}
			for _, k := range keys {
				if !seen[k] {
					t.Errorf("key %s not in the scan", k)
				}
			}
			if len(seen) != len(keys) {
				t.Errorf("scan gave %d keys, wrote %d", len(seen), len(keys))
			}
			t.Logf("%s: RDB %d, %d keys, value types %v", h.Server(), h.Version, len(seen), types)
		})
	}
}

func TestScanRefusesACutOrCorruptFile(t *testing.T) {
	srv, c := oneNodeCluster(t, redistest.Config{})
	ctx := context.Background()
	fill(t, ctx, c)
	if err := c.Do(ctx, "save").Err(); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(filepath.Join(srv.Dir, "dump.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	none := func(*Entry) error { return nil }
	if _, err := Scan(bytes.NewReader(whole), none); err != nil {
		t.Fatalf("the whole file: %v", err)
	}
	if _, err := Scan(bytes.NewReader(whole[:len(whole)/2]), none); err == nil {
		t.Fatal("half a file was read without error")
	}
	bad := append([]byte(nil), whole...)
	bad[len(bad)/2] ^= 0x01
	if _, err := Scan(bytes.NewReader(bad), none); err == nil {
		t.Fatal("a file with a flipped bit was read without error")
	}
}

func waitOK(t *testing.T, c *goredis.Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := c.ClusterInfo(context.Background()).Result()
		if strings.Contains(info, "cluster_state:ok") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ok: %s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fill writes keys of every type in small (listpack, intset) and large encodings.
func fill(t *testing.T, ctx context.Context, c *goredis.Client) []string {
	t.Helper()
	var keys []string
	do := func(args ...any) {
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	add := func(k string) string { keys = append(keys, k); return k }
	do("set", add("str"), "hello")
	do("set", add("int"), "12345")
	do("set", add("neg"), "-7")
	do("set", add("int16"), "-30000")
	do("set", add("int32"), "2000000000")
	do("set", add("empty"), "")
	do("set", add("big-int"), "123456789012")
	do("set", add("long"), strings.Repeat("abcdefgh", 200)) // LZF-compressed
	do("set", add(strings.Repeat("k", 100)), "long key, compressed too")
	do("set", add("ttl"), "soon", "px", 3600000)
	do("rpush", add("list-small"), "a", "b", "c")
	do("hset", add("hash-small"), "f1", "v1", "f2", "2")
	do("sadd", add("set-int"), 1, 2, 3)
	do("sadd", add("set-small"), "x", "y")
	do("zadd", add("zset-small"), 1.5, "a", 2, "b")
	do("xadd", add("stream"), "*", "f", "v")
	do("xgroup", "create", "stream", "g", "0")
	do("xreadgroup", "group", "g", "alice", "count", "1", "streams", "stream", ">")
	do("pexpire", "hash-small", 7200000)
	big := func(cmd, key string, n int, member func(i int) []any) {
		add(key)
		for start := 0; start < n; start += 500 {
			args := []any{cmd, key}
			for i := start; i < min(start+500, n); i++ {
				args = append(args, member(i)...)
			}
			do(args...)
		}
	}
	big("rpush", "list-big", 5000, func(i int) []any { return []any{fmt.Sprint("item-", i)} })
	big("hset", "hash-big", 3000, func(i int) []any { return []any{fmt.Sprint("f", i), strings.Repeat("v", 80)} })
	big("sadd", "set-big", 3000, func(i int) []any { return []any{fmt.Sprint("m", i)} })
	big("zadd", "zset-big", 3000, func(i int) []any { return []any{float64(i) / 3, fmt.Sprint("m", i)} })
	big("xadd", "stream-big", 0, nil)
	keys = keys[:len(keys)-1]
	for i := 0; i < 300; i++ {
		do("xadd", "stream", "*", "n", i)
	}
	do("pexpire", "zset-big", 9000000)
	do("set", add("big-string"), strings.Repeat("0123456789abcdef", 1<<18)) // 4 MiB
	// Hashes with field expiries, where the server has them (Redis 7.4+, Valkey 9+): a
	// small one (Redis keeps it a listpack) and a large one, some fields without expiry.
	if info, _ := c.Do(ctx, "command", "info", "hpexpire").Slice(); len(info) == 1 && info[0] != nil {
		do("hset", add("hash-ttl-small"), "a", "1", "b", "2", "c", "3")
		do("hpexpire", "hash-ttl-small", 3600000, "fields", 2, "a", "b")
		big("hset", "hash-ttl-big", 2000, func(i int) []any { return []any{fmt.Sprint("f", i), fmt.Sprint("v", i)} })
		for i := 0; i < 2000; i += 3 {
			do("hpexpire", "hash-ttl-big", 3600000+i, "fields", 1, fmt.Sprint("f", i))
		}
		do("pexpire", "hash-ttl-big", 9000000)
	}
	return keys
}

// oneNodeCluster starts a redis-server that owns every slot, and a client of it.
func oneNodeCluster(t *testing.T, cfg redistest.Config) (*redistest.Server, *goredis.Client) {
	t.Helper()
	srv := redistest.Start(t, 1, cfg)[0]
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	if err := c.Do(context.Background(), "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	waitOK(t, c)
	return srv, c
}

// TestCRC64IsRedis: Redis' own test vector (crc64.c: "123456789" gives e9c6d914c4b8d9ca),
// and the slicing agrees with hash/crc64 byte by byte at every length and split.
func TestCRC64IsRedis(t *testing.T) {
	if got := CRC64(0, []byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("CRC64(123456789) = %x", got)
	}
	tab := crc64.MakeTable(0x95ac9329ac4bc9b5)
	b := make([]byte, 5000)
	for i := range b {
		b[i] = byte(i*7 + i/13)
	}
	for n := 0; n < len(b); n += 1 + n/7 {
		want := ^crc64.Update(^uint64(0), tab, b[:n])
		if got := CRC64(0, b[:n]); got != want {
			t.Fatalf("%d bytes: %x, want %x", n, got, want)
		}
		if got := CRC64(CRC64(0, b[:n/3]), b[n/3:n]); got != want {
			t.Fatalf("%d bytes in two: %x, want %x", n, got, want)
		}
	}
}

// TestScanRefusesALengthTheFileDoesNotHold: a string whose length says 512 GiB in a file
// of a few bytes, plain or as an LZF result, is refused, not allocated (the operator would
// be killed for its memory, and a restore retried into the same death).
func TestScanRefusesALengthTheFileDoesNotHold(t *testing.T) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.TotalAlloc
	file := []byte("REDIS0010")
	file = append(file, 0xFE, 0)                              // SELECTDB 0
	file = append(file, 0, 1, 'k')                            // a string key "k"
	file = append(file, 0x81, 0, 0, 0, 0x80, 0, 0, 0, 0, 'v') // its value's length, 1<<39, and 1 byte
	_, err := Scan(bytes.NewReader(file), func(*Entry) error { return nil })
	if err == nil {
		t.Fatal("a plain string longer than its file was read without error")
	}
	t.Logf("plain: %v", err)
	// LZF: 5 bytes (a literal "ab" and a back reference of 3) said to give 512 GiB.
	if _, err := lzfDecompress([]byte{1, 'a', 'b', 0x20, 1}, 1<<39, nil); err == nil {
		t.Fatal("an LZF string said to give 512 GiB from 5 bytes was decompressed")
	} else {
		t.Logf("lzf: %v", err)
	}
	runtime.ReadMemStats(&m)
	if grew := m.TotalAlloc - before; grew > 64<<20 {
		t.Fatalf("allocated %d bytes for a few", grew)
	}
}

// TestLZFBackReferences: a back reference within what is written (copied at once) and one
// running into the bytes it writes (a repeated pattern, copied byte by byte).
func TestLZFBackReferences(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{[]byte{5, 'a', 'b', 'c', 'd', 'e', 'f', 0x20, 5}, "abcdefabc"}, // 3 bytes from offset 0 of 6
		{[]byte{2, 'a', 'b', 'c', 0x80, 2}, "abcabcabc"},                // 6 bytes from offset 0 of 3
		{[]byte{0, 'x', 0xE0, 1, 0}, "xxxxxxxxxxx"},                     // 7+1+2 bytes from the one before
		{[]byte{1, 'a', 'b', 0xA0, 1}, "ababababa"},                     // 7 bytes of period 2
		{[]byte{2, 'a', 'b', 'c', 0xE0, 1, 2}, "abcabcabcabca"},         // 10 bytes of period 3
	} {
		got, err := lzfDecompress(c.in, len(c.want), nil)
		if err != nil || string(got) != c.want {
			t.Errorf("lzfDecompress(%v) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}
