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
	// BatchKeys and BatchBytes bound one pipeline to a master (defaults 1000 keys, 8 MiB).
	BatchKeys  int
	BatchBytes int
}

// ErrNotEmpty is returned when the target holds keys and Replace is not set.
var ErrNotEmpty = errors.New("the target cluster already holds keys")

// ErrUnreadable is returned, before any key is written, when a master of the target runs
// a server that cannot RESTORE the backup's RDB version (a newer server's backup into an
// older one, Redis 7.4+ into Valkey, Valkey 9 into Redis): RESTORE checks a payload's
// version as loading a file does.
var ErrUnreadable = errors.New("the target cannot read the backup's RDB version")

// Restore writes every key of the RDB files sources returns (each read whole, in
// parallel) to the master of the target that owns its slot, with RESTORE … ABSTTL: the
// value as the backup encoded it and the expiry as an absolute time. Keys whose expiry
// has passed are skipped. It fails on the first key a master refuses.
func Restore(ctx context.Context, t RestoreTarget, sources []func() (io.ReadCloser, error), p *Progress) error {
	if t.BatchKeys == 0 {
		t.BatchKeys = 1000
	}
	if t.BatchBytes == 0 {
		t.BatchBytes = 8 << 20
	}
	owners, err := slotOwners(ctx, t.Dialer, t.Addrs)
	if err != nil {
		return err
	}
	clients := map[string]*goredis.Client{}
	for _, addr := range owners {
		if _, ok := clients[addr]; ok {
			continue
		}
		clients[addr] = goredis.NewClient(&goredis.Options{
			Addr: addr, OnConnect: t.onConnect(), TLSConfig: t.TLS,
			DialTimeout: t.timeout(), ReadTimeout: time.Minute, WriteTimeout: time.Minute,
			PoolSize: len(sources) + 1, MaxRetries: -1,
		})
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	if !t.Replace {
		for addr, c := range clients {
			n, err := c.DBSize(ctx).Result()
			if err != nil {
				return fmt.Errorf("DBSIZE on %s: %w", addr, err)
			}
			if n > 0 {
				return fmt.Errorf("%w: %s has %d", ErrNotEmpty, addr, n)
			}
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
	readers := make([]io.Reader, len(sources))
	versions := map[int]bool{}
	for i, open := range sources {
		rc, err := open()
		if err != nil {
			return err
		}
		opened[i] = rc
		magic := make([]byte, rdb.MagicLen)
		if _, err := io.ReadFull(rc, magic); err != nil {
			return fmt.Errorf("reading the RDB header of source %d: %w", i, err)
		}
		h, err := rdb.ReadMagic(magic)
		if err != nil {
			return fmt.Errorf("source %d: %w", i, err)
		}
		versions[h.Version] = true
		readers[i] = io.MultiReader(bytes.NewReader(magic), rc)
	}
	for addr, c := range clients {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("INFO server on %s: %w", addr, err)
		}
		srv := topology.ParseServer(info)
		for v := range versions {
			if why := topology.RDBUnreadable(srv, v); why != "" {
				return fmt.Errorf("%w: the backup is RDB %d; %s runs %s, and %s", ErrUnreadable, v, addr, srv, why)
			}
		}
	}
	errs := parallel(len(sources), func(i int) error {
		return restoreOne(ctx, t, readers[i], owners, clients, p)
	})
	return firstErr(errs)
}

type batch struct {
	keys  int
	bytes int
	args  [][]any
}

func restoreOne(ctx context.Context, t RestoreTarget, r io.Reader, owners []string, clients map[string]*goredis.Client, p *Progress) error {
	batches := map[string]*batch{}
	flush := func(addr string) error {
		b := batches[addr]
		if b == nil || b.keys == 0 {
			return nil
		}
		cmds, err := clients[addr].Pipelined(ctx, func(pl goredis.Pipeliner) error {
			for _, a := range b.args {
				pl.Do(ctx, a...)
			}
			return nil
		})
		if err != nil {
			for i, c := range cmds {
				if c.Err() != nil {
					return fmt.Errorf("RESTORE %q on %s: %w", b.args[i][1], addr, c.Err())
				}
			}
			return fmt.Errorf("RESTORE on %s: %w", addr, err)
		}
		p.Keys.Add(int64(b.keys))
		p.Bytes.Add(int64(b.bytes))
		b.keys, b.bytes, b.args = 0, 0, b.args[:0]
		return nil
	}
	_, err := rdb.Scan(r, func(e *rdb.Entry) error {
		if e.DB != 0 {
			return fmt.Errorf("key %q is in database %d; a cluster has only database 0", e.Key, e.DB)
		}
		now := time.Now().UnixMilli()
		if e.ExpireAtMs != 0 && e.ExpireAtMs <= now {
			p.Expired.Add(1)
			return nil
		}
		addr := owners[topology.KeySlot(string(e.Key))]
		b := batches[addr]
		if b == nil {
			b = &batch{}
			batches[addr] = b
		}
		payload := e.DumpPayload(e.Version)
		args := []any{"restore", string(e.Key), e.ExpireAtMs, payload, "absttl"}
		if t.Replace {
			args = append(args, "replace")
		}
		b.args = append(b.args, args)
		b.keys++
		b.bytes += len(payload) + len(e.Key)
		if b.keys >= t.BatchKeys || b.bytes >= t.BatchBytes {
			return flush(addr)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for addr := range batches {
		if err := flush(addr); err != nil {
			return err
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
