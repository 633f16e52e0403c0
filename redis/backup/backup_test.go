package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

const password = "s3cret"

// servers runs n masters whose only users are the default one and the operator's, with
// the rules the operator gives it: the cut and the restore must work as that user.
func servers(t *testing.T, n int) ([]*redistest.Server, Dialer) {
	t.Helper()
	return serversOf(t, n, "")
}

// serversOf is servers running the redis-server at bin ("" for the host's).
func serversOf(t *testing.T, n int, bin string) ([]*redistest.Server, Dialer) {
	t.Helper()
	return serversWith(t, n, redistest.Config{Binary: bin})
}

// serversWith is servers with cfg's binary and node timeout.
func serversWith(t *testing.T, n int, cfg redistest.Config) ([]*redistest.Server, Dialer) {
	t.Helper()
	h := []string{redis.PasswordHash(password)}
	conf := redis.AuthConf(password, []redis.User{
		{Name: redis.DefaultUser, Hashes: h, Rules: redis.DefaultRules()},
		{Name: redis.OperatorUser, Hashes: h, Rules: redis.OperatorRules()},
	})
	cfg.AuthConf, cfg.Password = conf, password
	srv := redistest.Start(t, n, cfg)
	form(t, srv)
	return srv, Dialer{User: redis.OperatorUser, Passwords: []string{password}}
}

// form makes the servers one cluster of masters with an even slot split.
func form(t *testing.T, srv []*redistest.Server) {
	t.Helper()
	ctx := context.Background()
	ranges := topology.SplitSlots(len(srv))
	for i, s := range srv {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr, Password: password})
		if err := c.Do(ctx, "cluster", "addslotsrange", ranges[i].Start, ranges[i].End).Err(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			host, port, _ := strings.Cut(srv[0].Addr, ":")
			if err := c.Do(ctx, "cluster", "meet", host, port).Err(); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range srv {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr, Password: password})
		for {
			info, _ := c.ClusterInfo(ctx).Result()
			nodes, _ := c.ClusterNodes(ctx).Result()
			if strings.Contains(info, "cluster_state:ok") && strings.Count(nodes, "master") == len(srv) && !strings.Contains(nodes, "handshake") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not formed: %s", info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
}

// router sends each key's commands to its master (go-redis v8's cluster client cannot
// read Redis 7's CLUSTER SLOTS).
type router struct {
	owner   []string
	clients map[string]*goredis.Client
}

func clusterClient(t *testing.T, srv []*redistest.Server) *router {
	t.Helper()
	owners, err := slotOwners(context.Background(), Dialer{Passwords: []string{password}}, redistest.Addrs(srv))
	if err != nil {
		t.Fatal(err)
	}
	r := &router{owner: owners, clients: map[string]*goredis.Client{}}
	for _, a := range owners {
		if r.clients[a] == nil {
			r.clients[a] = goredis.NewClient(&goredis.Options{Addr: a, Password: password, MaxRetries: -1})
		}
	}
	return r
}

func (r *router) c(key string) *goredis.Client { return r.clients[r.owner[topology.KeySlot(key)]] }

func (r *router) Close() {
	for _, c := range r.clients {
		c.Close()
	}
}

// write is one write of the writer: when it was sent and when acknowledged (zero: not).
type write struct {
	key         string
	sent, acked time.Time
}

