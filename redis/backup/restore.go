package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/rdb"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Progress counts what a restore (or a backup) has done so far; safe to read while it runs.
type Progress struct {
	Keys  atomic.Int64
	Bytes atomic.Int64
	// Expired counts keys of the backup whose expiry had passed by the restore: Redis
	// would have deleted them, so they are not written.
	Expired atomic.Int64
}

// RestoreTarget is the cluster keys are written to.
type RestoreTarget struct {
	// Addrs are the cluster's nodes ("ip:port"); the slot owners are read from them.
	Addrs []string
	Dialer
	// Replace allows a cluster that already holds keys (RESTORE … REPLACE); without it a
	// cluster with any key is refused before anything is written.
	Replace bool
	// InFlight is about how many keys sent to one master may wait for their replies
	// (default 10,000; rounded to whole chunks of up to 512 keys, at least 3 of them).
	InFlight int
}

// ErrNotEmpty is returned when the target holds keys and Replace is not set.
var ErrNotEmpty = errors.New("the target cluster already holds keys")

// ErrUnreadable is returned, before any key is written, when a master of the target runs
// a server that cannot RESTORE the backup's RDB version (a newer server's backup into an
// older one, Redis 7.4+ into Valkey, Valkey 9 into Redis): RESTORE checks a payload's
// version as loading a file does.
var ErrUnreadable = errors.New("the target cannot read the backup's RDB version")

// ErrIncompatible wraps the errors no retry can cure: the object does not read as an RDB
// file this reader knows (a newer format, module data, corrupt content), a master of the
// target cannot read the backup's version (ErrUnreadable), or a master refuses a key's
// payload. An error reading the source (the store, the network) is not one of them.
var ErrIncompatible = errors.New("the backup cannot be restored into this cluster")

// sourceReader remembers the error its source gave, so a parse that fails on it is told
// from one that fails on the content.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// refusedPayload says whether a master's answer to RESTORE refuses the payload itself.
func refusedPayload(msg string) bool {
	return strings.Contains(msg, "DUMP payload version or checksum are wrong") || strings.Contains(msg, "Bad data format")
}

// Restore writes every key of the RDB files sources returns (each read whole, in
// parallel) to the master of the target that owns its slot, with RESTORE … ABSTTL (the
// value as the backup encoded it and the expiry as an absolute time), strings with
// SET … PXAT, or, without an expiry, by slot in MSET (restore_group.go). Keys whose expiry
// has passed are skipped. It fails on the first command a master refuses.
//
// Each master is fed on one connection, as redis-cli --pipe does, by every source:
// commands are written as the files are read, and a reader takes the replies in order
// meanwhile, so no round trip is waited for (about InFlight keys unanswered at most: a
// chunk is sent once full, and an MSET's keys join it at once).
func Restore(ctx context.Context, t RestoreTarget, sources []func() (io.ReadCloser, error), p *Progress) error {
	if t.InFlight == 0 {
		t.InFlight = 10000
	}
	owners, err := slotOwners(ctx, t.Dialer, t.Addrs)
	if err != nil {
		return err
	}
	clients := t.masterClients(owners, len(sources)+1)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	if !t.Replace {
		if err := refuseKeys(ctx, clients); err != nil {
			return err
		}
	}
	// Every source's magic and every master's server first: nothing is written to a
	// target that cannot read the backup.
	opened := make([]io.ReadCloser, len(sources))
	defer func() {
		for _, rc := range opened {
			if rc != nil {
				rc.Close()
			}
		}
	}()
	readers, versions, err := openSources(sources, opened)
	if err != nil {
		return err
	}
	if err := checkServers(ctx, clients, versions); err != nil {
		return err
	}
	h := holdDetection(ctx, clients)
	defer h.release()
	feeds, err := openFeeds(ctx, t, clients, p)
	if err != nil {
		return err
	}
	rt, opt := newRoutes(owners, feeds), shardOptions{replace: t.Replace}
	if msetAllowed(ctx, clients, t.User) {
		opt.groupBytes = groupBytesFor(len(sources))
	}
	errs := parallel(len(sources), func(i int) error {
		return restoreOne(ctx, readers[i], rt, opt, h, p)
	})
	// A feed's own error (a reply naming the key a master refused) comes first, before
	// the sources' (which may only say that the connection closed).
	if err := closeFeeds(feeds); err != nil {
		return err
	}
	return firstErr(errs)
}

// msetAllowed says whether user (the default user when "") may run MSET on every master,
// as ACL DRYRUN answers: a cluster made by an operator before MSET was in its user's rules
// (redis.OperatorCommands) refuses MSET and ACL DRYRUN alike, and gets a SET per string.
func msetAllowed(ctx context.Context, clients map[string]*goredis.Client, user string) bool {
	if user == "" {
		user = "default"
	}
	for _, c := range clients {
		if ok, err := c.Do(ctx, "ACL", "DRYRUN", user, "MSET", "k", "v").Text(); err != nil || ok != "OK" {
			return false
		}
	}
	return true
}

