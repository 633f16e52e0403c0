package backup

import (
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

// ErrIncompatible wraps the errors no retry can cure: the object does not read as an RDB
// file this reader knows (a newer format, module data, corrupt content), or a master
// refuses a key's payload (a server older than the backup's). An error reading the
// source (the store, the network) is not one of them.
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
func refusedPayload(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "DUMP payload version or checksum are wrong") || strings.Contains(msg, "Bad data format")
}

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
	errs := parallel(len(sources), func(i int) error {
		rc, err := sources[i]()
		if err != nil {
			return err
		}
		defer rc.Close()
		return restoreOne(ctx, t, rc, owners, clients, p)
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
					if refusedPayload(c.Err()) {
						return fmt.Errorf("%w: RESTORE %q on %s: %w", ErrIncompatible, b.args[i][1], addr, c.Err())
					}
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
	src := &sourceReader{r: r}
	var stopped error // the callback's own error, if it stopped the scan
	_, err := rdb.Scan(src, func(e *rdb.Entry) (err error) {
		defer func() { stopped = err }()
		if e.DB != 0 {
			return fmt.Errorf("%w: key %q is in database %d; a cluster has only database 0", ErrIncompatible, e.Key, e.DB)
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
	if err == nil {
		// The RDB ends at its own checksum; read the object to its end so a source that
		// checks the whole object (VerifyingReader) does.
		_, err = io.Copy(io.Discard, src)
	}
	switch {
	case err == nil:
	case stopped != nil || src.err != nil:
		return err
	default:
		return fmt.Errorf("%w: %w", ErrIncompatible, err)
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
