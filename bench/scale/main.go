// Command scale measures how fast slots and their keys move when a Redis Cluster of 3
// masters grows to 4 and shrinks back, by `redis-cli --cluster rebalance` and by the
// operator's redis.Scale, side by side in the same run on plain redis-server processes,
// and (-devcluster) by the whole operator on the devcluster: `kubectl scale rec/demo`
// 6 → 8 → 6 pods, 3 masters with a replica each growing to 4 (devcluster.go), beside
// redis-cli on servers like its pods (a replica each, the pods' AOF: redis-cli-pods).
//
// Each round and each method gets fresh servers: 3 masters formed, N keys loaded, an
// empty fourth master met. The scale-out is `redis-cli --cluster rebalance
// --cluster-use-empty-masters` or redis.Scale to 4 masters; the scale-in is `redis-cli
// --cluster rebalance --cluster-weight <fourth>=0` or redis.Scale keeping the first 3.
// A writer runs through each move; after each, every loaded key and every acknowledged
// write is read back from its slot's owner. Each move is timed end to end and over its
// moving phase, from the first slot opened to the last closed (moving.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/bench/internal/profile"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

var verbose bool

// keepLogs, when set (-logs), is where each round's server logs are copied before its
// servers are removed (Valkey's log has the slot migrations' state changes, to the ms).
var keepLogs string

type config struct {
	keys, valueSize, pipeline int
	budget, nodeTimeout       time.Duration
	redisCli                  string
	// legacyMover forces the operator's legacy mover (-valkey's operator-legacy).
	legacyMover bool
}

