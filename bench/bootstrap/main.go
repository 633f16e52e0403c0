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
	"time"

	"github.com/hc-middleware/redis-cluster-operator/bench/internal/formbench"
	"github.com/hc-middleware/redis-cluster-operator/redis"
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
		{"redis-cli", formbench.RedisCli(*redisCli)},
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
				res.OK.Seconds(), res.Agreed.Seconds())
		}
	}
	report(results)
}

type method struct {
	name   string
	create formbench.CreateFunc
}

type result = formbench.Result

func measure(m method, nodeTimeout, poll, delay time.Duration) (result, error) {
	return formbench.Fresh(context.Background(), m.create, nodeTimeout, poll, delay)
}

func createWithBootstrap(ctx context.Context, addrs []string) error {
	f := redis.NewFactory(redis.Options{})
	defer f.Close()
	_, err := redis.Bootstrap(ctx, f, formbench.Members(addrs), 3, 1)
	return err
}

func report(results map[string][]result) {
	med := map[string]result{}
	for name, rs := range results {
		var oks, ags []time.Duration
		for _, r := range rs {
			oks, ags = append(oks, r.OK), append(ags, r.Agreed)
		}
		med[name] = result{OK: formbench.Median(oks), Agreed: formbench.Median(ags)}
	}
	cli, ours := med["redis-cli"], med["operator"]
	fmt.Printf("\nmedian of %d rounds      ok on all nodes   all agree\n", len(results["operator"]))
	fmt.Printf("redis-cli                %13.3fs %10.3fs\n", cli.OK.Seconds(), cli.Agreed.Seconds())
	fmt.Printf("operator Bootstrap       %13.3fs %10.3fs\n", ours.OK.Seconds(), ours.Agreed.Seconds())
	fmt.Printf("ratio operator/redis-cli %13.2f  %10.2f\n",
		ours.OK.Seconds()/cli.OK.Seconds(), ours.Agreed.Seconds()/cli.Agreed.Seconds())
}
