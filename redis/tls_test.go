package redis

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// A cluster of TLS-only servers (port 0, tls-cluster, tls-replication; the pods of
// spec.tls with disablePlainPort) is formed by the operator's factory over TLS, takes
// 100,000 keys over TLS, and grows from 3 to 4 masters with a writer running: MIGRATE
// between the nodes goes over TLS (there is no plain port to go to) and no key is lost.
// Then the certificate is renewed: a node whose files have not changed is reported
// stale, and once the files are new every node serves the new certificate with no
// restart.
func TestTLSClusterMigratesAndReloadsCertificate(t *testing.T) {
	t.Parallel()
	ca, err := redistest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	first := issue(t, ca)
	dir := filepath.Join(t.TempDir(), "tls")
	if err := redistest.WriteTLSDir(dir, first); err != nil {
		t.Fatal(err)
	}
	clientCfg, err := redistest.ClientConfig(first)
	if err != nil {
		t.Fatal(err)
	}
	servers := redistest.Start(t, 8, redistest.Config{TLSDir: dir, TLSClient: clientCfg})
	members := membersOf(servers)
	opCfg, err := ClientTLSConfig(material(first))
	if err != nil {
		t.Fatal(err)
	}
	f := newFactory(t, Options{TLS: opCfg})
	if _, err := Bootstrap(ctxFor(t, 60*time.Second), f, members[:6], 3, 1); err != nil {
		t.Fatal(err)
	}
	keys := numberedKeys("tls", 100_000)
	putKeysTLS(t, f, members[:6], keys, clientCfg)

	w := startTLSWriter(t, members, clientCfg)
	moved := scaleUntilDone(t, f, members, ScaleRequest{Masters: 4, ReplicasPerMaster: 1, Keep: 8, Pipeline: 100, Budget: 2 * time.Second})
	written, failed, gap := w.stop()
	t.Logf("scaled 3 to 4 masters over TLS: %d keys moved, writer %d acknowledged writes, %d failed, longest gap %v", moved, len(written), failed, gap)
	if moved < 20_000 {
		t.Errorf("only %d keys moved for a quarter of the slots", moved)
	}
	if len(written) == 0 {
		t.Fatal("the writer wrote nothing")
	}
	if lost := lostKeysTLS(t, f, members, append(keys, written...), clientCfg); lost > 0 {
		t.Fatalf("%d keys lost", lost)
	}
	assertReplicasLinked(t, f, members)

	second := issue(t, ca)
	want, err := material(second).Leaf()
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	stale, err := ReloadCertificates(ctx, f, opCfg, addrsOf(members), want)
	if err != nil || len(stale) != len(members) {
		t.Fatalf("with the files unchanged every node must stay stale: stale %v, err %v", stale, err)
	}
	if err := redistest.WriteTLSDir(dir, second); err != nil {
		t.Fatal(err)
	}
	before := servedSerials(t, opCfg, members)
	if stale, err := ReloadCertificates(ctx, f, opCfg, addrsOf(members), want); err != nil || len(stale) > 0 {
		t.Fatalf("reload: stale %v, err %v", stale, err)
	}
	after := servedSerials(t, opCfg, members)
	for i, m := range members {
		if after[i] != SerialHex(want) || before[i] == after[i] {
			t.Errorf("%s served serial %s, then %s; want %s", m.Pod, before[i], after[i], SerialHex(want))
		}
		if servers[i].PID() == 0 {
			t.Errorf("%s was restarted", m.Pod)
		}
	}
	// The renewed servers still form one cluster and replicate over TLS.
	newCfg, err := ClientTLSConfig(material(second))
	if err != nil {
		t.Fatal(err)
	}
	f2 := newFactory(t, Options{TLS: newCfg})
	if lost := lostKeysTLS(t, f2, members, keys[:1000], clientCfg); lost > 0 {
		t.Fatalf("%d keys unreadable after the renewal", lost)
	}
	assertReplicasLinked(t, f2, members)
}