func main() {
	var cfg config
	rounds := flag.Int("rounds", 3, "rounds; each round scales out and in once with each method")
	flag.IntVar(&cfg.keys, "keys", 1_000_000, "keys loaded before the scale-out")
	flag.IntVar(&cfg.valueSize, "value", 64, "bytes per value")
	flag.IntVar(&cfg.pipeline, "pipeline", 100, "keys per MIGRATE: --cluster-pipeline and ScaleRequest.Pipeline")
	flag.DurationVar(&cfg.budget, "budget", 2*time.Second, "ScaleRequest.Budget of one operator step (the controller's scaleBudget)")
	flag.DurationVar(&cfg.nodeTimeout, "node-timeout", 5*time.Second, "cluster-node-timeout of every server (the pods' value)")
	flag.StringVar(&cfg.redisCli, "redis-cli", "/usr/bin/redis-cli", "redis-cli binary")
	flag.BoolVar(&verbose, "v", false, "print every operator step, and each move's longest write gap with its shard and times")
	flag.StringVar(&keepLogs, "logs", "", "copy every server's log to this directory (ROUND-METHOD-N.log) before its servers are removed")
	only := flag.String("only", "", "run only these methods, comma-separated (redis-cli, operator, redis-cli-pods, operator-pods, devcluster; with -valkey: valkey-cli, operator-asm, operator-asm-batched, operator-asm-all, operator-asm-8k, operator-legacy), e.g. to profile one; devcluster also needs -devcluster")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this program (redis.Scale runs in it) to this file")
	valkey := flag.Bool("valkey", false, "run on Valkey 9.1 (the project's image, bin/images/valkey-9.1.tar): valkey-cli --cluster rebalance vs the operator's atomic slot migration (CLUSTER MIGRATESLOTS) vs its legacy MIGRATE mover, on plain servers")
	onDevcluster := flag.Bool("devcluster", false, "also scale the demo RedisCluster 6 -> 8 -> 6 pods through the operator on the devcluster")
	flag.Parse()
	stopProfile := profile.StartCPU("bench/scale", *cpuProfile)
	defer stopProfile()
	if *valkey {
		dir, err := os.MkdirTemp("", "bench-scale-valkey-")
		if err == nil {
			defer os.RemoveAll(dir)
			serverBinary, err = redistest.ImageBinary(dir, "valkey-9.1", "valkey-server")
		}
		if err == nil {
			cfg.redisCli, err = redistest.ImageBinary(dir, "valkey-9.1", "valkey-cli")
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/scale:", err)
			os.Exit(1)
		}
		methods := valkeyMethods
		if *only != "" {
			methods = filter(methods, *only)
		}
		if err := runRounds(cfg, *rounds, methods, nil); err != nil {
			fmt.Fprintln(os.Stderr, "bench/scale:", err)
			os.Exit(1)
		}
		return
	}
	names := strings.Split(*only, ",")
	switch {
	case *only != "" && slices.Contains(names, devclusterMethod) && !*onDevcluster:
		fmt.Fprintln(os.Stderr, "bench/scale: -only devcluster needs -devcluster")
		os.Exit(2)
	case *only != "" && !slices.Contains(names, devclusterMethod):
		*onDevcluster = false // -only names the methods to run, and not this one
	}
	if *onDevcluster {
		err := withDevcluster(context.Background(), func(d *devcluster) error {
			return runAll(cfg, *rounds, *only, d)
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/scale:", err)
			os.Exit(1)
		}
		return
	}
	if err := runAll(cfg, *rounds, *only, nil); err != nil {
		fmt.Fprintln(os.Stderr, "bench/scale:", err)
		os.Exit(1)
	}
}

// valkeyMethods are -valkey's: valkey-cli (9.1.2's still moves keys with MIGRATE), the
// operator with the servers' own migration, the same with every job of a source and
// target started at once (redis.AtomicJobsPerSource 0, the mover before 2026-11-28
// 02:00), the same with every source exporting to a target at once too
// (redis.AtomicSourcesPerTarget 0 as well, the mover before 2026-11-28), the operator's
// with jobs of half the keys, and the operator's legacy mover forced.
var valkeyMethods = []method{{"valkey-cli", cliOut, cliIn, false}, {"operator-asm", opOut, opIn, false},
	{"operator-asm-batched", atomicLimits(opOut, 0, 1), atomicLimits(opIn, 0, 1), false},
	{"operator-asm-all", atomicLimits(opOut, 0, 0), atomicLimits(opIn, 0, 0), false},
	{"operator-asm-8k", smallJobs(opOut), smallJobs(opIn), false},
	{"operator-legacy", legacy(opOut), legacy(opIn), false}}

// atomicLimits runs move with redis.AtomicJobsPerSource and redis.AtomicSourcesPerTarget
// set to jobs and sources.
func atomicLimits(move func(context.Context, *cluster, config) error, jobs, sources int) func(context.Context, *cluster, config) error {
	return func(ctx context.Context, c *cluster, cfg config) error {
		defer func(j, s int) { redis.AtomicJobsPerSource, redis.AtomicSourcesPerTarget = j, s }(redis.AtomicJobsPerSource, redis.AtomicSourcesPerTarget)
		redis.AtomicJobsPerSource, redis.AtomicSourcesPerTarget = jobs, sources
		return move(ctx, c, cfg)
	}
}

// smallJobs runs move with jobs of at most 8,192 keys (redis.AtomicJobKeys), half the
// operator's: a hand-off deletes half the keys, at the cost of twice the hand-offs.
func smallJobs(move func(context.Context, *cluster, config) error) func(context.Context, *cluster, config) error {
	return func(ctx context.Context, c *cluster, cfg config) error {
		defer func(n float64) { redis.AtomicJobKeys = n }(redis.AtomicJobKeys)
		redis.AtomicJobKeys = 8192
		return move(ctx, c, cfg)
	}
}

// legacy runs move with the legacy mover forced (ScaleRequest.LegacyMover).
func legacy(move func(context.Context, *cluster, config) error) func(context.Context, *cluster, config) error {
	return func(ctx context.Context, c *cluster, cfg config) error {
		cfg.legacyMover = true
		return move(ctx, c, cfg)
	}
}

// runAll runs the rounds of every method (and of the devcluster side when d is set), and
// reports; it fails on the first error or lost key.
func runAll(cfg config, rounds int, only string, d *devcluster) error {

	methods := []method{{"redis-cli", cliOut, cliIn, false}, {"operator", opOut, opIn, false},
		{podCliMethod, cliOut, cliIn, true}, {podOpMethod, opOut, opIn, true}}
	switch {
	case only != "":
		methods = filter(methods, only)
	case d == nil:
		// The pod-like servers are the devcluster side's reference.
		methods = methods[:2]
	}
	return runRounds(cfg, rounds, methods, d)
}

// runRounds runs the rounds of the methods, alternating their order (and the devcluster
// side's when d is set), and reports; it fails on the first error or lost key.
func runRounds(cfg config, rounds int, methods []method, d *devcluster) error {
	perSlot := keysPerSlot(cfg.keys)
	var all []result
	for r := 1; r <= rounds; r++ {
		order := methods
		if r%2 == 0 { // alternate who goes first: neither always runs on a warmer machine
			order = reversed(methods)
		}
		var byMethod [][]result
		for _, m := range order {
			res, err := runRound(context.Background(), cfg, m, perSlot, fmt.Sprintf("w%d", r))
			if err != nil {
				return fmt.Errorf("round %d %s: %w", r, m.name, err)
			}
			byMethod = append(byMethod, res)
		}
		if d != nil {
			res, err := d.round(context.Background(), cfg, r)
			if err != nil {
				return fmt.Errorf("round %d %s: %w", r, devclusterMethod, err)
			}
			byMethod = append(byMethod, res)
		}
		for _, res := range byMethod {
			for _, x := range res {
				x.round = r
				all = append(all, x)
				x.print()
				if x.lost > 0 {
					return fmt.Errorf("round %d %s %s: %d keys lost", r, x.method, x.dir, x.lost)
				}
			}
		}
	}
	report(all)
	return nil
}

// method moves the slots out (to the fourth master) and in (off it again), on podLike
// servers (newCluster) or plain ones.
type method struct {
	name    string
	out, in func(ctx context.Context, c *cluster, cfg config) error
	podLike bool
}

// podCliMethod is redis-cli on servers like the devcluster's pods: a replica per master
// and the pods' AOF (newCluster): the devcluster side's reference.
const podCliMethod = "redis-cli-pods"

// podOpMethod is redis.Scale on the same pod-like servers: the migration code without
// Kubernetes, the operator's process or the control plane sharing the machine.
const podOpMethod = "operator-pods"

func filter(ms []method, names string) []method {
	var out []method
	for _, name := range strings.Split(names, ",") {
		if name == devclusterMethod {
			continue // runs with -devcluster
		}
		found := false
		for _, m := range ms {
			if m.name == name {
				out, found = append(out, m), true
			}
		}
		if !found {
			fmt.Fprintf(os.Stderr, "unknown method %q\n", name)
			os.Exit(2)
		}
	}
	return out
}

func reversed(ms []method) []method {
	out := make([]method, len(ms))
	for i, m := range ms {
		out[len(ms)-1-i] = m
	}
	return out
}

// result is one move of one method.
type result struct {
	round       int
	method, dir string
	moved       int // loaded keys whose slot changed owner
	took        time.Duration
	// moving is the moving phase (moving.go), after is the time from the last poll before
	// its end to the end of the move (the phase Running again, on the devcluster).
	moving, after time.Duration
	// cores is the machine's busy cores in the moving phase (all processes).
	cores       float64
	cpu         time.Duration // CPU time of all redis-servers during the move
	gap         time.Duration
	acked, lost int
	failed      int
	// errors counts the failed writes by kind (the writer's errorKind).
	errors map[string]int
}

func (r result) rate() float64 { return float64(r.moved) / r.took.Seconds() }

// movingRate is the keys moved a second of the moving phase.
func (r result) movingRate() float64 { return float64(r.moved) / r.moving.Seconds() }

func (r result) print() {
	fmt.Printf("round %d  %-14s %-3s  %7d keys in %6.2fs = %7.0f keys/s, moving %5.2fs = %7.0f keys/s (machine %.2f cores busy), then %4.2fs   redis CPU %5.2fs (%4.1f µs/key)   gap %4.0f ms   writes %d acked, %d failed%s, %d lost\n",
		r.round, r.method, r.dir, r.moved, r.took.Seconds(), r.rate(), r.moving.Seconds(), r.movingRate(), r.cores, r.after.Seconds(), r.cpu.Seconds(),
		float64(r.cpu.Microseconds())/float64(max(r.moved, 1)), float64(r.gap.Microseconds())/1000, r.acked, r.failed, r.errorList(), r.lost)
}

// errorList is " (WORD n, ...)" of the failed writes, or "" when none failed.
func (r result) errorList() string {
	if len(r.errors) == 0 {
		return ""
	}
	var parts []string
	for word, n := range r.errors {
		parts = append(parts, fmt.Sprintf("%s %d", word, n))
	}
	sort.Strings(parts)
	return " (" + strings.Join(parts, ", ") + ")"
}

// keysPerSlot counts the loaded keys of each slot.
func keysPerSlot(n int) []int {
	out := make([]int, topology.SlotCount)
	for i := 0; i < n; i++ {
		out[topology.KeySlot(keyName(i))]++
	}
	return out
}

// runRound forms a fresh cluster, loads it, and times the scale-out then the scale-in.
func runRound(ctx context.Context, cfg config, m method, perSlot []int, prefix string) ([]result, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	c, err := newCluster(ctx, cfg.nodeTimeout, m.podLike)
	if err != nil {
		return nil, err
	}
	defer c.close()
	if keepLogs != "" {
		defer c.keepLogs(keepLogs, prefix+"-"+m.name)
	}
	if err := c.load(ctx, cfg.keys, cfg.valueSize); err != nil {
		return nil, fmt.Errorf("failed to load keys: %w", err)
	}
	var out []result
	for _, dir := range []string{"out", "in"} {
		move := m.out
		if dir == "in" {
			move = m.in
		}
		res, err := timeMove(ctx, c, cfg, move, perSlot, prefix+dir)
		if err != nil {
			return out, fmt.Errorf("scale-%s: %w", dir, err)
		}
		res.method, res.dir = m.name, dir
		out = append(out, res)
	}
	return out, nil
}

// timeMove runs one move from a settled cluster with the writer running, then reads
// every key back. The writer is the fault suite's, as on the devcluster: one goroutine per
// master, a write every 3 ms each, routed by the slot table and following MOVED and ASK.
func timeMove(ctx context.Context, c *cluster, cfg config, move func(context.Context, *cluster, config) error, perSlot []int, prefix string) (result, error) {
	var res result
	if err := c.settle(ctx); err != nil {
		return res, err
	}
	before, err := c.owners(ctx)
	if err != nil {
		return res, err
	}
	cpu0, err := c.cpu()
	if err != nil {
		return res, err
	}
	addrs := c.addrs()
	router := framework.NewRouter(func(context.Context) ([]string, error) { return addrs, nil }, "")
	defer router.Close()
	w, err := router.StartWriter(ctx, prefix)
	if err != nil {
		return res, err
	}
	mw := watchMoving(distinct(before[:]))
	start := time.Now()
	err = move(ctx, c, cfg)
	res.took = time.Since(start)
	from, to, lastOpen, cores, seen := mw.stop()
	rep := w.Stop()
	if err != nil {
		return res, err
	}
	res.moving, res.after, res.cores = to.Sub(from), start.Add(res.took).Sub(lastOpen), cores
	if !seen {
		// The servers' own migration (ASM) shows no open slot and gives a job's slots in one
		// go, so its slot counts can jump from the first to the last between two polls: the
		// moving phase is then the whole move (and the check that slots moved is below).
		res.moving, res.after, res.cores = res.took, 0, 0
	}
	if verbose { // for matching with other tools' samples
		fmt.Printf("  moving phase from %.3f to %.3f (Unix time)\n", float64(from.UnixNano())/1e9, float64(to.UnixNano())/1e9)
	}
	cpu1, err := c.cpu()
	if err != nil {
		return res, err
	}
	res.cpu, res.gap, res.acked, res.failed, res.errors = cpu1-cpu0, rep.LongestGap, rep.Acked, rep.Failed, rep.Errors
	if verbose {
		fmt.Printf("  longest write gap %v ended at %.3f (Unix time), per shard %v, slowest slot table read %v\n",
			rep.LongestGap, float64(rep.GapEnded.UnixNano())/1e9, rep.Gaps, rep.SlowestRead)
		printGaps(w.Records())
	}
	if err := c.settle(ctx); err != nil {
		return res, err
	}
	after, err := c.owners(ctx)
	if err != nil {
		return res, err
	}
	changed := 0
	for s := range before {
		if before[s] != after[s] {
			res.moved += perSlot[s]
			changed++
		}
	}
	if changed == 0 {
		return res, fmt.Errorf("no slot changed owner")
	}
	all := make([]int, cfg.keys)
	for i := range all {
		all[i] = i
	}
	lostLoaded, err := c.lost(ctx, keyName, func(i int) string { return value(i, cfg.valueSize) }, all)
	if err != nil {
		return res, err
	}
	lostWrites, err := router.Missing(ctx, w.Acked())
	if err != nil {
		return res, err
	}
	res.lost = lostLoaded + len(lostWrites)
	return res, nil
}

// cliOut: redis-cli rebalance onto the empty fourth master.
func cliOut(ctx context.Context, c *cluster, cfg config) error {
	return runCli(ctx, cfg, "--cluster", "rebalance", c.members[0].Addr, "--cluster-use-empty-masters",
		"--cluster-pipeline", fmt.Sprint(cfg.pipeline))
}

// cliIn: redis-cli rebalance with the fourth master's weight 0, which empties it.
func cliIn(ctx context.Context, c *cluster, cfg config) error {
	id, err := c.nodeID(ctx, c.fourth)
	if err != nil {
		return err
	}
	return runCli(ctx, cfg, "--cluster", "rebalance", c.members[0].Addr, "--cluster-weight", id+"=0",
		"--cluster-pipeline", fmt.Sprint(cfg.pipeline))
}

func runCli(ctx context.Context, cfg config, args ...string) error {
	out, err := exec.CommandContext(ctx, cfg.redisCli, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-cli %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// opOut: redis.Scale to 4 masters, step after step as the controller calls it.
func opOut(ctx context.Context, c *cluster, cfg config) error {
	return scaleLoop(ctx, c, c.request(4, cfg))
}

// opIn: redis.Scale keeping the first 3 masters: the fourth is emptied, forgotten, reset.
func opIn(ctx context.Context, c *cluster, cfg config) error {
	return scaleLoop(ctx, c, c.request(3, cfg))
}

// request is the ScaleRequest for masters masters, as the controller makes it: on
// pod-like servers every master keeps its replica (members in pod order).
func (c *cluster) request(masters int, cfg config) redis.ScaleRequest {
	rpm := 0
	if c.podLike {
		rpm = 1
	}
	return redis.ScaleRequest{Masters: masters, ReplicasPerMaster: rpm, Keep: masters * (1 + rpm), Pipeline: cfg.pipeline, Budget: cfg.budget,
		LegacyMover: cfg.legacyMover}
}

// scaleLoop calls redis.Scale until Done, each step with the controller's deadline
// (budget plus its heal budget), at once after a step that did something.
func scaleLoop(ctx context.Context, c *cluster, req redis.ScaleRequest) error {
	for {
		sctx, cancel := context.WithTimeout(ctx, req.Budget+10*time.Second)
		p, err := redis.Scale(sctx, c.f, c.members, req)
		cancel()
		if verbose {
			fmt.Fprintf(os.Stderr, "%s step: %s moved %d slots (%d keys), %d left, %d actions, err %v\n",
				time.Now().Format("15:04:05.000"), p.Phase, p.MovedSlots, p.MovedKeys, p.Remaining, len(p.Actions), err)
		}
		if err != nil {
			return fmt.Errorf("scale step (%s): %w", p.Phase, err)
		}
		if p.Done {
			return nil
		}
		if p.MovedSlots == 0 && len(p.Actions) == 0 {
			// Waiting for gossip (Converging): do not spin.
			time.Sleep(10 * time.Millisecond)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// report prints, per direction, the medians of each method, and the ratios of keys/s of
// the operator to redis-cli on plain servers and of the devcluster to redis-cli on
// pod-like servers: end to end and over the moving phase, with each round's.
func report(all []result) {
	for _, dir := range []string{"out", "in"} {
		of := func(m string) []result {
			var out []result
			for _, r := range all {
				if r.dir == dir && r.method == m {
					out = append(out, r)
				}
			}
			return out
		}
		fmt.Printf("\nscale-%s, medians         keys/s   moving keys/s   moving s   cores busy   then s (max)   longest gap   redis CPU µs/key\n", dir)
		for _, m := range []string{"redis-cli", "operator", podCliMethod, podOpMethod, devclusterMethod, "valkey-cli", "operator-asm", "operator-asm-all", "operator-legacy"} {
			rs := of(m)
			if len(rs) == 0 {
				continue
			}
			fmt.Printf("%-22s %8.0f %14.0f %10.2f %12.2f %14.2f %10.0f ms %12.1f\n", m,
				median(pick(rs, result.rate)), median(pick(rs, result.movingRate)),
				median(pick(rs, func(r result) float64 { return r.moving.Seconds() })),
				median(pick(rs, func(r result) float64 { return r.cores })),
				maxOf(pick(rs, func(r result) float64 { return r.after.Seconds() })),
				maxOf(pick(rs, func(r result) float64 { return float64(r.gap.Milliseconds()) })),
				median(pick(rs, func(r result) float64 { return float64(r.cpu.Microseconds()) / float64(max(r.moved, 1)) })))
		}
		for _, p := range [][2]string{{"operator", "redis-cli"}, {podOpMethod, podCliMethod}, {devclusterMethod, podCliMethod},
			{"operator-asm", "valkey-cli"}, {"operator-asm-all", "valkey-cli"}, {"operator-legacy", "valkey-cli"},
			{"operator-asm", "operator-legacy"}, {"operator-asm", "operator-asm-all"}} {
			rs, refs := of(p[0]), of(p[1])
			if len(rs) == 0 || len(refs) == 0 {
				continue
			}
			for _, q := range []struct {
				what string
				rate func(result) float64
			}{{"end to end", result.rate}, {"moving", result.movingRate}} {
				var per []string
				var ratios []float64
				for _, r := range rs {
					for _, ref := range refs {
						if ref.round == r.round {
							ratios = append(ratios, q.rate(r)/q.rate(ref))
							per = append(per, fmt.Sprintf("%.2f", q.rate(r)/q.rate(ref)))
						}
					}
				}
				// Both: the ratio of the medians compares medians taken from different rounds;
				// the median of the per-round ratios pairs each round with its own reference,
				// measured minutes apart on the same machine, which cancels a machine whose
				// speed drifts during the run.
				fmt.Printf("ratio %s/%s, %-10s %5.2f   median per round %5.2f   per round %s\n", p[0], p[1], q.what,
					median(pick(rs, q.rate))/median(pick(refs, q.rate)), median(ratios), strings.Join(per, " "))
			}
		}
	}
}

func pick(rs []result, f func(result) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// distinct is the addresses of owners, each once, empty ones left out.
func distinct(owners []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range owners {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// printGaps prints each shard's longest time without an acknowledged write (-v): when it
// began and ended (Unix time, to match with the servers' logs), and when the write that
// ended it was sent, so a write that waited in a server (sent early, acknowledged late)
// shows apart from writes that failed or waited on the client.
func printGaps(records []framework.WriteRecord) {
	type gap struct {
		from, to, sent time.Time
		failed         int
	}
	last, longest, failed := map[string]time.Time{}, map[string]gap{}, map[string]int{}
	for _, r := range records {
		f := strings.Split(r.Key, ":")
		shard := f[len(f)-2]
		if r.Acked.IsZero() {
			failed[shard]++
			continue
		}
		if from, ok := last[shard]; ok && r.Acked.Sub(from) > longest[shard].to.Sub(longest[shard].from) {
			longest[shard] = gap{from, r.Acked, r.Sent, failed[shard]}
		}
		last[shard], failed[shard] = r.Acked, 0
	}
	unix := func(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
	for shard, g := range longest {
		fmt.Printf("    shard %s: %v from %.3f to %.3f, its last write sent at %.3f (%v before its ack), %d failed writes in it\n",
			shard, g.to.Sub(g.from).Round(time.Millisecond), unix(g.from), unix(g.to), unix(g.sent), g.to.Sub(g.sent).Round(time.Millisecond), g.failed)
	}
}
