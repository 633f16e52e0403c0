package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// The restores: the operator's (spec.restoreFrom) and the reference's (redis-cli --pipe).

// operatorRestore creates name (3 masters, no replicas) with spec.restoreFrom and times
// the restore from startedAt appearing to completedAt appearing, polling every pollEvery.
func operatorRestore(ctx context.Context, s *framework.Stack, ns, name, from string, operatorPID, storePID int, profile string, pin *pinned) (figures, error) {
	f := figures{method: "operator restore"}
	c, err := typedClient(s)
	if err != nil {
		return f, err
	}
	if err := applyCluster(ctx, s, ns, name, 3, 0, from); err != nil {
		return f, err
	}
	profiled := func() error { return nil }
	defer func() { _ = profiled() }()
	var began time.Time
	var op0, store0, srv0 time.Duration
	var servers []int
	gate := pinGate{pin: pin}
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(pollEvery) {
		var rc redisv1alpha1.RedisCluster
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rc); err != nil {
			return f, err
		}
		st := rc.Status.Restore
		if ok, err := gate.ready(ctx, s, ns, name, st != nil && st.StartedAt != nil); !ok || err != nil {
			if err != nil {
				return f, err
			}
			continue
		}
		if st != nil && st.StartedAt != nil && began.IsZero() {
			began, op0, store0 = time.Now(), procCPU(operatorPID), procCPU(storePID)
			if servers, _, err = podServers(ctx, s, ns, name+"-"); err == nil {
				srv0 = sumCPU(servers)
			}
			profiled = profileOperator(profile, name)
		}
		if st != nil && st.CompletedAt != nil {
			if began.IsZero() || st.Attempts != 1 {
				return f, fmt.Errorf("%s: completed in %d attempts, seen started: %v (poll faster)", name, st.Attempts, !began.IsZero())
			}
			f.took, f.keys, f.bytes = time.Since(began), st.Keys, st.Bytes
			f.cpu = cpuUse{clientName: "operator", client: procCPU(operatorPID) - op0, store: procCPU(storePID) - store0}
			if len(servers) == 3 { // the masters' processes, found by their pods
				f.cpu.servers = sumCPU(servers) - srv0
			}
			break
		}
		if time.Now().After(deadline) {
			return f, fmt.Errorf("%s: not restored: %+v", name, st)
		}
	}
	n, err := dbsize(ctx, s.RouterFor(ns, name, ""))
	if err != nil {
		return f, err
	}
	if n != f.keys {
		return f, fmt.Errorf("%s holds %d keys, the restore says %d", name, n, f.keys)
	}
	return f, nil
}

// pinGate pins a restore's servers (-pin) before the restore starts: ready once they are,
// at once without -pin. A restore seen started before, or at the first look after (it may
// have started just before the pinning), would be timed partly unpinned, and fails.
type pinGate struct {
	pin         *pinned
	done, fresh bool
}

func (g *pinGate) ready(ctx context.Context, s *framework.Stack, ns, name string, started bool) (bool, error) {
	switch {
	case g.pin == nil || g.done && !g.fresh:
		return true, nil
	case started:
		return false, fmt.Errorf("%s: the restore started before its servers were pinned", name)
	case g.fresh:
		g.fresh = false
		return true, nil
	}
	ok, err := g.pin.servers(ctx, s, ns, name+"-", 3)
	g.done, g.fresh = ok, ok
	return false, err
}

// cliRestore creates name (3 masters, no replicas) and loads the same keys into it with
// redis-cli --pipe (cliPipe).
func cliRestore(ctx context.Context, s *framework.Stack, ns, name string, data dataset, cfg config, pin *pinned) (figures, error) {
	if err := applyCluster(ctx, s, ns, name, 3, 0, ""); err != nil {
		return figures{}, err
	}
	if err := s.WaitForPhase(ctx, ns, name, "Running", 5*time.Minute); err != nil {
		return figures{}, err
	}
	if err := pin.mustServers(ctx, s, ns, name+"-", 3); err != nil {
		return figures{}, err
	}
	password, err := s.Password(ctx, ns, name)
	if err != nil {
		return figures{}, err
	}
	r := s.RouterFor(ns, name, "")
	defer r.Close()
	return cliPipe(ctx, r, password, data, cfg)
}

// cliPipe loads data into the cluster r routes to with redis-cli --pipe, one per master in
// parallel, each master its keys as RESP commands built beforehand, and counts its keys.
func cliPipe(ctx context.Context, r *framework.Router, password string, data dataset, cfg config) (figures, error) {
	f := figures{method: "redis-cli --pipe (parallel)"}
	if err := r.Refresh(ctx); err != nil {
		return f, err
	}
	proto := map[string]*bytes.Buffer{}
	for i := 0; i < data.keys; i++ {
		c := data.cmd(i)
		o := r.Owner(framework.KeySlot(c[1].(string)))
		if proto[o] == nil {
			proto[o] = &bytes.Buffer{}
		}
		b := proto[o]
		fmt.Fprintf(b, "*%d\r\n", len(c))
		for _, a := range c {
			v := fmt.Sprint(a)
			fmt.Fprintf(b, "$%d\r\n%s\r\n", len(v), v)
		}
	}
	var addrs []string
	for addr := range proto {
		addrs = append(addrs, addr)
	}
	srvBefore := serversCPU(addrs, password)
	began := time.Now()
	type result struct {
		err error
		cpu time.Duration
	}
	errs := make(chan result, len(proto))
	for addr, b := range proto {
		f.bytes += int64(b.Len())
		go func() {
			host, port, _ := strings.Cut(addr, ":")
			cmd := exec.CommandContext(ctx, cfg.redisCli, "-h", host, "-p", port, "--no-auth-warning", "--pipe")
			cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+password)
			cmd.Stdin = bytes.NewReader(b.Bytes())
			out, err := cmd.CombinedOutput()
			if err == nil && !strings.Contains(string(out), "errors: 0,") {
				err = fmt.Errorf("errors reported")
			}
			if err != nil {
				err = fmt.Errorf("redis-cli --pipe %s: %w: %s", addr, err, out)
			}
			var cpu time.Duration
			if cmd.ProcessState != nil {
				cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			errs <- result{err, cpu}
		}()
	}
	for range proto {
		res := <-errs
		if res.err != nil {
			return f, res.err
		}
		f.cpu.client += res.cpu
	}
	f.took = time.Since(began)
	f.cpu.servers = serversCPU(addrs, password) - srvBefore
	commandStats(addrs, password, "set")
	n, err := dbsize(ctx, r)
	if err != nil {
		return f, err
	}
	if n != int64(data.keys) {
		return f, fmt.Errorf("%d keys after --pipe, want %d", n, data.keys)
	}
	f.keys = n
	return f, nil
}

// dbsize sums DBSIZE over the masters r routes to, and closes r.
func dbsize(ctx context.Context, r *framework.Router) (int64, error) {
	defer r.Close()
	if err := r.Refresh(ctx); err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	var total int64
	for slot := 0; slot < 16384; slot++ {
		// A key of each master's first slot routes DBSIZE to it.
		if o := r.Owner(slot); !seen[o] {
			seen[o] = true
			n, err := r.Do(ctx, slotKey(slot), "dbsize").Int64()
			if err != nil {
				return 0, err
			}
			total += n
		}
	}
	return total, nil
}
