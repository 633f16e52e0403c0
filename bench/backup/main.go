// Command backup measures the operator's backup and restore on the devcluster beside
// redis-cli doing the same by hand, in the same run, on the same data:
//
//   - backup: a RedisClusterBackup of the demo RedisCluster (3 masters, a replica each)
//     to a real S3 server (versitygw on the host), timed from `kubectl apply` to phase
//     Succeeded, beside `redis-cli --rdb` run against every master in parallel (each master
//     writes its RDB and streams it to a local file: no upload, no consistent cut);
//   - restore: a RedisCluster of 3 masters created with spec.restoreFrom, timed from
//     status.restore.startedAt appearing to completedAt appearing (the cluster's formation
//     before it is not counted), beside `redis-cli --pipe` loading the same keys (SET, with
//     the same values and expiries, to each key's master, every master in parallel) into
//     another new cluster of 3 masters.
//
// A writer (the e2e suite's) runs through both backups: its longest gap between two
// acknowledged writes is the pause a client saw; the operator's own figure
// (status.writePause) is printed beside it.
//
// With -local, the same comparison without Kubernetes: 3 redis-server masters on loopback,
// the operator's code called as a library (redis/backup.Take, each snapshot read through
// redis/rdb and uploaded to versitygw on 127.0.0.1 as the controller does; Restore from the
// store into 3 new masters) beside the same redis-cli commands.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/bench/internal/profile"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
	"github.com/hc-middleware/redis-cluster-operator/redis/rdb"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

type config struct {
	keys, ttlEvery int
	rounds         int
	redisCli       string
	inFlight       int
	// operatorProfile: each operator backup's CPU profile of the operator is written to
	// this path with -bN.prof appended (devcluster only).
	operatorProfile string
	// pin: the servers on CPU 0 and the clients on CPU 1 (pin.go).
	pin bool
}

// operatorPprof is where the bench's operator serves net/http/pprof (loopback only).
const operatorPprof = "127.0.0.1:18091"

func main() {
	var cfg config
	flag.IntVar(&cfg.keys, "keys", 1_000_000, "keys loaded (64-byte strings)")
	flag.IntVar(&cfg.ttlEvery, "ttl-every", 4, "one key in this many has an expiry")
	flag.IntVar(&cfg.rounds, "rounds", 1, "backups and restores of each method")
	flag.StringVar(&cfg.redisCli, "redis-cli", "/usr/bin/redis-cli", "redis-cli binary")
	flag.IntVar(&cfg.inFlight, "inflight", 0, "with -local, also restore from memory with this RestoreTarget.InFlight (0: not)")
	local := flag.Bool("local", false, "redis-server processes on loopback and the operator's library, no devcluster")
	flag.BoolVar(&showStats, "commandstats", false, "print each restore target's INFO commandstats of the commands it was sent (the server's own time per call)")
	cpuProfile := flag.String("cpuprofile", "", "with -local, write a CPU profile of this program (the library runs in it) to this file")
	flag.BoolVar(&cfg.pin, "pin", false, "on the devcluster, run with the clusters' redis-servers on CPU 0 and the operator, the store and this program (its writer and redis-cli) on CPU 1")
	flag.StringVar(&cfg.operatorProfile, "operator-cpuprofile", "", "on the devcluster, write a CPU profile of the operator during each of its backups (2 s from the apply) and restores (2 s from startedAt) to this path + -bN.prof, -rN.prof")
	flag.Parse()
	stopProfile := profile.StartCPU("bench/backup", *cpuProfile)
	defer stopProfile()
	if *local && cfg.pin {
		fmt.Fprintln(os.Stderr, "bench/backup: -pin is for the devcluster, not -local")
		os.Exit(2)
	}
	if *local {
		if err := runLocal(context.Background(), cfg); err != nil {
			stopProfile()
			fmt.Fprintln(os.Stderr, "bench/backup:", err)
			os.Exit(1)
		}
		return
	}
	// An interrupt cancels the run, so its deferred steps (the namespace's deletion, -pin's
	// unpinning) still run.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := framework.WithCRD(ctx, func(s *framework.Stack) error {
		op, err := s.StartOperator("--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0", "--pprof-bind-address="+operatorPprof)
		if err != nil {
			return err
		}
		defer op.Stop()
		fmt.Printf("devcluster: operator pid %d, logs in %s\n", op.PID(), op.Logs)
		return run(ctx, s, cfg, op.PID())
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/backup:", err)
		os.Exit(1)
	}
}

