package framework

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// The fault suite's client. It routes every command itself, from the owners CLUSTER NODES
// names, following MOVED and ASK, and re-reads the pods' addresses when a node is gone, so
// it keeps writing through failovers, pods back at new addresses and slot migration. It
// never retries a write behind the caller's back: a write is acknowledged or it is not.

// Router sends single-key commands to the master that owns the key's slot.
type Router struct {
	addrs    func(context.Context) ([]string, error)
	password string
	// passwordFn, when set, is asked for the password while password is "" (RouterFor: the
	// cluster's own, once its NAME-auth exists).
	passwordFn func(context.Context) (string, error)
	// tls, when set, is what every connection dials with (a cluster with spec.tls).
	tls *tls.Config
	// dialer, when set, makes every connection (a client that may reach some addresses only).
	dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// onRedirect, when set, is told every MOVED and ASK a node answers, before it is followed.
	onRedirect func(msg string)
	// hostnames: a node's announced hostname is its address (PreferHostnames).
	hostnames bool

	mu      sync.Mutex
	owner   []string // slot -> "ip:port" of its master
	clients map[string]*redis.Client
	// retired are clients of an earlier password, closed with the router so writes in
	// flight on them finish.
	retired []*redis.Client
	fresh   time.Time // when owner was last read
	// slowestRead is the longest Refresh that read the owners (the addresses, then CLUSTER
	// NODES): time a write waited on the router rather than on Redis.
	slowestRead time.Duration
}

// NewRouter routes through the nodes whose addresses addrs returns (asked again whenever
// the slot table must be re-read).
func NewRouter(addrs func(context.Context) ([]string, error), password string) *Router {
	return &Router{addrs: addrs, password: password, clients: map[string]*redis.Client{}}
}

// RouterFor routes to the pods of a cluster. A password "" is the cluster's own
// (Password), read before the first connection (and again while there is none).
func (s *Stack) RouterFor(ns, name, password string) *Router {
	sel := "app.kubernetes.io/instance=" + name + ",app.kubernetes.io/name=redis-cluster"
	r := NewRouter(func(ctx context.Context) ([]string, error) { return s.PodAddrs(ctx, ns, sel) }, password)
	r.passwordFn = func(ctx context.Context) (string, error) { return s.Password(ctx, ns, name) }
	return r
}

// Close closes every node client.
func (r *Router) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.clients {
		_ = c.Close()
	}
	for _, c := range r.retired {
		_ = c.Close()
	}
	r.clients, r.retired = map[string]*redis.Client{}, nil
}

// SetPassword makes every later command use password, on new connections, as a client
// switching after a password rotation does; commands in flight finish on the old ones.
func (r *Router) SetPassword(password string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.clients {
		r.retired = append(r.retired, c)
	}
	r.password, r.clients, r.passwordFn = password, map[string]*redis.Client{}, nil
}

// SetTLS makes every later command dial with cfg (nil: plain TCP), on new connections;
// commands in flight finish on the old ones.
func (r *Router) SetTLS(cfg *tls.Config) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.clients {
		r.retired = append(r.retired, c)
	}
	r.tls, r.clients = cfg, map[string]*redis.Client{}
}

// SetDialer makes every later connection with dial, e.g. one that refuses the addresses
// a client outside Kubernetes could not reach.
func (r *Router) SetDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.clients {
		r.retired = append(r.retired, c)
	}
	r.dialer, r.clients = dial, map[string]*redis.Client{}
}

// PreferHostnames routes to a node's announced hostname (cluster-announce-hostname) when it
// has one, as a client of nodes whose cluster-preferred-endpoint-type is hostname is told
// by CLUSTER SLOTS; set it before the first command.
func (r *Router) PreferHostnames() { r.hostnames = true }

// OnRedirect has f told every MOVED and ASK error a node answers ("MOVED 3999
// 10.0.0.1:30123"), before the router follows it; set it before the first command.
func (r *Router) OnRedirect(f func(msg string)) { r.onRedirect = f }

func (r *Router) client(addr string) *redis.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.clients[addr]
	if !ok {
		if r.password == "" && r.passwordFn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r.password, _ = r.passwordFn(ctx)
			cancel()
		}
		c = redis.NewClient(&redis.Options{Addr: addr, Password: r.password, MaxRetries: -1, TLSConfig: r.tls,
			Dialer: r.dialer, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, PoolSize: 4})
		r.clients[addr] = c
	}
	return c
}