func issue(t *testing.T, ca *redistest.CA) map[string][]byte {
	t.Helper()
	data, err := ca.Issue("redis")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func material(data map[string][]byte) TLSMaterial {
	return TLSMaterial{Cert: data["tls.crt"], Key: data["tls.key"], CA: data["ca.crt"]}
}

func servedSerials(t *testing.T, cfg *tls.Config, members []topology.Member) []string {
	t.Helper()
	out := make([]string, len(members))
	for i, m := range members {
		c, err := ServedCertificate(ctxFor(t, 5*time.Second), m.Addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = SerialHex(c)
	}
	return out
}

// assertReplicasLinked checks every replica's link to its master is up: replication
// goes over TLS, as the servers have no plain port.
func assertReplicasLinked(t *testing.T, f Factory, members []topology.Member) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range members {
		for {
			r, err := f.For(m.Addr).Replication(ctxFor(t, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if r.Role == "master" || r.LinkUp {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %s has no link to its master", m.Pod)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// putKeysTLS writes each key (value: its index) on its owner over TLS, pipelined.
func putKeysTLS(t *testing.T, f Factory, members []topology.Member, keys []string, cfg *tls.Config) {
	t.Helper()
	ctx := ctxFor(t, 5*time.Minute)
	for addr, idx := range byOwner(t, f, members, keys) {
		c := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: 10 * time.Second, TLSConfig: cfg})
		for from := 0; from < len(idx); from += 1000 {
			_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, i := range idx[from:min(from+1000, len(idx))] {
					p.Set(ctx, keys[i], keys[i], 0)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("SET on %s: %v", addr, err)
			}
		}
		_ = c.Close()
	}
}

// lostKeysTLS counts the keys (value: the key's name) their owner cannot give back.
func lostKeysTLS(t *testing.T, f Factory, members []topology.Member, keys []string, cfg *tls.Config) int {
	t.Helper()
	ctx := ctxFor(t, 5*time.Minute)
	lost := 0
	for addr, idx := range byOwner(t, f, members, keys) {
		c := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: 10 * time.Second, TLSConfig: cfg})
		for from := 0; from < len(idx); from += 1000 {
			cmds := map[int]*goredis.StringCmd{}
			_, _ = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, i := range idx[from:min(from+1000, len(idx))] {
					cmds[i] = p.Get(ctx, keys[i])
				}
				return nil
			})
			for i, cmd := range cmds {
				if v, err := cmd.Result(); err != nil || v != keys[i] {
					lost++
				}
			}
		}
		_ = c.Close()
	}
	return lost
}

// tlsWriter writes tlsw-0, tlsw-1, … through a cluster client over TLS, one at a time,
// recording the keys Redis acknowledged and the longest time between two
// acknowledgements.
type tlsWriter struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	written []string
	failed  int
	gap     time.Duration
}

func startTLSWriter(t *testing.T, members []topology.Member, cfg *tls.Config) *tlsWriter {
	addrs := addrsOf(members)
	f := NewFactory(Options{TLS: cfg})
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, TLSConfig: cfg, MaxRedirects: 16,
		ClusterSlots: func(ctx context.Context) ([]goredis.ClusterSlot, error) { return ClusterSlots(ctx, f, addrs) }})
	ctx, cancel := context.WithCancel(context.Background())
	w := &tlsWriter{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer func() { _ = cc.Close(); _ = f.Close() }()
		last := time.Now()
		for i := 0; ctx.Err() == nil; i++ {
			key := fmt.Sprintf("tlsw-%d", i)
			opCtx, c := context.WithTimeout(ctx, 5*time.Second)
			err := cc.Set(opCtx, key, key, 0).Err()
			c()
			w.mu.Lock()
			if err == nil {
				w.written = append(w.written, key)
				w.gap = max(w.gap, time.Since(last))
				last = time.Now()
			} else if ctx.Err() == nil {
				w.failed++
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *tlsWriter) stop() ([]string, int, time.Duration) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written, w.failed, w.gap
}
