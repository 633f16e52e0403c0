package redis

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Admin is every command the operator sends to one Redis node, grouped by what it is for
// (docs/architecture.md lists them with their callers). It is the one list: no caller
// looks for more behind a type assertion. The admin of a Factory implements all of it;
// each method's comment names the command.
type Admin interface {
	// Addr is the node's "ip:port".
	Addr() string

	// Reading the node and its view of the cluster.

	// ClusterNodes reads CLUSTER NODES; ClusterInfo reads CLUSTER INFO.
	ClusterNodes(ctx context.Context) ([]topology.Node, error)
	ClusterInfo(ctx context.Context) (topology.ClusterInfo, error)
	// Server reads INFO server: which server (Redis, Valkey) and version the node runs.
	Server(ctx context.Context) (topology.Server, error)
	// DBSize counts the node's keys; bootstrap refuses to claim a node that holds data.
	DBSize(ctx context.Context) (int64, error)
	// Replication reads INFO replication: the role and, on a replica, its link state.
	Replication(ctx context.Context) (topology.Replication, error)
	// Memory reads INFO memory, for the capacity check before slots move (capacity.go).
	Memory(ctx context.Context) (topology.Memory, error)
	// Redirects sums INFO errorstats' MOVED and ASK replies, to wait for clients to stop
	// reaching a leaving node (leaving.go).
	Redirects(ctx context.Context) (int64, error)

	// Forming the cluster: bootstrap, healing, resizing (execute.go runs them as actions).

	// Meet asks this node to handshake with the node at addr ("ip:port").
	Meet(ctx context.Context, addr string) error
	// SetConfigEpoch gives a fresh node its config epoch before it meets others.
	SetConfigEpoch(ctx context.Context, epoch uint64) error
	// AddSlotsRange assigns the range to this node (ADDSLOTSRANGE, or ADDSLOTS on Redis < 7).
	AddSlotsRange(ctx context.Context, r topology.SlotRange) error
	// Replicate makes this node a replica of masterID.
	Replicate(ctx context.Context, masterID string) error
	// Forget removes a lost node from this node's table (and bans its ID for 60 s).
	Forget(ctx context.Context, nodeID string) error
	// ClusterReset makes a node that left the cluster forget every other node (CLUSTER
	// RESET SOFT), so it cannot gossip them back.
	ClusterReset(ctx context.Context) error

	// Failing over.

	// Failover asks this replica to take over from its master (CLUSTER FAILOVER, the
	// coordinated kind: the master stops writes until the replica has caught up).
	Failover(ctx context.Context) error
	// FailoverMode asks this replica to take over from a master that is gone, with
	// CLUSTER FAILOVER FORCE or TAKEOVER (FailoverForce, FailoverTakeover).
	FailoverMode(ctx context.Context, mode string) error

	// Moving slots and their keys (slotcommands.go; used by migrate.go, movekeys.go, bigkey.go, fixslots.go).

	// SetSlot sends CLUSTER SETSLOT slot IMPORTING|MIGRATING|NODE nodeID, or STABLE;
	// SetSlots the same for many slots in one pipeline.
	SetSlot(ctx context.Context, slot int, state, nodeID string) error
	SetSlots(ctx context.Context, slots []int, state, nodeID string) []error
	// ClaimSlots makes this target own the slots with one epoch bump (MULTI, CLUSTER
	// BUMPEPOCH, CLUSTER SETSLOT … NODE, EXEC).
	ClaimSlots(ctx context.Context, slots []int, nodeID string) []error
	// GetKeysInSlot and GetKeysInSlots list keys of slots (CLUSTER GETKEYSINSLOT);
	// CountKeysInSlot counts them (CLUSTER COUNTKEYSINSLOT).
	GetKeysInSlot(ctx context.Context, slot, count int) ([]string, error)
	GetKeysInSlots(ctx context.Context, slots []int, count int) ([][]string, error)
	CountKeysInSlot(ctx context.Context, slot int) (int64, error)
	// Migrate moves keys to the node at targetAddr (MIGRATE … KEYS).
	Migrate(ctx context.Context, targetAddr string, keys []string, replace bool, timeout time.Duration) error
	// Dump reads a key's serialized value (ASKING + DUMP), to compare both copies of a key.
	Dump(ctx context.Context, key string) (string, error)
	// MemoryUsages is MEMORY USAGE of each key, sizing MIGRATE batches by bytes.
	MemoryUsages(ctx context.Context, keys []string, asking bool) ([]int64, error)

	// Moving slots the server's own way, Valkey 9 and later (migrate_atomic.go).

	// MigrateSlotsAtomic starts CLUSTER MIGRATESLOTS on this source, a SLOTSRANGE … NODE
	// group per job; SlotMigrations reads its jobs (CLUSTER GETSLOTMIGRATIONS);
	// CancelSlotMigrations cancels its exports (CLUSTER CANCELSLOTMIGRATIONS);
	// CountKeysInSlots sums CLUSTER COUNTKEYSINSLOT over slots, the keys a job moved.
	MigrateSlotsAtomic(ctx context.Context, jobs []AtomicJob) error
	SlotMigrations(ctx context.Context) ([]SlotMigration, error)
	CancelSlotMigrations(ctx context.Context) error
	CountKeysInSlots(ctx context.Context, slots []int) (int64, error)

	// Configuration (CONFIG GET / CONFIG SET, never written to redis.conf).

	// ConfigGet and ConfigSet read and set one parameter: live configuration, external
	// addresses, cluster-allow-replica-migration.
	ConfigGet(ctx context.Context, name string) (string, error)
	ConfigSet(ctx context.Context, name, value string) error
	// NodeTimeout and SetNodeTimeout read and set cluster-node-timeout, held up while a big
	// key moves (bigkey.go).
	NodeTimeout(ctx context.Context) (time.Duration, error)
	SetNodeTimeout(ctx context.Context, d time.Duration) error

	// Passwords and users (acl.go, auth.go).

	// ACLSetUser makes a user exactly as given; ACLDelUser deletes one; ACLUsers lists
	// them; SetMasterAuth sets masterauth, the password a replica sends its master.
	ACLSetUser(ctx context.Context, u User) error
	ACLDelUser(ctx context.Context, name string) error
	ACLUsers(ctx context.Context) ([]string, error)
	SetMasterAuth(ctx context.Context, password string) error

	// TLS (tls.go).

	// ReloadTLS asks the node to read its certificate files again.
	ReloadTLS(ctx context.Context) error
}