// Refresh re-reads the slot owners from the first node that knows all 16384 slots; calls
// within 100 ms of the last successful one reuse it.
func (r *Router) Refresh(ctx context.Context) error {
	r.mu.Lock()
	if time.Since(r.fresh) < 100*time.Millisecond {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	began := time.Now()
	defer func() {
		r.mu.Lock()
		r.slowestRead = max(r.slowestRead, time.Since(began))
		r.mu.Unlock()
	}()
	addrs, err := r.addrs(ctx)
	if err != nil {
		return err
	}
	var last error = errors.New("no node answered")
	for _, addr := range addrs {
		owner, err := r.readOwners(ctx, addr)
		if err != nil {
			last = err
			continue
		}
		r.mu.Lock()
		r.owner, r.fresh = owner, time.Now()
		r.mu.Unlock()
		return nil
	}
	return fmt.Errorf("failed to read slot owners: %w", last)
}

func (r *Router) readOwners(ctx context.Context, addr string) ([]string, error) {
	text, err := r.client(addr).ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	nodes, err := topology.ParseClusterNodes(text)
	if err != nil {
		return nil, err
	}
	owner := make([]string, topology.SlotCount)
	covered := 0
	for _, n := range nodes {
		if !n.Master || n.Fail || n.IP == "" {
			continue
		}
		addr := n.Addr()
		if r.hostnames && n.Hostname != "" {
			addr = net.JoinHostPort(n.Hostname, strconv.Itoa(n.Port))
		}
		for _, sr := range n.Slots {
			for slot := sr.Start; slot <= sr.End; slot++ {
				owner[slot] = addr
				covered++
			}
		}
	}
	if covered != topology.SlotCount {
		return nil, fmt.Errorf("%s sees %d of %d slots served", addr, covered, topology.SlotCount)
	}
	return owner, nil
}

// Owner is the address of the master the slot table names for slot.
func (r *Router) Owner(slot int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owner == nil {
		return ""
	}
	return r.owner[slot]
}

// Do runs one command on key's owner, following up to 5 MOVED or ASK redirections.
func (r *Router) Do(ctx context.Context, key string, args ...any) *redis.Cmd {
	slot := KeySlot(key)
	if r.Owner(slot) == "" {
		if err := r.Refresh(ctx); err != nil {
			cmd := redis.NewCmd(ctx, args...)
			cmd.SetErr(err)
			return cmd
		}
	}
	addr, asking := r.Owner(slot), false
	var cmd *redis.Cmd
	for hop := 0; hop < 5; hop++ {
		c := r.client(addr)
		if asking {
			pipe := c.Pipeline()
			pipe.Do(ctx, "asking")
			cmd = pipe.Do(ctx, args...)
			_, _ = pipe.Exec(ctx)
		} else {
			cmd = c.Do(ctx, args...)
		}
		err := cmd.Err()
		if err == nil || err == redis.Nil {
			return cmd
		}
		msg := err.Error()
		if r.onRedirect != nil && (strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")) {
			r.onRedirect(msg)
		}
		switch {
		case strings.HasPrefix(msg, "MOVED "):
			addr, asking = redirect(msg), false
			r.mu.Lock()
			r.fresh = time.Time{}
			r.mu.Unlock()
			_ = r.Refresh(ctx)
		case strings.HasPrefix(msg, "ASK "):
			addr, asking = redirect(msg), true
		default:
			// A node gone or failing over: the next call re-reads the owners, however
			// recent the last read (otherwise it would find no owner and fail too).
			r.mu.Lock()
			r.owner, r.fresh = nil, time.Time{}
			r.mu.Unlock()
			return cmd
		}
	}
	return cmd
}

// redirect is the "ip:port" of a MOVED or ASK error ("MOVED 3999 127.0.0.1:6381").
func redirect(msg string) string {
	f := strings.Fields(msg)
	return f[len(f)-1]
}

// KeySlot is Redis Cluster's hash slot of key.
func KeySlot(key string) int { return topology.KeySlot(key) }

// Value is what the fault suite stores under key: derived from the key, so a read checks
// the content too, and 64 bytes long, a realistic small value.
func Value(key string) string {
	v := "v:" + key + ":"
	for len(v) < 64 {
		v += "x"
	}
	return v[:64]
}

// Load writes keys prefix:0 … prefix:n-1 in pipelines straight to their owners, then waits
// (WAIT) until every master's replicas acknowledged them: a fault test starts from data
// that Redis' asynchronous replication has already copied.
func (r *Router) Load(ctx context.Context, prefix string, n int) error {
	byOwner, err := r.group(ctx, keyNames(prefix, n))
	if err != nil {
		return err
	}
	for addr, keys := range byOwner {
		if err := r.loadOne(ctx, addr, keys); err != nil {
			return err
		}
	}
	return nil
}

// loadOne writes keys to addr and waits for its replica, on one connection: WAIT counts
// the writes of the connection it is sent on.
func (r *Router) loadOne(ctx context.Context, addr string, keys []string) error {
	c := r.client(addr).Conn(ctx)
	defer c.Close()
	for start := 0; start < len(keys); start += 1000 {
		end := min(start+1000, len(keys))
		if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys[start:end] {
				p.Set(ctx, k, Value(k), 0)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("failed to load keys on %s: %w", addr, err)
		}
	}
	if err := waitReplica(ctx, c); err != nil {
		return fmt.Errorf("failed to WAIT for the replica of %s: %w", addr, err)
	}
	return nil
}

// waitReplica waits up to 30 s until a replica of c's server acknowledged every write
// made on c: WAIT in steps of 1.5 s, under the client's 2 s read timeout (a replica that
// reconnects, as after its master announced a new address, takes longer than that).
func waitReplica(ctx context.Context, c *redis.Conn) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := redis.NewIntCmd(ctx, "wait", 1, 1500)
		_ = c.Process(ctx, cmd)
		n, err := cmd.Result()
		if err == nil && n >= 1 {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%d replicas acknowledged after 30s", n)
			}
			return err
		}
	}
}

