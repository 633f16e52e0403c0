package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// pprofAddr is where the bench's operator serves net/http/pprof (loopback only).
const pprofAddr = "127.0.0.1:18089"

// heapProfileFile is where the heap profile at the end of the idle window is saved.
const heapProfileFile = ".devcluster/logs/fleet-heap.pb.gz"

// rssLine spells RSS with its split (heap and stacks / the binary's pages) and the Go
// heap in use as the runtime reports it: RSS above HeapInuse is memory the runtime keeps
// or has not yet returned to the kernel.
func rssLine(ctx context.Context, p framework.ProcStats) string {
	line := fmt.Sprintf("%6.1f MiB (anon %.1f, file %.1f)", mib(p.RSS), mib(p.RSSAnon), mib(p.RSSFile))
	if m, err := memStats(ctx); err == nil {
		line += fmt.Sprintf(", Go heap in use %.1f MiB (stacks %.1f, heap freed but not yet returned %.1f)",
			mib(m["HeapInuse"]), mib(m["StackInuse"]), mib(m["HeapIdle"]-m["HeapReleased"]))
	}
	if n, err := goroutines(ctx); err == nil {
		line += fmt.Sprintf(", %d goroutines", n)
	}
	return line
}

// memStats reads the runtime.MemStats that /debug/pprof/heap?debug=1 ends with, as
// "# Name = value" lines (the first value of "# Stack = inuse / sys").
func memStats(ctx context.Context) (map[string]int64, error) {
	body, err := pprofGet(ctx, "/debug/pprof/heap?debug=1")
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for _, line := range strings.Split(string(body), "\n") {
		name, v, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if !ok || !strings.HasPrefix(line, "# ") {
			continue
		}
		first, _, _ := strings.Cut(v, " ")
		if n, err := strconv.ParseInt(first, 10, 64); err == nil {
			m[name] = n
		}
	}
	if _, ok := m["HeapInuse"]; !ok {
		return nil, fmt.Errorf("no HeapInuse in the heap profile")
	}
	m["StackInuse"] = m["Stack"]
	return m, nil
}

// goroutines reads the count that /debug/pprof/goroutine?debug=1 starts with.
func goroutines(ctx context.Context) (int, error) {
	body, err := pprofGet(ctx, "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(body), "\n")
	v, ok := strings.CutPrefix(first, "goroutine profile: total ")
	if !ok {
		return 0, fmt.Errorf("unexpected goroutine profile: %q", first)
	}
	return strconv.Atoi(strings.TrimSpace(v))
}

// saveHeapProfile writes the operator's heap profile to file.
func saveHeapProfile(ctx context.Context, file string) error {
	body, err := pprofGet(ctx, "/debug/pprof/heap")
	if err != nil {
		return err
	}
	return os.WriteFile(file, body, 0o644)
}

func pprofGet(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprofAddr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return io.ReadAll(resp.Body)
}