// snapshots takes a cut of the masters at addrs and reads every snapshot whole.
func snapshots(t *testing.T, ctx context.Context, d Dialer, addrs []string) (*Cut, [][]byte) {
	t.Helper()
	cut, snaps, err := Take(ctx, d, addrs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cut, readSnapshots(t, snaps)
}

// failingReader gives its bytes, then err: a connection cut mid-object.
type failingReader struct {
	b   []byte
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, f.err
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

// TestRestoreTellsIncompatibleFromTransient: an object whose checksum differs from the
// one recorded (even past the RDB's own end), or that is no RDB this reader knows, fails
// with ErrChecksum or ErrIncompatible, which no retry cures; a source cut mid-way fails
// with neither, and is retried.
func TestRestoreTellsIncompatibleFromTransient(t *testing.T) {
	ctx := context.Background()
	src, d := servers(t, 3)
	cc := clusterClient(t, src)
	defer cc.Close()
	load(t, ctx, cc, 300)
	_, rdbs := snapshots(t, ctx, d, redistest.Addrs(src))
	target := RestoreTarget{Addrs: redistest.Addrs(src), Dialer: d, Replace: true}
	restore := func(source func(i int, b []byte) io.ReadCloser) error {
		var sources []func() (io.ReadCloser, error)
		for i, b := range rdbs {
			sources = append(sources, func() (io.ReadCloser, error) { return source(i, b), nil })
		}
		return Restore(ctx, target, sources, &Progress{})
	}
	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

	if err := restore(func(_ int, b []byte) io.ReadCloser { return VerifyingReader(io.NopCloser(bytes.NewReader(b)), sum(b)) }); err != nil {
		t.Fatalf("the backup as taken: %v", err)
	}
	err := restore(func(i int, b []byte) io.ReadCloser {
		if i == 1 {
			// A byte added past the RDB's own checksum: only the object's checksum sees it.
			return VerifyingReader(io.NopCloser(bytes.NewReader(append(bytes.Clone(b), 0))), sum(b))
		}
		return VerifyingReader(io.NopCloser(bytes.NewReader(b)), sum(b))
	})
	if !errors.Is(err, ErrChecksum) || errors.Is(err, ErrIncompatible) {
		t.Fatalf("a changed object: %v", err)
	}
	err = restore(func(i int, b []byte) io.ReadCloser {
		if i == 0 {
			return io.NopCloser(strings.NewReader("REDIS0099 a format from the future"))
		}
		return io.NopCloser(bytes.NewReader(b))
	})
	if !errors.Is(err, ErrIncompatible) {
		t.Fatalf("an RDB of an unknown version: %v", err)
	}
	err = restore(func(i int, b []byte) io.ReadCloser {
		if i == 2 {
			return io.NopCloser(&failingReader{b: b[:len(b)/2], err: errors.New("connection reset by peer")})
		}
		return io.NopCloser(bytes.NewReader(b))
	})
	if err == nil || errors.Is(err, ErrIncompatible) || errors.Is(err, ErrChecksum) {
		t.Fatalf("a source cut mid-way: %v", err)
	}
}

// TestCutIsConsistentAndRestoresIntoAnotherShape loads keys of every type with and
// without TTLs into 3 masters, cuts while a writer writes, and restores into 4 masters:
// every loaded key is there with its value (DUMP) and expiry, every write acknowledged
// before the pause began is there, none sent after it ended is, and the cut took every
// master at one point (the writer's keys present form a prefix of each writer's
// sequence).
func TestCutIsConsistentAndRestoresIntoAnotherShape(t *testing.T) {
	ctx := context.Background()
	src, d := servers(t, 3)
	cc := clusterClient(t, src)
	defer cc.Close()
	loaded := load(t, ctx, cc, 20000)

	stopWriters := startWriters(ctx, cc, 3)
	time.Sleep(300 * time.Millisecond)
	cut, rdbs := snapshots(t, ctx, d, redistest.Addrs(src))
	t.Logf("cut: writes paused %v; offsets %v", cut.Paused, offsets(cut))
	time.Sleep(200 * time.Millisecond) // writes after the cut
	writes := stopWriters()

	dst, _ := servers(t, 4)
	sources := memSources(rdbs)
	restoreInto(t, ctx, redistest.Addrs(dst), d, sources)
	// Restoring again is refused: the target holds keys now.
	if err := Restore(ctx, RestoreTarget{Addrs: redistest.Addrs(dst), Dialer: d}, sources, &Progress{}); err == nil || !strings.Contains(err.Error(), "already holds keys") {
		t.Fatalf("a second restore into a full cluster: %v", err)
	}

	dc := clusterClient(t, dst)
	defer dc.Close()
	for k, want := range loaded {
		got, err := dc.c(k).Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("key %s: %v", k, err)
		}
		if got != want.dump && !sameSet(ctx, cc.c(k), dc.c(k), k) {
			t.Fatalf("key %s: value differs", k)
		}
		exp, err := dc.c(k).Do(ctx, "pexpiretime", k).Int64()
		if err != nil || exp != want.expireAt {
			t.Fatalf("key %s: expiry %d (%v), want %d", k, exp, err, want.expireAt)
		}
	}
	acked, present, gap := checkCutWrites(t, writes, cut, func(k string) bool {
		n, err := dc.c(k).Exists(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	t.Logf("writer: %d acknowledged, %d in the backup, longest gap %v", acked, present, gap)
	total := 0
	for _, s := range dst {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr, Password: password})
		n, _ := c.DBSize(ctx).Result()
		c.Close()
		total += int(n)
	}
	if total != len(loaded)+present {
		t.Fatalf("target holds %d keys, want %d loaded + %d written", total, len(loaded), present)
	}
}

// readSnapshots opens and reads every snapshot of a cut whole, and closes it.
func readSnapshots(t *testing.T, snaps []*Snapshot) [][]byte {
	t.Helper()
	rdbs := make([][]byte, len(snaps))
	for i, s := range snaps {
		if err := s.Open(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, s); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if int64(buf.Len()) != s.Size {
			t.Fatalf("snapshot of %s: %d bytes, announced %d", s.Shard.Addr, buf.Len(), s.Size)
		}
		rdbs[i] = buf.Bytes()
	}
	return rdbs
}

type loadedKey struct {
	dump     string
	expireAt int64
}

// load writes n strings (a third with a TTL) and one key of every other type, big ones
// included, and returns each key's DUMP and PEXPIRETIME.
func load(t *testing.T, ctx context.Context, cc *router, n int) map[string]loadedKey {
	t.Helper()
	for i := 0; i < n; i++ {
		ttl := time.Duration(0)
		if i%3 == 0 {
			ttl = time.Hour + time.Duration(i)*time.Millisecond
		}
		k := fmt.Sprint("k:", i)
		if err := cc.c(k).Set(ctx, k, fmt.Sprint("value-", i), ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	do := func(args ...any) {
		if err := cc.c(args[1].(string)).Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	do("rpush", "list", "a", "b", "c")
	do("hset", "hash", "f", "v", "g", "w")
	do("sadd", "set", "x", "y", 7)
	do("zadd", "zset", 1, "a", 2.5, "b")
	do("xadd", "stream", "*", "f", "v")
	if err := cc.c("stream").Do(ctx, "xgroup", "create", "stream", "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	do("pexpire", "hash", 5000000)
	for start := 0; start < 50000; start += 1000 {
		args := []any{"zadd", "zbig"}
		for i := start; i < start+1000; i++ {
			args = append(args, i, fmt.Sprint("member-", i))
		}
		do(args...)
	}
	out := map[string]loadedKey{}
	keys := []string{"list", "hash", "set", "zset", "stream", "zbig"}
	for i := 0; i < n; i++ {
		keys = append(keys, fmt.Sprint("k:", i))
	}
	for _, k := range keys {
		d, err := cc.c(k).Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		exp, err := cc.c(k).Do(ctx, "pexpiretime", k).Int64()
		if err != nil {
			t.Fatal(err)
		}
		if exp < 0 {
			exp = -1
		}
		out[k] = loadedKey{dump: d, expireAt: exp}
	}
	return out
}

// sameSet compares a set by its members: a hashtable-encoded set is rebuilt by RESTORE
// and DUMPs its members in another order.
func sameSet(ctx context.Context, a, b *goredis.Client, k string) bool {
	ma, err := a.SMembers(ctx, k).Result()
	if err != nil {
		return false
	}
	mb, err := b.SMembers(ctx, k).Result()
	if err != nil {
		return false
	}
	slices.Sort(ma)
	slices.Sort(mb)
	return slices.Equal(ma, mb)
}

func offsets(c *Cut) []string {
	var out []string
	for _, s := range c.Shards {
		out = append(out, fmt.Sprintf("%s@%d", s.Addr, s.Offset))
	}
	return out
}

// TestCutWaitsWhileASlotIsOpen: a slot migrating means a key may be on either side; the
// cut refuses, pausing nothing.
func TestCutWaitsWhileASlotIsOpen(t *testing.T) {
	ctx := context.Background()
	src, d := servers(t, 3)
	c0 := goredis.NewClient(&goredis.Options{Addr: src[0].Addr, Password: password})
	defer c0.Close()
	c1 := goredis.NewClient(&goredis.Options{Addr: src[1].Addr, Password: password})
	defer c1.Close()
	id1, err := c1.Do(ctx, "cluster", "myid").Text()
	if err != nil {
		t.Fatal(err)
	}
	if err := c0.Do(ctx, "cluster", "setslot", 0, "migrating", id1).Err(); err != nil {
		t.Fatal(err)
	}
	_, _, err = Take(ctx, d, redistest.Addrs(src), Options{})
	w, ok := IsWait(err)
	if !ok || w.Reason != "OpenSlots" {
		t.Fatalf("Take with slot 0 migrating: %v", err)
	}
	if err := c0.Do(ctx, "cluster", "setslot", 0, "stable").Err(); err != nil {
		t.Fatal(err)
	}
	_, snaps, err := Take(ctx, d, redistest.Addrs(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		s.Close()
	}
}

// TestRestoreStopsAtTheFirstRefusedKey: a master that refuses RESTORE (here the user may
// not run it) fails the restore with the key and the master's answer, and no key counts as
// restored.
func TestRestoreStopsAtTheFirstRefusedKey(t *testing.T) {
	ctx := context.Background()
	source := stringsCut(t, ctx, 5000)
	dst := serversWithUser(t, ctx, 2, "norestore", "-restore", "-set", "-mset")
	var p Progress
	err := Restore(ctx, RestoreTarget{Addrs: redistest.Addrs(dst), Dialer: Dialer{User: "norestore", Passwords: []string{password}}},
		[]func() (io.ReadCloser, error){source}, &p)
	if err == nil || !strings.Contains(err.Error(), `restoring "k:`) || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("restore as a user without RESTORE: %v", err)
	}
	if p.Keys.Load() != 0 {
		t.Fatalf("%d keys counted restored", p.Keys.Load())
	}
}

// TestRestoreSetsEachStringWhereMSETIsRefused: a user that may not run MSET (a cluster made
// before MSET was in the operator user's rules) gets every string in a SET of its own,
// every key restored and no MSET sent.
func TestRestoreSetsEachStringWhereMSETIsRefused(t *testing.T) {
	ctx := context.Background()
	source := stringsCut(t, ctx, 5000)
	dst := serversWithUser(t, ctx, 2, "nomset", "-mset")
	var p Progress
	err := Restore(ctx, RestoreTarget{Addrs: redistest.Addrs(dst), Dialer: Dialer{User: "nomset", Passwords: []string{password}}},
		[]func() (io.ReadCloser, error){source}, &p)
	if err != nil || p.Keys.Load() != 5000 {
		t.Fatalf("restore as a user without MSET: %d keys, %v", p.Keys.Load(), err)
	}
	sets, msets := commandCalls(t, ctx, dst, "set"), commandCalls(t, ctx, dst, "mset")
	if sets != 5000 || msets != 0 {
		t.Fatalf("%d SET and %d MSET calls for 5000 strings", sets, msets)
	}
}

// commandCalls is how many calls of cmd the servers' INFO commandstats count in all.
func commandCalls(t *testing.T, ctx context.Context, servers []*redistest.Server, cmd string) int {
	t.Helper()
	total := 0
	for _, s := range servers {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr, Password: password})
		info, err := c.Info(ctx, "commandstats").Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		_, after, _ := strings.Cut(info, "cmdstat_"+cmd+":calls=")
		n, _ := strconv.Atoi(strings.SplitN(after, ",", 2)[0])
		total += n
	}
	return total
}

// stringsCut loads n strings without an expiry into a master of its own and returns its
// snapshot as a source.
func stringsCut(t *testing.T, ctx context.Context, n int) func() (io.ReadCloser, error) {
	t.Helper()
	src, d := servers(t, 1)
	cc := clusterClient(t, src)
	defer cc.Close()
	for i := 0; i < n; i++ {
		k := fmt.Sprint("k:", i)
		if err := cc.c(k).Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, snaps, err := Take(ctx, d, redistest.Addrs(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rdbs := readSnapshots(t, snaps)
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(rdbs[0])), nil }
}

// serversWithUser starts n masters with a user name of every command but denied.
func serversWithUser(t *testing.T, ctx context.Context, n int, name string, denied ...string) []*redistest.Server {
	t.Helper()
	dst, _ := servers(t, n)
	for _, s := range dst {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr, Password: password})
		args := append([]any{"acl", "setuser", name, "on", ">" + password, "+@all", "~*"}, toAny(denied)...)
		err := c.Do(ctx, args...).Err()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// TestRestoreHoldsFailureDetectionForABigKey restores a 2,000,000-member sorted set into
// masters whose cluster-node-timeout is 300 ms: while it runs every master's timeout is
// raised to at least restoreHold (a RESTORE of such a key blocks its master for seconds on
// a loaded machine, and the others would flag it failing), no master is flagged failing
// nor does the cluster state leave ok, and every timeout is back to 300 ms afterwards.
func TestRestoreHoldsFailureDetectionForABigKey(t *testing.T) {
	ctx := context.Background()
	src, d := servers(t, 1)
	redistest.ZAddBig(ctx, t, src[0].Addr, password, "zbig", 2000000)
	_, snaps, err := Take(ctx, d, redistest.Addrs(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rdbs := readSnapshots(t, snaps)
	dst, _ := serversWith(t, 3, redistest.Config{NodeTimeout: 300 * time.Millisecond})
	stop := make(chan struct{})
	type seen struct {
		bad  []string
		held map[string]bool
	}
	watched := make(chan seen)
	go func() {
		w := seen{held: map[string]bool{}}
		defer func() { watched <- w }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for _, s := range dst {
				c := goredis.NewClient(&goredis.Options{Addr: s.Addr, Password: password, ReadTimeout: 20 * time.Second})
				info, _ := c.ClusterInfo(ctx).Result()
				nodes, _ := c.ClusterNodes(ctx).Result()
				v, _ := c.ConfigGet(ctx, "cluster-node-timeout").Result()
				c.Close()
				if info != "" && !strings.Contains(info, "cluster_state:ok") || strings.Contains(nodes, "fail") {
					w.bad = append(w.bad, fmt.Sprintf("%s: %s", s.Addr, nodes))
				}
				if len(v) == 2 {
					if ms, _ := strconv.Atoi(fmt.Sprint(v[1])); time.Duration(ms)*time.Millisecond >= restoreHold {
						w.held[s.Addr] = true
					}
				}
			}
		}
	}()
	var p Progress
	began := time.Now()
	source := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(rdbs[0])), nil }
	err = Restore(ctx, RestoreTarget{Addrs: redistest.Addrs(dst), Dialer: d}, []func() (io.ReadCloser, error){source}, &p)
	close(stop)
	w := <-watched
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restored the %d-byte sorted set in %v", p.Bytes.Load(), time.Since(began))
	if len(w.bad) > 0 {
		t.Fatalf("a master was flagged failing or the cluster not ok during the restore (%d times), first: %s", len(w.bad), w.bad[0])
	}
	if len(w.held) != len(dst) {
		t.Fatalf("cluster-node-timeout seen raised on %d of %d masters during the restore", len(w.held), len(dst))
	}
	for _, s := range dst {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr, Password: password})
		v, err := c.ConfigGet(ctx, "cluster-node-timeout").Result()
		n, _ := c.ZCard(ctx, "zbig").Result()
		c.Close()
		if err != nil || fmt.Sprint(v[1]) != "300" {
			t.Fatalf("%s: cluster-node-timeout %v (%v) after the restore, want 300", s.Addr, v, err)
		}
		if n != 0 && n != 2000000 {
			t.Fatalf("%s: zbig has %d members", s.Addr, n)
		}
	}
}