func keyNames(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + ":" + strconv.Itoa(i)
	}
	return keys
}

// group maps each key's current owner to its keys.
func (r *Router) group(ctx context.Context, keys []string) (map[string][]string, error) {
	r.mu.Lock()
	r.fresh = time.Time{}
	r.mu.Unlock()
	if err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, k := range keys {
		o := r.Owner(KeySlot(k))
		out[o] = append(out[o], k)
	}
	return out, nil
}

// Missing reads every key back from its owner (pipelined, MOVED keys re-read one by one)
// and returns those that are absent or hold another value than Value(key).
func (r *Router) Missing(ctx context.Context, keys []string) ([]string, error) {
	byOwner, err := r.group(ctx, keys)
	if err != nil {
		return nil, err
	}
	var missing []string
	for addr, ks := range byOwner {
		c := r.client(addr)
		for start := 0; start < len(ks); start += 1000 {
			end := min(start+1000, len(ks))
			cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range ks[start:end] {
					p.Get(ctx, k)
				}
				return nil
			})
			if err != nil && err != redis.Nil && !strings.HasPrefix(err.Error(), "MOVED") && !strings.HasPrefix(err.Error(), "ASK") {
				return nil, fmt.Errorf("failed to read keys from %s: %w", addr, err)
			}
			for i, cmd := range cmds {
				k := ks[start+i]
				v, err := cmd.(*redis.StringCmd).Result()
				if err != nil && err != redis.Nil {
					// Moved meanwhile, or asked elsewhere: read it through the router.
					v, err = r.Do(ctx, k, "get", k).Text()
				}
				if err != nil || v != Value(k) {
					missing = append(missing, k)
				}
			}
		}
	}
	sort.Strings(missing)
	return missing, nil
}

// Writer writes unique keys across every master's slots until stopped, one goroutine per
// shard (the slot ranges of the masters when it started), records every acknowledged
// write and the longest time each shard went without one.
type Writer struct {
	r      *Router
	prefix string
	stop   chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	acked  []string
	failed int
	errs   map[string]int
	gaps   []time.Duration
	// gapEnded is when the longest gap of any shard ended.
	gapEnded time.Time
	// stageGap is the longest gap of any shard since the last TakeLongestGap.
	stageGap time.Duration
	shards   []topology.SlotRanges
	// records has every write tried, with when it was sent and acknowledged.
	records []WriteRecord
}

// WriteRecord is one write of a Writer: when it was sent and, if it was, acknowledged.
type WriteRecord struct {
	Key         string
	Sent, Acked time.Time
}

// WriterReport is what a Writer saw.
type WriterReport struct {
	Acked, Failed int
	// LongestGap is the longest time any shard went without an acknowledged write;
	// Gaps has it per shard, in the order of Shards.
	LongestGap time.Duration
	Gaps       []time.Duration
	// GapEnded is when LongestGap ended; SlowestRead the longest the router took to read
	// the slot owners (listing the pods, then CLUSTER NODES), part of any gap it fell in.
	GapEnded    time.Time
	SlowestRead time.Duration
	Shards      []topology.SlotRanges
	// Errors counts failed writes by the first word of their error (errorKind).
	Errors map[string]int
}

func (w WriterReport) String() string {
	return fmt.Sprintf("%d acknowledged, %d failed %v, longest write gap %v (per shard %v)",
		w.Acked, w.Failed, w.Errors, w.LongestGap.Round(time.Millisecond), w.Gaps)
}