// figures of one backup or restore.
type figures struct {
	method      string
	took        time.Duration
	keys, bytes int64
	// gap is the writer's longest gap while it ran (backups), pause the operator's own
	// status.writePause.
	gap   time.Duration
	pause string
	// cutAfter is how long after the apply the operator's cut began (backups).
	cutAfter time.Duration
	cpu      cpuUse
}

func (f figures) String() string {
	s := fmt.Sprintf("%-26s %9v %9d keys %8.1f MB %10.0f keys/s %7.1f MB/s", f.method, f.took.Round(time.Millisecond), f.keys,
		float64(f.bytes)/1e6, float64(f.keys)/f.took.Seconds(), float64(f.bytes)/1e6/f.took.Seconds())
	if f.gap > 0 {
		s += fmt.Sprintf("  writer's longest gap %v", f.gap.Round(time.Millisecond))
	}
	if f.pause != "" {
		s += "  writes paused " + f.pause
	}
	if f.cutAfter > 0 {
		s += fmt.Sprintf("  cut began %v after the apply", f.cutAfter.Round(time.Millisecond))
	}
	return s + f.cpu.String()
}

func run(ctx context.Context, s *framework.Stack, cfg config, operatorPID int) error {
	ns := fmt.Sprintf("bench-backup-%d", time.Now().Unix())
	deleteNS, err := s.CreateNamespace(ctx, ns)
	if err != nil {
		return err
	}
	defer deleteNS()
	tmp, s3srv, _, stop, err := startStore(ctx, "198.18.0.1")
	if err != nil {
		return err
	}
	defer stop()
	if _, err := s.ApplyYAML(ctx, ns, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: s3-creds, namespace: %s}
stringData: {accessKeyID: %s, secretAccessKey: %s}
`, ns, s3srv.AccessKey, s3srv.SecretKey)); err != nil {
		return err
	}
	if err := applyCluster(ctx, s, ns, "demo", 6, 1, ""); err != nil {
		return err
	}
	if err := s.WaitForPhase(ctx, ns, "demo", "Running", 5*time.Minute); err != nil {
		return err
	}
	r := s.RouterFor(ns, "demo", "")
	defer r.Close()
	data, err := load(ctx, r, cfg)
	if err != nil {
		return err
	}
	password, err := s.Password(ctx, ns, "demo")
	if err != nil {
		return err
	}

	b := &bench{s: s, r: r, ns: ns, password: password, tmp: tmp, store: s3srv, operatorPID: operatorPID, cfg: cfg}
	if cfg.pin {
		if b.pin, err = pinClients(operatorPID, s3srv.PID()); err != nil {
			return err
		}
		defer b.pin.unpin()
		if err := b.pin.mustServers(ctx, s, ns, "demo-", 6); err != nil {
			return err
		}
	}
	var backups, restores [][]figures
	for round := 0; round < cfg.rounds; round++ {
		op, ref, err := b.backupRound(ctx, round)
		if err != nil {
			return err
		}
		backups = append(backups, []figures{op, ref})
		fmt.Println(op)
		fmt.Println(ref)
	}
	last := fmt.Sprintf("b%d", cfg.rounds-1)
	for round := 0; round < cfg.rounds; round++ {
		var op, ref figures
		for _, first := range []bool{round%2 == 0, round%2 == 1} {
			if first {
				if op, err = operatorRestore(ctx, s, ns, fmt.Sprintf("r%d", round), last, operatorPID, s3srv.PID(), cfg.operatorProfile, b.pin); err != nil {
					return err
				}
			} else if ref, err = cliRestore(ctx, s, ns, fmt.Sprintf("p%d", round), data, cfg, b.pin); err != nil {
				return err
			}
		}
		restores = append(restores, []figures{op, ref})
		fmt.Println(op)
		fmt.Println(ref)
	}

	report(cfg, backups, restores)
	return nil
}

// bench is what every round of the devcluster's run uses.
type bench struct {
	s                 *framework.Stack
	r                 *framework.Router
	ns, password, tmp string
	store             *redistest.S3Server
	operatorPID       int
	cfg               config
	pin               *pinned
}

// backupRound is round's backup by each method (backup bROUND for the operator's), who
// goes first alternating.
func (b *bench) backupRound(ctx context.Context, round int) (op, ref figures, err error) {
	name := fmt.Sprintf("b%d", round)
	masters, err := mastersOf(ctx, b.s.RouterFor(b.ns, "demo", ""))
	if err != nil {
		return op, ref, err
	}
	for _, first := range []bool{round%2 == 0, round%2 == 1} {
		forks0 := forksCPU(masters, b.password)
		if !first {
			if ref, err = cliBackup(ctx, b.r, masters, b.password, b.tmp, b.cfg); err != nil {
				return op, ref, err
			}
			ref.cpu.forks = forksCPU(masters, b.password) - forks0
			continue
		}
		op0, store0 := procCPU(b.operatorPID), procCPU(b.store.PID())
		profiled := profileOperator(b.cfg.operatorProfile, name)
		if op, err = operatorBackup(ctx, b.s, b.r, b.ns, name, b.store.Endpoint); err != nil {
			return op, ref, err
		}
		if err := profiled(); err != nil {
			return op, ref, err
		}
		op.cpu = cpuUse{clientName: "operator", client: procCPU(b.operatorPID) - op0, store: procCPU(b.store.PID()) - store0}
		op.cpu.forks = forksCPU(masters, b.password) - forks0
	}
	return op, ref, nil
}

func report(cfg config, backups, restores [][]figures) {
	fmt.Printf("\n=== backup and restore, %d keys of 64 bytes, 3 masters (medians of %d)\n", cfg.keys, cfg.rounds)
	bo, br := median(backups, 0), median(backups, 1)
	fmt.Println(bo)
	fmt.Println(br)
	fmt.Printf("backup  keys/s ratio operator/redis-cli: %.2f (time ratio %.2f)\n", rate(bo)/rate(br), bo.took.Seconds()/br.took.Seconds())
	// The reference is the last of a round's restores.
	ref := len(restores[0]) - 1
	rr := median(restores, ref)
	for i := 0; i < ref; i++ {
		fmt.Println(median(restores, i))
	}
	fmt.Println(rr)
	for i := 0; i < ref; i++ {
		ro := median(restores, i)
		fmt.Printf("restore keys/s ratio %s/redis-cli: %.2f (time ratio %.2f)\n", ro.method, rate(ro)/rate(rr), ro.took.Seconds()/rr.took.Seconds())
	}
}

func rate(f figures) float64 { return float64(f.keys) / f.took.Seconds() }

// median is the figures of the median round by time of method i.
func median(rounds [][]figures, i int) figures {
	fs := make([]figures, len(rounds))
	for j := range rounds {
		fs[j] = rounds[j][i]
	}
	for a := range fs {
		for b := a + 1; b < len(fs); b++ {
			if fs[b].took < fs[a].took {
				fs[a], fs[b] = fs[b], fs[a]
			}
		}
	}
	return fs[len(fs)/2]
}

// startStore starts versitygw on host in a temporary directory (the reference's RDB files
// go there too) with the bucket "backups"; stop ends it and removes the directory.
func startStore(ctx context.Context, host string) (dir string, srv *redistest.S3Server, store *backup.S3, stop func(), err error) {
	dir, err = os.MkdirTemp("", "bench-backup")
	if err != nil {
		return "", nil, nil, nil, err
	}
	srv, err = redistest.StartS3Server(dir, host)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, nil, nil, err
	}
	stop = func() { srv.Stop(); os.RemoveAll(dir) }
	store = &backup.S3{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey}
	if err := store.CreateBucket(ctx, "backups"); err != nil {
		stop()
		return "", nil, nil, nil, err
	}
	return dir, srv, store, stop, nil
}

// dataset is the keys load wrote, as the commands that wrote them. They are made again
// when needed rather than kept: a million commands held as [][]any is a heap of pointers
// the garbage collector scans on every cycle while the library restores in this process,
// which the operator's own process does not carry.
type dataset struct {
	keys, ttlEvery int
	expireBase     int64
}

// cmd is the command that wrote key i: SET key value [PXAT t].
func (d dataset) cmd(i int) []any {
	k := "b:" + strconv.Itoa(i)
	if d.ttlEvery > 0 && i%d.ttlEvery == 0 {
		return []any{"set", k, framework.Value(k), "pxat", d.expireBase + int64(i)}
	}
	return []any{"set", k, framework.Value(k)}
}

// load writes the keys, pipelined, and returns them.
func load(ctx context.Context, r *framework.Router, cfg config) (dataset, error) {
	d := dataset{keys: cfg.keys, ttlEvery: cfg.ttlEvery, expireBase: time.Now().Add(24 * time.Hour).UnixMilli()}
	began := time.Now()
	for start := 0; start < d.keys; start += 100_000 {
		var cmds [][]any
		for i := start; i < min(d.keys, start+100_000); i++ {
			cmds = append(cmds, d.cmd(i))
		}
		res, err := r.Pipeline(ctx, cmds, 1000)
		if err != nil {
			return d, err
		}
		for i, c := range res {
			if c.Err() != nil {
				return d, fmt.Errorf("%v: %w", cmds[i][:2], c.Err())
			}
		}
	}
	fmt.Printf("loaded %d keys (one in %d with an expiry) in %v\n", cfg.keys, cfg.ttlEvery, time.Since(began).Round(time.Millisecond))
	return d, nil
}

// applyCluster applies the demo sample as name with the given pods and replicas per
// master, maxmemory raised and no resource limits (as bench/scale), restored from backup
// when set.
func applyCluster(ctx context.Context, s *framework.Stack, ns, name string, pods, perMaster int, restoreFrom string) error {
	b, err := os.ReadFile(filepath.Join(s.Root, "config", "samples", "redis_v1alpha1_rediscluster.yaml"))
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		return err
	}
	u.SetNamespace(ns)
	u.SetName(name)
	spec := u.Object["spec"].(map[string]any)
	spec["replicas"], spec["replicasPerMaster"] = int64(pods), int64(perMaster)
	pod := spec["pod"].([]any)[0].(map[string]any)
	pod["env"] = []any{map[string]any{"name": "MAXMEMORY", "value": "1gb"}}
	delete(pod, "resources")
	if restoreFrom != "" {
		spec["restoreFrom"] = map[string]any{"backup": restoreFrom}
	}
	out, err := yaml.Marshal(u.Object)
	if err != nil {
		return err
	}
	_, err = s.ApplyYAML(ctx, ns, string(out))
	return err
}

// operatorBackup applies a RedisClusterBackup of demo and waits (polling every pollEvery)
// until it Succeeded.
func operatorBackup(ctx context.Context, s *framework.Stack, r *framework.Router, ns, name, endpoint string) (figures, error) {
	f := figures{method: "operator backup"}
	c, err := typedClient(s)
	if err != nil {
		return f, err
	}
	w, err := r.StartWriter(ctx, "w"+name)
	if err != nil {
		return f, err
	}
	time.Sleep(500 * time.Millisecond)
	w.TakeLongestGap()
	began := time.Now()
	if _, err := s.ApplyYAML(ctx, ns, `apiVersion: redis.middleware.hc.cn/v1alpha1
kind: RedisClusterBackup
metadata: {name: `+name+`, namespace: `+ns+`}
spec:
  clusterName: demo
  s3: {endpoint: "`+endpoint+`", bucket: backups, prefix: bench, credentialsSecret: {name: s3-creds}}
`); err != nil {
		w.Stop()
		return f, err
	}
	var b redisv1alpha1.RedisClusterBackup
	for b.Status.Phase != redisv1alpha1.BackupSucceeded {
		if b.Status.Phase == redisv1alpha1.BackupFailed || time.Since(began) > 5*time.Minute {
			w.Stop()
			return f, fmt.Errorf("backup %s: %s %s: %s", name, b.Status.Phase, b.Status.Reason, b.Status.Message)
		}
		time.Sleep(pollEvery)
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &b); err != nil {
			w.Stop()
			return f, err
		}
	}
	f.took = time.Since(began)
	f.gap = w.TakeLongestGap()
	w.Stop()
	f.keys, f.bytes, f.pause = b.Status.Progress.Keys, b.Status.Progress.Bytes, b.Status.WritePause
	if b.Status.CutStartedAt != nil {
		f.cutAfter = b.Status.CutStartedAt.Sub(began)
	}
	return f, nil
}

// cliBackup runs redis-cli --rdb against every master in parallel, to local files, with
// a writer on r.
func cliBackup(ctx context.Context, r *framework.Router, masters []string, password, dir string, cfg config) (figures, error) {
	f := figures{method: "redis-cli --rdb (parallel)"}
	w, err := r.StartWriter(ctx, fmt.Sprintf("wcli%d", time.Now().UnixNano()))
	if err != nil {
		return f, err
	}
	time.Sleep(500 * time.Millisecond)
	w.TakeLongestGap()
	began := time.Now()
	errs := make([]error, len(masters))
	var wg sync.WaitGroup
	var cpus childCPU
	for i, m := range masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host, port, _ := strings.Cut(m, ":")
			cmd := exec.CommandContext(ctx, cfg.redisCli, "-h", host, "-p", port, "--no-auth-warning", "--rdb", filepath.Join(dir, fmt.Sprintf("cli-%d.rdb", i)))
			cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+password)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("redis-cli --rdb %s: %w: %s", m, err, out)
			}
			cpus.add(cmd.ProcessState)
		}()
	}
	wg.Wait()
	f.took = time.Since(began)
	f.gap = w.TakeLongestGap()
	w.Stop()
	f.cpu = cpuUse{clientName: "redis-cli", client: cpus.total()}
	for i, err := range errs {
		if err != nil {
			return f, err
		}
		st, err := os.Stat(filepath.Join(dir, fmt.Sprintf("cli-%d.rdb", i)))
		if err != nil {
			return f, err
		}
		f.bytes += st.Size()
	}
	// The files' keys, counted as the operator counts its own.
	for i := range masters {
		fh, err := os.Open(filepath.Join(dir, fmt.Sprintf("cli-%d.rdb", i)))
		if err != nil {
			return f, err
		}
		n, err := countKeys(fh)
		fh.Close()
		if err != nil {
			return f, err
		}
		f.keys += n
	}
	return f, nil
}

// mastersOf lists the "ip:port" of the masters r routes to, and closes r.
func mastersOf(ctx context.Context, r *framework.Router) ([]string, error) {
	defer r.Close()
	if err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for slot := 0; slot < 16384; slot++ {
		if o := r.Owner(slot); !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out, nil
}

// typedClient is a client of the devcluster that knows the operator's kinds (the
// framework's knows Kubernetes' only).
func typedClient(s *framework.Stack) (client.Client, error) {
	cfg, err := s.RESTConfig()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := redisv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// pollEvery is how often the operator's figures poll the object's status, with a Get of
// the API server's copy (about a millisecond): a kubectl process per poll cost 100 to 300 ms
// of the machine's CPU, taken from the backup or restore it timed.
const pollEvery = 20 * time.Millisecond

// slotKey is a key of the given slot.
func slotKey(slot int) string {
	for i := 0; ; i++ {
		if k := "k" + strconv.Itoa(i); framework.KeySlot(k) == slot {
			return k
		}
	}
}

// countKeys counts the keys of an RDB file.
func countKeys(r io.Reader) (int64, error) {
	var n int64
	_, err := rdb.Scan(r, func(*rdb.Entry) error { n++; return nil })
	return n, err
}

var showStats bool

// commandStats prints, with -commandstats, the INFO commandstats lines of the commands
// named, and the reads and writes of client connections the server made (INFO stats), on
// every node at addrs.
func commandStats(addrs []string, password string, commands ...string) {
	if !showStats {
		return
	}
	for _, a := range addrs {
		host, port, _ := strings.Cut(a, ":")
		cmd := exec.Command("redis-cli", "-h", host, "-p", port, "--no-auth-warning", "info", "all")
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+password)
		out, _ := cmd.Output()
		var rw []string
		for _, l := range strings.Split(string(out), "\n") {
			l = strings.TrimSpace(l)
			for _, c := range commands {
				if strings.HasPrefix(l, "cmdstat_"+c+":") {
					fmt.Println("  ", a, l)
				}
			}
			if strings.HasPrefix(l, "total_reads_processed:") || strings.HasPrefix(l, "total_writes_processed:") {
				rw = append(rw, l)
			}
		}
		fmt.Println("  ", a, strings.Join(rw, " "))
	}
}
