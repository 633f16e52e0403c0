package backup

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/rdb"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// podArgs are the replication settings the pods run with (templates/configmap.cue): a
// full sync's fork starts at once (Redis' default waits 5 s); repl-diskless-sync is
// yes by default in every server the project runs.
var podArgs = []string{"--repl-diskless-sync-delay", "0"}

// TestDisklessCutOnEveryServer cuts 3 masters of every server the project ships an image
// for, configured as the pods are, loaded with 100,000 keys and written to by 3 writers
// while the cut is taken; the third master has repl-diskless-sync-delay 5. The first two
// stream their snapshots diskless, the third writes its own to disk (a diskless one would
// fork 5 s after the cut), and the cut holds: every loaded key and every write
// acknowledged before the pause began is in the snapshots, none sent after it ended is,
// and each writer's writes in them form a prefix of its sequence.
func TestDisklessCutOnEveryServer(t *testing.T) {
	ctx := context.Background()
	for _, img := range redistest.Images {
		t.Run(img.Name, func(t *testing.T) {
			srv, d := serversWith(t, 3, redistest.Config{Binary: redistest.ServerBinary(t, img), Args: podArgs})
			c := goredis.NewClient(&goredis.Options{Addr: srv[2].Addr, Password: password})
			err := c.ConfigSet(ctx, "repl-diskless-sync-delay", "5").Err()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			cc := clusterClient(t, srv)
			defer cc.Close()
			const loaded = 100_000
			loadStrings(t, ctx, cc, loaded)
			stopWriters := startWriters(ctx, cc, 3)
			time.Sleep(300 * time.Millisecond)
			cut, snaps, err := Take(ctx, d, redistest.Addrs(srv), Options{})
			if err != nil {
				stopWriters()
				t.Fatal(err)
			}
			began := time.Now()
			rdbs := readSnapshots(t, snaps)
			read := time.Since(began)
			time.Sleep(200 * time.Millisecond) // writes after the cut
			writes := stopWriters()
			for _, s := range cut.Shards {
				wantDiskless := s.Addr != srv[2].Addr
				if s.Diskless != wantDiskless || (!wantDiskless && s.DiskReason != "repl-diskless-sync-delay 5") {
					t.Fatalf("%s: diskless %v (%q), want %v", s.Addr, s.Diskless, s.DiskReason, wantDiskless)
				}
			}
			keys := rdbKeys(t, rdbs)
			for i := 0; i < loaded; i++ {
				if k := fmt.Sprint("k:", i); !keys[k] {
					t.Fatalf("loaded key %s is not in the snapshots", k)
				}
			}
			acked, present, gap := checkCutWrites(t, writes, cut, func(k string) bool { return keys[k] })
			t.Logf("%s: writes paused %v, snapshots %s, read in %v; %d keys; writers: %d acknowledged, %d in the cut, 0 lost, longest gap %v",
				img.Name, cut.Paused, cut.Snapshots(), read, len(keys), acked, present, gap)
		})
	}
}

// rdbKeys reads RDB files whole (their checksums checked) and returns their keys.
func rdbKeys(t *testing.T, rdbs [][]byte) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for _, b := range rdbs {
		if _, err := rdb.Scan(bytes.NewReader(b), func(e *rdb.Entry) error { keys[string(e.Key)] = true; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// loadStrings writes n strings k:0 ... k:n-1, pipelined by master.
func loadStrings(t *testing.T, ctx context.Context, cc *router, n int) {
	t.Helper()
	pipes := map[*goredis.Client]goredis.Pipeliner{}
	flush := func(p goredis.Pipeliner) {
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		k := fmt.Sprint("k:", i)
		c := cc.c(k)
		if pipes[c] == nil {
			pipes[c] = c.Pipeline()
		}
		pipes[c].Set(ctx, k, fmt.Sprint("value-", i), 0)
		if pipes[c].Len() == 1000 {
			flush(pipes[c])
		}
	}
	for _, p := range pipes {
		flush(p)
	}
}

// startWriters runs n writers on cc, writer w setting w<w>:0, w<w>:1, ... one at a time,
// until the returned stop, which gives every writer's writes in order.
func startWriters(ctx context.Context, cc *router, n int) (stop func() [][]write) {
	var mu sync.Mutex
	// Sized before the writers start: growing it while they append under mu is a race.
	writes := make([][]write, n)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				k := fmt.Sprintf("w%d:%d", w, i)
				wr := write{key: k, sent: time.Now()}
				if cc.c(k).Set(ctx, k, "x", 0).Err() == nil {
					wr.acked = time.Now()
				}
				mu.Lock()
				writes[w] = append(writes[w], wr)
				mu.Unlock()
			}
		}()
	}
	return func() [][]write {
		close(done)
		wg.Wait()
		return writes
	}
}

// checkCutWrites checks the writers' writes against what a cut holds (in): every write
// acknowledged before the pause began is in it (else lost), none sent after the pause
// ended is, and each writer's writes in it form a prefix of its sequence (every master
// was cut at one point). It returns the writes acknowledged, those in the cut, and the
// longest time between two acknowledged writes of one writer.
func checkCutWrites(t *testing.T, writes [][]write, cut *Cut, in func(key string) bool) (acked, present int, gap time.Duration) {
	t.Helper()
	lost, presentAfter := 0, 0
	for w := range writes {
		lastPresent := -1
		var lastAcked time.Time
		for i, wr := range writes[w] {
			if !wr.acked.IsZero() {
				acked++
				if !lastAcked.IsZero() {
					gap = max(gap, wr.acked.Sub(lastAcked))
				}
				lastAcked = wr.acked
			}
			if !in(wr.key) {
				if !wr.acked.IsZero() && wr.acked.Before(cut.PauseBegan) {
					lost++
				}
				continue
			}
			present++
			if i != lastPresent+1 {
				t.Errorf("writer %d: %s is in the cut but an earlier write of the same writer is not", w, wr.key)
			}
			lastPresent = i
			if wr.sent.After(cut.PauseEnded) {
				presentAfter++
			}
		}
	}
	if acked < 20 {
		t.Fatalf("the writers had only %d writes acknowledged: too few to judge the cut", acked)
	}
	if lost > 0 || presentAfter > 0 {
		t.Fatalf("%d writes acknowledged before the pause are missing, %d sent after it are present", lost, presentAfter)
	}
	return acked, present, gap
}