// closeFeeds closes every feed once what it was given is sent and answered, also after a
// failure, and returns the first failure.
func closeFeeds(feeds map[string]*masterFeed) error {
	var first error
	for _, f := range feeds {
		if err := f.close(); first == nil {
			first = err
		}
	}
	return first
}

// openFeeds opens a feed to every master.
func openFeeds(ctx context.Context, t RestoreTarget, clients map[string]*goredis.Client, p *Progress) (map[string]*masterFeed, error) {
	feeds := map[string]*masterFeed{}
	for addr := range clients {
		f, err := openFeed(ctx, t, addr, p)
		if err != nil {
			closeFeeds(feeds)
			return nil, err
		}
		feeds[addr] = f
	}
	return feeds, nil
}

// masterClients is a client of each master of owners, with pool connections each.
func (t RestoreTarget) masterClients(owners []string, pool int) map[string]*goredis.Client {
	clients := map[string]*goredis.Client{}
	for _, addr := range owners {
		if _, ok := clients[addr]; ok {
			continue
		}
		clients[addr] = goredis.NewClient(&goredis.Options{
			Addr: addr, OnConnect: t.onConnect(), TLSConfig: t.TLS,
			DialTimeout: t.timeout(), ReadTimeout: time.Minute, WriteTimeout: time.Minute,
			PoolSize: pool, MaxRetries: -1,
		})
	}
	return clients
}

// refuseKeys is ErrNotEmpty when a master holds a key.
func refuseKeys(ctx context.Context, clients map[string]*goredis.Client) error {
	for addr, c := range clients {
		n, err := c.DBSize(ctx).Result()
		if err != nil {
			return fmt.Errorf("DBSIZE on %s: %w", addr, err)
		}
		if n > 0 {
			return fmt.Errorf("%w: %s has %d", ErrNotEmpty, addr, n)
		}
	}
	return nil
}

// openSources opens every source (into opened, which the caller closes) and reads its
// magic: the readers give the whole RDB again; versions are the RDB versions met.
func openSources(sources []func() (io.ReadCloser, error), opened []io.ReadCloser) ([]io.Reader, map[int]bool, error) {
	readers := make([]io.Reader, len(sources))
	versions := map[int]bool{}
	for i, open := range sources {
		rc, err := open()
		if err != nil {
			return nil, nil, err
		}
		opened[i] = rc
		magic := make([]byte, rdb.MagicLen)
		if _, err := io.ReadFull(rc, magic); err != nil {
			return nil, nil, fmt.Errorf("reading the RDB header of source %d: %w", i, err)
		}
		h, err := rdb.ReadMagic(magic)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: source %d: %w", ErrIncompatible, i, err)
		}
		versions[h.Version] = true
		readers[i] = io.MultiReader(bytes.NewReader(magic), rc)
	}
	return readers, versions, nil
}

// checkServers refuses (ErrUnreadable) a master whose server cannot RESTORE one of the
// RDB versions.
func checkServers(ctx context.Context, clients map[string]*goredis.Client, versions map[int]bool) error {
	for addr, c := range clients {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("INFO server on %s: %w", addr, err)
		}
		srv := topology.ParseServer(info)
		for v := range versions {
			if why := topology.RDBUnreadable(srv, v); why != "" {
				return fmt.Errorf("%w: %w: the backup is RDB %d; %s runs %s, and %s", ErrIncompatible, ErrUnreadable, v, addr, srv, why)
			}
		}
	}
	return nil
}

// slotOwners maps every slot to its master's address, from the first node that sees all
// 16384 served and none open.
func slotOwners(ctx context.Context, d Dialer, addrs []string) ([]string, error) {
	ms, err := stableMasters(ctx, d, addrs)
	if err != nil {
		return nil, err
	}
	owners := make([]string, topology.SlotCount)
	for _, m := range ms {
		for _, r := range m.Slots {
			for s := r.Start; s <= r.End; s++ {
				owners[s] = m.Addr
			}
		}
	}
	return owners, nil
}

func (d Dialer) onConnect() func(ctx context.Context, cn *goredis.Conn) error {
	return func(ctx context.Context, cn *goredis.Conn) error {
		var err error
		for _, pw := range d.Passwords {
			if pw == "" {
				continue
			}
			if d.User != "" {
				if err = cn.AuthACL(ctx, d.User, pw).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
					return err
				}
			}
			if err = cn.Auth(ctx, pw).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
				return err
			}
		}
		return err
	}
}
