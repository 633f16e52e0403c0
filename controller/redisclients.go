package controller

import (
	"crypto/tls"
	"sync"
	"time"

	goredis "github.com/go-redis/redis/v8"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// RedisClientOptions tune the Redis clients of every cluster. Zero values take
// redis.NewFactory's defaults. Each cluster's pools are bounded: at most PoolSize
// connections per node, none kept idle on purpose, closed after IdleTimeout unused, and
// all closed when the cluster is deleted (forget).
type RedisClientOptions struct {
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	PoolSize                               int
	IdleTimeout                            time.Duration
	// Hooks are added to every Redis client, e.g. a redistest.CommandCounter in tests.
	Hooks []goredis.Hook
}

// redisClients keeps one client factory per cluster (pooled connections per node), made
// anew when the cluster's password changes and closed when the cluster is gone.
type redisClients struct {
	opts RedisClientOptions
	mu   sync.Mutex
	byCR map[types.NamespacedName]clusterClients
}

type clusterClients struct {
	creds   credentials
	factory redis.Factory
}

// credentials are what the operator authenticates to a cluster's nodes with: its own
// ACL user and the password, plus the previous password while a rotation is under way
// (a node may not have the new one yet). The zero value is no password.
type credentials struct {
	user, password, previous string
	// tlsHash identifies tlsConfig, the TLS configuration of spec.tls (nil: plain TCP);
	// two credentials with the same hash are the same, whichever *tls.Config they hold.
	tlsHash   string
	tlsConfig *tls.Config
}

// same tells whether c and o authenticate alike.
func (c credentials) same(o credentials) bool {
	c.tlsConfig, o.tlsConfig = nil, nil
	return c == o
}

func newRedisClients(opts RedisClientOptions) *redisClients {
	return &redisClients{opts: opts, byCR: map[types.NamespacedName]clusterClients{}}
}

func (c *redisClients) factory(key types.NamespacedName, creds credentials) redis.Factory {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.byCR[key]; ok && cc.creds.same(creds) {
		return cc.factory
	} else if ok {
		_ = cc.factory.Close()
	}
	opts := redis.Options{
		User: creds.user, Password: creds.password,
		DialTimeout: c.opts.DialTimeout, ReadTimeout: c.opts.ReadTimeout, WriteTimeout: c.opts.WriteTimeout,
		PoolSize: c.opts.PoolSize, IdleTimeout: c.opts.IdleTimeout,
		Hooks: c.opts.Hooks, TLS: creds.tlsConfig,
	}
	if creds.previous != "" {
		opts.OldPasswords = []string{creds.previous}
	}
	f := redis.NewFactory(opts)
	c.byCR[key] = clusterClients{creds: creds, factory: f}
	return f
}

// lastPassword is the password the cluster's clients were last made with, if any: when
// the password Secret goes missing (and Secret NAME-auth with it) the operator keeps
// speaking to Redis with it rather than falling back to no password (which Redis would
// refuse, hiding the cluster's state).
func (c *redisClients) lastPassword(key types.NamespacedName) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, ok := c.byCR[key]
	return cc.creds.password, ok && cc.creds.password != ""
}

// lastTLS is the TLS configuration the cluster's clients were last made with, if any:
// when the Secret of spec.tls goes missing the operator keeps dialing with it.
func (c *redisClients) lastTLS(key types.NamespacedName) (string, *tls.Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc := c.byCR[key]
	return cc.creds.tlsHash, cc.creds.tlsConfig
}

// forget closes the clients of a cluster that no longer exists.
func (c *redisClients) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.byCR[key]; ok {
		_ = cc.factory.Close()
		delete(c.byCR, key)
	}
}

// closeAll closes every cluster's clients.
func (c *redisClients) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, cc := range c.byCR {
		_ = cc.factory.Close()
		delete(c.byCR, key)
	}
}

// credsOf is what the cluster's clients were last made with: a backup of the cluster
// speaks to its nodes as the cluster's reconcile last did.
func (c *redisClients) credsOf(key types.NamespacedName) (credentials, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, ok := c.byCR[key]
	return cc.creds, ok
}
