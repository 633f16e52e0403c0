package redis

import (
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// A resize step takes what its caller already knows. On Valkey 9.1, whose servers move
// slots themselves: a refusal the caller found planning (Refused) ends the step with it
// once the new node is met, before any slot is touched; the servers the caller learnt
// (Servers, here saying Redis 7.0) choose the legacy mover, which the servers' own INFO
// server would not. 100,000 keys and a writer: none lost.
func TestScaleTakesWhatTheCallerKnows(t *testing.T) {
	t.Parallel()
	_, members, keys := valkeyCluster(t, 4, 0, "known", 100_000)
	counter := redistest.NewCommandCounter()
	f := newFactory(t, Options{Hooks: []goredis.Hook{counter}})
	w := startTLSWriter(t, members[:3], nil)
	ctx := ctxFor(t, 90*time.Second)
	req := ScaleRequest{Masters: 4, Keep: 4, Pipeline: 100, Budget: 2 * time.Second}

	refused := req
	refused.Refused = &topology.AssignError{Index: 0, Field: "slots", Problem: "found by the caller"}
	var err error
	for deadline := time.Now().Add(30 * time.Second); err == nil && time.Now().Before(deadline); {
		_, err = Scale(ctx, f, members, refused) // the first steps meet the new node
		time.Sleep(20 * time.Millisecond)
	}
	var ae *topology.AssignError
	if !errors.Is(err, topology.ErrRefused) || !errors.As(err, &ae) || ae.Problem != "found by the caller" {
		t.Fatalf("a step given a refusal: %v, want it refused with the caller's *AssignError", err)
	}
	for _, name := range counter.WriteNames() {
		if strings.Contains(name, "setslot") || strings.Contains(name, "migrate") {
			t.Fatalf("a refused resize wrote %s", name)
		}
	}

	req.Servers = map[string]topology.Server{}
	for _, m := range members {
		req.Servers[m.Pod] = topology.Server{Name: topology.ServerRedis, Version: "7.0.15"}
	}
	moved := scaleUntilDone(t, f, members, req)
	// The servers keep a log of their own migrations, finished ones too: none ran.
	if jobs := allJobs(t, f, members); len(jobs) > 0 {
		t.Fatalf("a resize whose caller says Redis 7.0 left %d slot migration jobs (%s): the servers moved slots", len(jobs), jobs[0].Name)
	}
	written, failed, gap := w.stop()
	t.Logf("legacy mover on Valkey 9.1: %d keys; writer %d acknowledged, %d failed, longest gap %v",
		moved, len(written), failed, gap)
	if moved < 20_000 || len(written) == 0 {
		t.Fatalf("moved %d keys (want about a quarter of 100,000), the writer wrote %d", moved, len(written))
	}
	if lost := lostKeysTLS(t, f, members, append(keys, written...), nil); lost > 0 {
		t.Fatalf("%d keys lost", lost)
	}
}
