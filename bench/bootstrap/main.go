// Command bootstrap measures how fast 6 fresh redis-server processes become one cluster of
// 3 masters and 3 replicas, formed by `redis-cli --cluster create --cluster-replicas 1` and
// by the operator's Bootstrap, side by side in the same run.
//
// Two times are taken from the moment every process accepts connections: until
// cluster_state is ok on every node, and until every node agrees on nodes and slots (all
// six known, same roles, same slot owners, all 16384 slots covered). Both are read by the
// same poller, so the methods are judged by the same eye.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

func main() {
	rounds := flag.Int("rounds", 5, "rounds; each round forms one cluster with each method")
	nodeTimeout := flag.Duration("node-timeout", 5*time.Second, "cluster-node-timeout of every server")
	poll := flag.Duration("poll", 10*time.Millisecond, "how often the observer reads every node")
	redisCli := flag.String("redis-cli", "/usr/bin/redis-cli", "redis-cli binary")
	delay := flag.Duration("delay", 0, "wait between all servers accepting connections and starting to form the "+
		"cluster; times are taken from the start of forming. Redis keeps a master's cluster_state fail for "+
		"2s after it starts (CLUSTER_WRITABLE_DELAY), so with 0 neither method can reach ok before 2s")
	flag.Parse()

	methods := []method{
		{"redis-cli", func(ctx context.Context, addrs []string) error { return createWithRedisCli(ctx, *redisCli, addrs) }},
		{"operator", createWithBootstrap},
	}
	results := map[string][]result{}
	for r := 1; r <= *rounds; r++ {
		// Alternate who goes first so neither always runs on a warmer machine.
		order := methods
		if r%2 == 0 {
			order = []method{methods[1], methods[0]}
		}
		for _, m := range order {
			res, err := measure(m, *nodeTimeout, *poll, *delay)
			if err != nil {
				fmt.Fprintf(os.Stderr, "round %d %s: %v\n", r, m.name, err)
				os.Exit(1)
			}
			results[m.name] = append(results[m.name], res)
			fmt.Printf("round %d  %-9s  ok on all nodes %7.3fs   all agree %7.3fs\n", r, m.name,
				res.ok.Seconds(), res.agreed.Seconds())
		}
	}
	report(results)
}

type method struct {
	name   string
	create func(ctx context.Context, addrs []string) error
}

type result struct{ ok, agreed time.Duration }

func measure(m method, nodeTimeout, poll, delay time.Duration) (result, error) {
	dir, err := os.MkdirTemp("", "bench-bootstrap-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	servers, err := redistest.StartServers(dir, 6, redistest.Config{NodeTimeout: nodeTimeout})
	if err != nil {
		return result{}, err
	}
	defer redistest.StopAll(servers)
	addrs := redistest.Addrs(servers)
	members := make([]redis.Member, len(addrs))
	for i, a := range addrs {
		members[i] = redis.Member{Pod: fmt.Sprintf("bench-%d", i), Addr: a}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	time.Sleep(delay)
	start := time.Now()
	created := make(chan error, 1)
	go func() { created <- m.create(ctx, addrs) }()

	observer := redis.NewFactory(redis.Options{})
	defer observer.Close()
	var res result
	for res.ok == 0 || res.agreed == 0 {
		st, err := redis.Observe(ctx, observer, members)
		if err != nil {
			return result{}, fmt.Errorf("failed to observe: %w (elapsed %v)", err, time.Since(start))
		}
		now := time.Since(start)
		if res.ok == 0 && st.ClusterOK() {
			res.ok = now
		}
		if res.agreed == 0 && st.AllMet() && st.Agreed() && st.AllSlotsCovered() &&
			st.Masters() == 3 && st.MastersHaveReplicas(1) {
			res.agreed = now
		}
		time.Sleep(poll)
	}
	if err := <-created; err != nil {
		return result{}, fmt.Errorf("failed to create the cluster: %w", err)
	}
	return res, nil
}

func createWithRedisCli(ctx context.Context, bin string, addrs []string) error {
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-cli: %w: %s", err, out)
	}
	return nil
}

func createWithBootstrap(ctx context.Context, addrs []string) error {
	members := make([]redis.Member, len(addrs))
	for i, a := range addrs {
		members[i] = redis.Member{Pod: fmt.Sprintf("bench-%d", i), Addr: a}
	}
	f := redis.NewFactory(redis.Options{})
	defer f.Close()
	_, err := redis.Bootstrap(ctx, f, members, 3, 1)
	return err
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func report(results map[string][]result) {
	med := map[string]result{}
	for name, rs := range results {
		var oks, ags []time.Duration
		for _, r := range rs {
			oks, ags = append(oks, r.ok), append(ags, r.agreed)
		}
		med[name] = result{median(oks), median(ags)}
	}
	cli, ours := med["redis-cli"], med["operator"]
	fmt.Printf("\nmedian of %d rounds      ok on all nodes   all agree\n", len(results["operator"]))
	fmt.Printf("redis-cli                %13.3fs %10.3fs\n", cli.ok.Seconds(), cli.agreed.Seconds())
	fmt.Printf("operator Bootstrap       %13.3fs %10.3fs\n", ours.ok.Seconds(), ours.agreed.Seconds())
	fmt.Printf("ratio operator/redis-cli %13.2f  %10.2f\n",
		ours.ok.Seconds()/cli.ok.Seconds(), ours.agreed.Seconds()/cli.agreed.Seconds())
}
