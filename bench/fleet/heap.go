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
	if inuse, err := heapInuse(ctx); err == nil {
		line += fmt.Sprintf(", Go heap in use %.1f MiB", mib(inuse))
	}
	return line
}

// heapInuse reads HeapInuse from the runtime.MemStats that /debug/pprof/heap?debug=1 ends with.
func heapInuse(ctx context.Context) (int64, error) {
	body, err := pprofGet(ctx, "/debug/pprof/heap?debug=1")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no HeapInuse in the heap profile")
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
