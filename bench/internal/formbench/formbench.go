// Package formbench measures how fast 6 Redis nodes become one cluster of 3 masters and
// 3 replicas. bench/bootstrap and bench/operator share it, so both judge "ok" and "agreed"
// with the same eye and run redis-cli the same way.
package formbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Result is the time from the start of timing until cluster_state ok on every node (OK)
// and until every node agrees on nodes and slots (Agreed).
type Result struct{ OK, Agreed time.Duration }

// CreateFunc forms one cluster of 3 masters with one replica each from addrs.
type CreateFunc func(ctx context.Context, addrs []string) error

// Settled is the "all agree" measure: all six know all six (no handshake), the same roles,
// masters and slot owners everywhere, all 16384 slots covered by 3 masters with a replica each.
func Settled(st *topology.ClusterState) bool {
	return st.AllMet() && st.Agreed() && st.AllSlotsCovered() && st.Masters() == 3 && st.MastersHaveReplicas(1)
}

// Members names addrs as bench-0..n-1.
func Members(addrs []string) []topology.Member {
	members := make([]topology.Member, len(addrs))
	for i, a := range addrs {
		members[i] = topology.Member{Pod: fmt.Sprintf("bench-%d", i), Addr: a}
	}
	return members
}

// Poll reads CLUSTER NODES and CLUSTER INFO of every member each interval until it has seen
// cluster_state ok everywhere and Settled, and returns the moments it first saw each.
func Poll(ctx context.Context, members []topology.Member, every time.Duration) (ok, agreed time.Time, err error) {
	f := redis.NewFactory(redis.Options{})
	defer f.Close()
	for ok.IsZero() || agreed.IsZero() {
		st, err := redis.Observe(ctx, f, members)
		if err != nil {
			return ok, agreed, fmt.Errorf("failed to observe the redis nodes: %w", err)
		}
		now := time.Now()
		if ok.IsZero() && st.ClusterOK() {
			ok = now
		}
		if agreed.IsZero() && Settled(st) {
			agreed = now
		}
		time.Sleep(every)
	}
	return ok, agreed, nil
}

// Fresh starts 6 fresh cluster-enabled redis-server processes with cluster-node-timeout
// nodeTimeout, waits delay once every one accepts connections, runs create, and times it
// from then with Poll.
func Fresh(ctx context.Context, create CreateFunc, nodeTimeout, poll, delay time.Duration) (Result, error) {
	dir, err := os.MkdirTemp("", "bench-formation-")
	if err != nil {
		return Result{}, fmt.Errorf("failed to create a data dir: %w", err)
	}
	defer os.RemoveAll(dir)
	servers, err := redistest.StartServers(dir, 6, redistest.Config{NodeTimeout: nodeTimeout})
	if err != nil {
		return Result{}, fmt.Errorf("failed to start redis-servers: %w", err)
	}
	defer redistest.StopAll(servers)
	addrs := redistest.Addrs(servers)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	time.Sleep(delay)
	start := time.Now()
	created := make(chan error, 1)
	go func() { created <- create(ctx, addrs) }()
	ok, agreed, err := Poll(ctx, Members(addrs), poll)
	if err != nil {
		return Result{}, fmt.Errorf("%w (elapsed %v)", err, time.Since(start))
	}
	if err := <-created; err != nil {
		return Result{}, fmt.Errorf("failed to create the cluster: %w", err)
	}
	return Result{OK: ok.Sub(start), Agreed: agreed.Sub(start)}, nil
}

// RedisCli returns a CreateFunc running `bin --cluster create ADDRS --cluster-replicas 1 --cluster-yes`.
func RedisCli(bin string) CreateFunc {
	return func(ctx context.Context, addrs []string) error {
		args := append([]string{"--cluster", "create"}, addrs...)
		args = append(args, "--cluster-replicas", "1", "--cluster-yes")
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("failed to run redis-cli --cluster create: %w: %s", err, out)
		}
		return nil
	}
}

// Median of ds (the mean of the two middle values for an even count); 0 for none.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
