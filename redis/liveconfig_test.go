package redis

import (
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// liveSamples is a value other than the default for each live directive, in the form
// CONFIG GET prints it back.
var liveSamples = map[string]string{
	"active-expire-effort":      "3",
	"hz":                        "20",
	"latency-monitor-threshold": "100",
	"lazyfree-lazy-eviction":    "yes",
	"lazyfree-lazy-expire":      "yes",
	"lazyfree-lazy-server-del":  "yes",
	"lazyfree-lazy-user-del":    "yes",
	"maxmemory":                 "104857600",
	"maxmemory-policy":          "allkeys-lru",
	"maxmemory-samples":         "10",
	"min-replicas-max-lag":      "5",
	"min-replicas-to-write":     "1",
	"notify-keyspace-events":    "xE",
	"repl-backlog-size":         "2097152",
	"repl-diskless-sync-delay":  "2",
	"repl-timeout":              "30",
	"slowlog-log-slower-than":   "5000",
	"slowlog-max-len":           "256",
	"tcp-keepalive":             "60",
	"timeout":                   "300",
}

// Every live directive is what a fresh cluster-enabled redis-server 7.0 reports as its
// default, and CONFIG SET changes it on the running server (and sets it back): the
// allow-list holds nothing that would need a restart or that Redis would refuse.
func TestLiveDirectivesAreSettable(t *testing.T) {
	servers := redistest.Start(t, 1, redistest.Config{})
	f := NewFactory(Options{})
	defer f.Close()
	c := f.For(servers[0].Addr)
	ctx := ctxFor(t, 10*time.Second)
	if !sort.SliceIsSorted(topology.LiveDirectives, func(i, j int) bool { return topology.LiveDirectives[i].Name < topology.LiveDirectives[j].Name }) {
		t.Errorf("topology.LiveDirectives are not sorted by name")
	}
	for _, d := range topology.LiveDirectives {
		sample, ok := liveSamples[d.Name]
		if !ok {
			t.Errorf("%s: no sample value in this test", d.Name)
			continue
		}
		if got, err := c.ConfigGet(ctx, d.Name); err != nil || got != d.Default {
			t.Errorf("%s: CONFIG GET on a fresh server = %q, %v; the list says the default is %q", d.Name, got, err, d.Default)
		}
		for _, v := range []string{sample, d.Default} {
			if err := c.ConfigSet(ctx, d.Name, v); err != nil {
				t.Errorf("CONFIG SET %s %q: %v", d.Name, v, err)
			} else if got, _ := c.ConfigGet(ctx, d.Name); got != v {
				t.Errorf("CONFIG SET %s %q, then CONFIG GET = %q", d.Name, v, got)
			}
		}
	}
}

// A setting a node refuses sets back what was set before it on that node, and names the
// directive; a node that stops answering mid-way sets back every node already changed.
func TestApplyLiveRollsBack(t *testing.T) {
	servers := redistest.Start(t, 2, redistest.Config{})
	addrs := redistest.Addrs(servers)
	f := NewFactory(Options{DialTimeout: 500 * time.Millisecond})
	defer f.Close()
	ctx := ctxFor(t, 20*time.Second)
	get := func(addr, name string) string {
		c := f.For(addr)
		v, err := c.ConfigGet(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := func(when, name, value string, addrs ...string) {
		for _, a := range addrs {
			if got := get(a, name); got != value {
				t.Errorf("%s: %s is %s %s, want %s", a, name, got, when, value)
			}
		}
	}
	good := []Setting{{Name: "maxmemory", Value: "100mb"}, {Name: "maxmemory-policy", Value: "allkeys-lru"}}
	if err := ApplyLive(ctx, f, addrs, good); err != nil {
		t.Fatalf("ApplyLive: %v", err)
	}
	want("after ApplyLive", "maxmemory", "104857600", addrs...)
	want("after ApplyLive", "maxmemory-policy", "allkeys-lru", addrs...)

	bad := []Setting{{Name: "maxmemory", Value: "200mb"}, {Name: "hz", Value: "30"}, {Name: "maxmemory-policy", Value: "bogus"}}
	err := ApplyLive(ctx, f, addrs, bad)
	var refused *ConfigRefusedError
	if !errors.As(err, &refused) || refused.Setting.Name != "maxmemory-policy" {
		t.Fatalf("ApplyLive with a bogus policy: %v, want a refusal naming maxmemory-policy", err)
	}
	want("after a refused change", "maxmemory", "104857600", addrs...)
	want("after a refused change", "hz", "10", addrs...)

	// TryLive leaves the node as it was when Redis takes the settings.
	if err := TryLive(ctx, f, addrs[0], []Setting{{Name: "maxmemory", Value: "300mb"}}); err != nil {
		t.Fatalf("TryLive: %v", err)
	}
	want("after TryLive", "maxmemory", "104857600", addrs[0])

	// The second node gone: the first, already set, is set back.
	servers[1].Stop()
	if err := ApplyLive(ctx, f, addrs, []Setting{{Name: "hz", Value: "40"}}); err == nil {
		t.Fatal("ApplyLive with a node down succeeded")
	}
	want("after a node failed mid-way", "hz", "10", addrs[0])
}