// Factory hands out an Admin per node address, reusing one pooled client per address.
type Factory interface {
	For(addr string) Admin
	// Retain closes the clients of every address not in addrs: pods come back with new
	// addresses, and the old addresses' pools must not pile up.
	Retain(addrs []string)
	// Close closes every client the factory made.
	Close() error
	// backoff is the factory's memory of keys that could not move (stuck.go): one per
	// factory, so each cluster's stuck keys are its own.
	backoff() *stuckKeys
}

// Options configure the clients of a Factory.
type Options struct {
	// User and Password authenticate every connection (AUTH user password); with User
	// empty, or unknown to a node, AUTH password alone (the default user). Empty
	// Password: no AUTH.
	User     string
	Password string
	// OldPasswords are tried after Password, for nodes that do not have it yet (a
	// rotation under way). MIGRATE always sends Password.
	OldPasswords []string
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// PoolSize per node; small, the operator sends a few commands per reconcile.
	PoolSize int
	// PoolTimeout bounds the wait for a free connection of a busy pool.
	PoolTimeout time.Duration
	// IdleTimeout closes a connection unused this long (no idle connections are kept
	// open on purpose: MinIdleConns is 0).
	IdleTimeout time.Duration
	// Hooks are added to every client, e.g. a redistest.CommandCounter.
	Hooks []goredis.Hook
	// TLS, when set, is the configuration every connection dials with (spec.tls,
	// ClientTLSConfig); nil is plain TCP.
	TLS *tls.Config
}

// NewFactory returns a Factory with the given options; zero timeouts get short defaults
// because a reconcile must not hang on an unreachable pod, nor on a node that accepts
// connections but never answers (a stopped process): every command then fails after
// ReadTimeout, and a context deadline, when shorter, wins.
func NewFactory(opts Options) Factory {
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 2 * time.Second
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = 3 * time.Second
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = 3 * time.Second
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = 4
	}
	if opts.PoolTimeout == 0 {
		opts.PoolTimeout = opts.ReadTimeout
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = 2 * time.Minute
	}
	return &factory{opts: opts, clients: map[string]*goredis.Client{}}
}

type factory struct {
	opts    Options
	mu      sync.Mutex
	clients map[string]*goredis.Client
	// stuck remembers keys that could not move, so they are not tried again too soon.
	stuck stuckKeys
}