// StartWriter starts writing keys PREFIX:SHARD:N. The slot table must cover every slot.
func (r *Router) StartWriter(ctx context.Context, prefix string) (*Writer, error) {
	if err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.slowestRead = 0 // a writer reports its own
	r.mu.Unlock()
	w := &Writer{r: r, prefix: prefix, stop: make(chan struct{}), errs: map[string]int{}}
	byOwner := map[string]topology.SlotRanges{}
	var owners []string
	for slot := 0; slot < topology.SlotCount; slot++ {
		o := r.Owner(slot)
		if _, ok := byOwner[o]; !ok {
			owners = append(owners, o)
		}
		byOwner[o] = append(byOwner[o], topology.SlotRange{Start: slot, End: slot})
	}
	for _, o := range owners {
		w.shards = append(w.shards, byOwner[o].Normalize())
	}
	w.gaps = make([]time.Duration, len(w.shards))
	for i := range w.shards {
		w.wg.Add(1)
		go w.run(ctx, i)
	}
	return w, nil
}

// pace is the pause between two writes of one shard: about 300 writes a second per shard,
// fine enough to measure gaps in milliseconds without crowding a 2-core machine.
const pace = 3 * time.Millisecond

func (w *Writer) run(ctx context.Context, shard int) {
	defer w.wg.Done()
	last := time.Now()
	n := 0
	for {
		select {
		case <-w.stop:
			w.noteGap(shard, time.Since(last))
			return
		case <-ctx.Done():
			return
		case <-time.After(pace):
		}
		key := w.nextKey(shard, &n)
		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := w.r.Do(cctx, key, "set", key, Value(key)).Err()
		cancel()
		rec := WriteRecord{Key: key, Sent: sent}
		if err == nil {
			rec.Acked = time.Now()
		}
		w.mu.Lock()
		w.records = append(w.records, rec)
		w.mu.Unlock()
		if err != nil {
			w.mu.Lock()
			w.failed++
			w.errs[errorKind(err)]++
			w.mu.Unlock()
			continue
		}
		now := time.Now()
		w.noteGap(shard, now.Sub(last))
		last = now
		w.mu.Lock()
		w.acked = append(w.acked, key)
		w.mu.Unlock()
	}
}

// errorKind is how a failed write is counted: the first word of its error, and for
// CLUSTERDOWN the rest too ("CLUSTERDOWN Hash slot not served" is a node that knows no owner
// for the slot, "CLUSTERDOWN The cluster is down" one that sees the cluster failing).
func errorKind(err error) string {
	f := strings.Fields(err.Error() + " ?")
	if f[0] == "CLUSTERDOWN" {
		return strings.TrimSpace(err.Error())
	}
	return f[0]
}

// nextKey is the shard's next key whose slot lies in the shard's ranges.
func (w *Writer) nextKey(shard int, n *int) string {
	for {
		*n++
		key := fmt.Sprintf("%s:%d:%d", w.prefix, shard, *n)
		if w.shards[shard].Contains(KeySlot(key)) {
			return key
		}
	}
}

func (w *Writer) noteGap(shard int, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d > w.gaps[shard] {
		w.gaps[shard] = d
	}
	if d >= slices.Max(w.gaps) {
		w.gapEnded = time.Now()
	}
	w.stageGap = max(w.stageGap, d)
}

// TakeLongestGap is the longest time any shard went without an acknowledged write since
// the previous call (or the start), and starts a new stage: a test marks with it the
// boundaries of the switches it runs under one writer.
func (w *Writer) TakeLongestGap() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.stageGap
	w.stageGap = 0
	return d
}

// Stop stops writing and reports.
func (w *Writer) Stop() WriterReport {
	close(w.stop)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	rep := WriterReport{Acked: len(w.acked), Failed: w.failed, Errors: w.errs, Shards: w.shards,
		Gaps: append([]time.Duration(nil), w.gaps...), GapEnded: w.gapEnded}
	w.r.mu.Lock()
	rep.SlowestRead = w.r.slowestRead
	w.r.mu.Unlock()
	for i := range rep.Gaps {
		rep.Gaps[i] = rep.Gaps[i].Round(time.Millisecond)
		rep.LongestGap = max(rep.LongestGap, rep.Gaps[i])
	}
	return rep
}

// Failed is the number of failed writes so far.
func (w *Writer) Failed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// Records is every write tried so far, in the order each shard sent them.
func (w *Writer) Records() []WriteRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]WriteRecord(nil), w.records...)
}

// Acked is every key the writer saw acknowledged.
func (w *Writer) Acked() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.acked...)
}
