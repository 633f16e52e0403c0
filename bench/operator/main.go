// Command operator measures how fast the whole operator forms the demo RedisCluster (6 pods,
// 3 masters, 1 replica each) on the devcluster, beside `redis-cli --cluster create
// --cluster-replicas 1` on 6 fresh redis-server processes, in the same run.
//
// For the operator, times are taken from T0, the moment this program sees the last of the 6
// pods become Ready (the Ready condition's lastTransitionTime has only 1 s resolution): until
// cluster_state ok on every node, until every node agrees on nodes and slots (read by pod IP
// with the same poller as bench/bootstrap), and until status.phase is Running. For redis-cli,
// from the moment every process accepts connections.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/bench/internal/formbench"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

func main() {
	rounds := flag.Int("rounds", 3, "rounds; each forms the demo cluster with the operator and one with redis-cli")
	poll := flag.Duration("poll", 10*time.Millisecond, "how often the Redis nodes are read")
	nodeTimeout := flag.Duration("node-timeout", 5*time.Second,
		"cluster-node-timeout of the redis-cli side's servers; the operator's templates/configmap.cue sets 5000")
	redisCli := flag.String("redis-cli", "/usr/bin/redis-cli", "redis-cli binary")
	flag.Parse()

	// Ctrl-C cancels the run, and the deferred stops (operator, devcluster) still happen.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *rounds, *poll, *nodeTimeout, formbench.RedisCli(*redisCli)); err != nil {
		fmt.Fprintln(os.Stderr, "bench/operator:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rounds int, poll, nodeTimeout time.Duration, redisCli formbench.CreateFunc) error {
	return framework.WithCRD(ctx, func(s *framework.Stack) error { return runOn(ctx, s, rounds, poll, nodeTimeout, redisCli) })
}

// runOn is the bench on a devcluster with the CRD installed.
func runOn(ctx context.Context, s *framework.Stack, rounds int, poll, nodeTimeout time.Duration, redisCli formbench.CreateFunc) error {
	op, err := s.StartOperator("--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0")
	if err != nil {
		return err
	}
	defer op.Stop()
	fmt.Printf("operator pid %d, logs in %s\n", op.PID(), op.Logs)

	sample := filepath.Join(s.Root, "config", "samples", "redis_v1alpha1_rediscluster.yaml")
	var ops []operatorResult
	var clis []formbench.Result
	for r := 1; r <= rounds; r++ {
		ns := fmt.Sprintf("bench-operator-%d-%d", time.Now().Unix(), r)
		operatorSide := func() error {
			res, err := operatorRound(ctx, s, sample, ns, poll)
			if err != nil {
				return fmt.Errorf("round %d operator: %w (operator logs: %s)", r, err, op.Logs)
			}
			ops = append(ops, res)
			fmt.Printf("round %d  operator   ok on all nodes %7.3fs   all agree %7.3fs   Running %7.3fs   (pods Ready %.1fs after apply; from pods running: ok %.3fs, agree %.3fs)\n",
				r, res.OK.Seconds(), res.Agreed.Seconds(), res.Running.Seconds(), res.PodsReady.Seconds(), res.FromUp.OK.Seconds(), res.FromUp.Agreed.Seconds())
			return nil
		}
		cliSide := func() error {
			res, err := formbench.Fresh(ctx, redisCli, nodeTimeout, poll, 0)
			if err != nil {
				return fmt.Errorf("round %d redis-cli: %w", r, err)
			}
			clis = append(clis, res)
			fmt.Printf("round %d  redis-cli  ok on all nodes %7.3fs   all agree %7.3fs\n", r, res.OK.Seconds(), res.Agreed.Seconds())
			return nil
		}
		// Alternate who goes first so neither always runs on a warmer machine.
		sides := []func() error{operatorSide, cliSide}
		if r%2 == 0 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return err
			}
		}
	}
	report(ops, clis)
	return nil
}

func report(ops []operatorResult, clis []formbench.Result) {
	var ook, oag, orun, uok, uag, cok, cag []time.Duration
	for _, r := range ops {
		ook, oag, orun = append(ook, r.OK), append(oag, r.Agreed), append(orun, r.Running)
		uok, uag = append(uok, r.FromUp.OK), append(uag, r.FromUp.Agreed)
	}
	for _, r := range clis {
		cok, cag = append(cok, r.OK), append(cag, r.Agreed)
	}
	o := formbench.Result{OK: formbench.Median(ook), Agreed: formbench.Median(oag)}
	c := formbench.Result{OK: formbench.Median(cok), Agreed: formbench.Median(cag)}
	fmt.Printf("\nmedian of %d rounds                 ok on all nodes   all agree   phase Running\n", len(ops))
	u := formbench.Result{OK: formbench.Median(uok), Agreed: formbench.Median(uag)}
	fmt.Printf("operator (from all pods Ready)      %13.3fs %10.3fs %14.3fs\n", o.OK.Seconds(), o.Agreed.Seconds(), formbench.Median(orun).Seconds())
	fmt.Printf("operator (from all pods running)    %13.3fs %10.3fs\n", u.OK.Seconds(), u.Agreed.Seconds())
	fmt.Printf("redis-cli (from processes accept)   %13.3fs %10.3fs\n", c.OK.Seconds(), c.Agreed.Seconds())
	fmt.Printf("ratio operator/redis-cli, from Ready   %10.2f  %10.2f\n", o.OK.Seconds()/c.OK.Seconds(), o.Agreed.Seconds()/c.Agreed.Seconds())
	fmt.Printf("ratio operator/redis-cli, from running %10.2f  %10.2f\n", u.OK.Seconds()/c.OK.Seconds(), u.Agreed.Seconds()/c.Agreed.Seconds())
}