func (f *factory) For(addr string) Admin {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.clients[addr]
	if !ok {
		c = goredis.NewClient(&goredis.Options{
			Addr: addr,
			// AUTH in OnConnect rather than through Password, so a node that does not
			// know the operator's user yet is asked as the default user.
			OnConnect:    authOnConnect(f.opts.User, append([]string{f.opts.Password}, f.opts.OldPasswords...)),
			DialTimeout:  f.opts.DialTimeout,
			ReadTimeout:  f.opts.ReadTimeout,
			WriteTimeout: f.opts.WriteTimeout,
			PoolSize:     f.opts.PoolSize,
			PoolTimeout:  f.opts.PoolTimeout,
			MinIdleConns: 0,
			IdleTimeout:  f.opts.IdleTimeout,
			// Idle connections are reaped each 30 s, so a cluster checked less often
			// than IdleTimeout holds none between checks.
			IdleCheckFrequency: 30 * time.Second,
			TLSConfig:          f.opts.TLS,
			MaxRetries:         -1, // a write such as MEET must not be sent twice behind our back
		})
		for _, h := range f.opts.Hooks {
			c.AddHook(h)
		}
		f.clients[addr] = c
	}
	return &admin{addr: addr, c: c, user: f.opts.User, password: f.opts.Password, hooks: f.opts.Hooks}
}

func (f *factory) backoff() *stuckKeys { return &f.stuck }

func (f *factory) Retain(addrs []string) {
	keep := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		keep[a] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for addr, c := range f.clients {
		if !keep[addr] {
			_ = c.Close()
			delete(f.clients, addr)
		}
	}
}

func (f *factory) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var first error
	for addr, c := range f.clients {
		if err := c.Close(); err != nil && first == nil {
			first = fmt.Errorf("failed to close client for %s: %w", addr, err)
		}
		delete(f.clients, addr)
	}
	return first
}

type admin struct {
	addr string
	c    *goredis.Client
	// user and password are passed on to MIGRATE, which opens its own connection to
	// the target.
	user, password string
	// hooks are the client's, for a dedicated connection (go-redis' Conn has none).
	hooks []goredis.Hook
}

func (a *admin) Addr() string { return a.addr }

func (a *admin) ClusterNodes(ctx context.Context) ([]topology.Node, error) {
	text, err := a.c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("failed to read CLUSTER NODES from %s: %w", a.addr, err)
	}
	return topology.ParseClusterNodes(text)
}

func (a *admin) ClusterInfo(ctx context.Context) (topology.ClusterInfo, error) {
	text, err := a.c.ClusterInfo(ctx).Result()
	if err != nil {
		return topology.ClusterInfo{}, fmt.Errorf("failed to read CLUSTER INFO from %s: %w", a.addr, err)
	}
	return topology.ParseClusterInfo(text)
}

func (a *admin) Server(ctx context.Context) (topology.Server, error) {
	text, err := a.c.Info(ctx, "server").Result()
	if err != nil {
		return topology.Server{}, fmt.Errorf("failed to read INFO server from %s: %w", a.addr, err)
	}
	s := topology.ParseServer(text)
	if !s.Known() {
		return s, fmt.Errorf("%s says no version in INFO server", a.addr)
	}
	return s, nil
}

func (a *admin) DBSize(ctx context.Context) (int64, error) {
	n, err := a.c.DBSize(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("failed to read DBSIZE from %s: %w", a.addr, err)
	}
	return n, nil
}

func (a *admin) Meet(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("failed to meet %s: %w", addr, err)
	}
	if err := a.c.ClusterMeet(ctx, host, port).Err(); err != nil {
		return fmt.Errorf("failed to make %s meet %s: %w", a.addr, addr, err)
	}
	return nil
}

func (a *admin) AddSlotsRange(ctx context.Context, r topology.SlotRange) error {
	err := a.c.Do(ctx, "cluster", "addslotsrange", r.Start, r.End).Err()
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown subcommand") {
		// Redis before 7.0 has no ADDSLOTSRANGE; ADDSLOTS with every slot does the same.
		err = a.c.ClusterAddSlotsRange(ctx, r.Start, r.End).Err()
	}
	if err != nil {
		return fmt.Errorf("failed to assign slots %s to %s: %w", r, a.addr, err)
	}
	return nil
}

func (a *admin) Replicate(ctx context.Context, masterID string) error {
	if err := a.c.ClusterReplicate(ctx, masterID).Err(); err != nil {
		return fmt.Errorf("failed to make %s replicate %s: %w", a.addr, masterID, err)
	}
	return nil
}

func (a *admin) SetConfigEpoch(ctx context.Context, epoch uint64) error {
	err := a.c.Do(ctx, "cluster", "set-config-epoch", strconv.FormatUint(epoch, 10)).Err()
	if err != nil {
		return fmt.Errorf("failed to set config epoch %d on %s: %w", epoch, a.addr, err)
	}
	return nil
}

func (a *admin) Forget(ctx context.Context, nodeID string) error {
	if err := a.c.ClusterForget(ctx, nodeID).Err(); err != nil {
		return fmt.Errorf("failed to make %s forget node %s: %w", a.addr, nodeID, err)
	}
	return nil
}
