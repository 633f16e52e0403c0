package backup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
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
	// InFlight bounds the keys sent to one master on one connection whose replies have
	// not been read yet (default 10,000).
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
// SET … PXAT. Keys whose expiry has passed are skipped. It fails on the first key a master
// refuses.
//
// Each source streams to every master on a connection of its own, as redis-cli --pipe
// does: commands are written as the file is read, and a reader takes the replies in
// order meanwhile, so no round trip is waited for (at most InFlight keys unanswered).
func Restore(ctx context.Context, t RestoreTarget, sources []func() (io.ReadCloser, error), p *Progress) error {
	if t.InFlight == 0 {
		t.InFlight = 10000
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
			return fmt.Errorf("%w: source %d: %w", ErrIncompatible, i, err)
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
				return fmt.Errorf("%w: %w: the backup is RDB %d; %s runs %s, and %s", ErrIncompatible, ErrUnreadable, v, addr, srv, why)
			}
		}
	}
	h := holdDetection(ctx, clients)
	defer h.release()
	errs := parallel(len(sources), func(i int) error {
		return restoreOne(ctx, t, readers[i], owners, h, p)
	})
	return firstErr(errs)
}

// Holding failure detection. RESTORE of a big key blocks its master for as long as it
// takes to rebuild it (a 2,000,000-member sorted set, 40 MB of payload: 6 s on a loaded
// 2-core machine, more than the default cluster-node-timeout of 5 s): the other masters
// would flag it failing and the cluster stop serving (or a replica take over) until it
// answers again, which is what TestBackupAMillionKeys saw. The restored cluster does not
// serve yet, so for the whole restore every master's cluster-node-timeout is raised to at
// least restoreHold, and further before a payload that could take longer to load than
// the hold covers (at payloadRate); each is set back when Restore returns. Best effort: a
// master that cannot be set keeps its own timeout. Should the operator die meanwhile, the
// masters keep the longer timeout until the operator sets it back once the cluster is
// Running (redis.ReleaseStaleHolds).
const (
	restoreHold = time.Minute
	// payloadRate is the RESTORE payload a master is assumed to load per second, under
	// half of what a loaded 2-core machine measured (40 MB in 6 s).
	payloadRate = 3 << 20
)

type hold struct {
	mu      sync.Mutex
	clients map[string]*goredis.Client
	old     map[string]time.Duration // what to set back, per master raised
	held    time.Duration
	// big is set once a big payload was sent: its master may just have come back.
	big bool
}

func holdDetection(ctx context.Context, clients map[string]*goredis.Client) *hold {
	h := &hold{clients: clients, old: map[string]time.Duration{}}
	h.raise(ctx, restoreHold)
	return h
}

// cover raises the hold, if needed, so that a payload of n bytes loads within it.
func (h *hold) cover(ctx context.Context, n int) {
	need := restoreHold + time.Duration(float64(n)/payloadRate*float64(time.Second))
	h.mu.Lock()
	held := h.held
	h.big = true
	h.mu.Unlock()
	if need > held {
		h.raise(ctx, need)
	}
}

func (h *hold) raise(ctx context.Context, to time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if to <= h.held {
		return
	}
	h.held = to
	for addr, c := range h.clients {
		v, err := c.ConfigGet(ctx, "cluster-node-timeout").Result()
		if err != nil || len(v) != 2 {
			continue
		}
		ms, err := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
		if err != nil || time.Duration(ms)*time.Millisecond >= to {
			continue
		}
		if c.ConfigSet(ctx, "cluster-node-timeout", strconv.FormatInt(to.Milliseconds(), 10)).Err() != nil {
			continue
		}
		if _, ok := h.old[addr]; !ok {
			h.old[addr] = time.Duration(ms) * time.Millisecond
		}
	}
}

// release sets every raised timeout back, after a big payload a second later, in which
// the masters hear from the node that was busy (as redis.holdDetection does); with its own
// context, as the restore's may be spent.
func (h *hold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.old) == 0 {
		return
	}
	if h.big {
		time.Sleep(time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for addr, old := range h.old {
		_ = h.clients[addr].ConfigSet(ctx, "cluster-node-timeout", strconv.FormatInt(old.Milliseconds(), 10)).Err()
	}
	h.old = map[string]time.Duration{}
}

func restoreOne(ctx context.Context, t RestoreTarget, r io.Reader, owners []string, h *hold, p *Progress) (err error) {
	streams := map[string]*restoreStream{}
	defer func() {
		// Every stream is flushed and its replies read, also after a failure (a reply
		// then names the key a master refused, which beats a later "connection closed").
		for _, st := range streams {
			if cerr := st.close(); err == nil {
				err = cerr
			}
		}
	}()
	n := 0
	src := &sourceReader{r: r}
	var stopped error // the callback's own error, if it stopped the scan
	_, err = rdb.Scan(src, func(e *rdb.Entry) (err error) {
		defer func() { stopped = err }()
		if e.DB != 0 {
			return fmt.Errorf("%w: key %q is in database %d; a cluster has only database 0", ErrIncompatible, e.Key, e.DB)
		}
		if n++; n%1024 == 0 {
			// A master whose keys are rare would keep them in its buffer for long: flush
			// every stream now and then.
			if err := ctx.Err(); err != nil {
				return err
			}
			for _, st := range streams {
				if err := st.flush(); err != nil {
					return err
				}
			}
		}
		now := time.Now().UnixMilli()
		if e.ExpireAtMs != 0 && e.ExpireAtMs <= now {
			p.Expired.Add(1)
			return nil
		}
		addr := owners[topology.KeySlot(string(e.Key))]
		st := streams[addr]
		if st == nil {
			var err error
			if st, err = openRestoreStream(ctx, t, addr, p); err != nil {
				return err
			}
			streams[addr] = st
		}
		if len(e.Value) > payloadRate {
			h.cover(ctx, len(e.Value))
		}
		return st.restore(e)
	})
	if err == nil {
		// The RDB ends at its own checksum; read the object to its end so a source that
		// checks the whole object (VerifyingReader) does.
		_, err = io.Copy(io.Discard, src)
	}
	switch {
	case err == nil, stopped != nil, src.err != nil:
		return err
	default:
		return fmt.Errorf("%w: %w", ErrIncompatible, err)
	}
}

// restoreStream sends RESTORE commands to one master on a connection of its own; a
// goroutine reads the replies meanwhile, in the order of the keys in pending.
type restoreStream struct {
	cn      *conn
	w       *bufio.Writer
	replace bool
	// unflushed are the keys written to w since the last flush; pending those sent whose
	// reply the reader has not read yet.
	unflushed      []pendingKey
	unflushedBytes int
	num            [20]byte // an expiry's digits
	pending        chan pendingKey
	done           chan struct{}
	p              *Progress
	// failed is set, after err, by the reader at the first error reply or read failure.
	failed atomic.Bool
	err    error
}

type pendingKey struct {
	key   string
	bytes int
}

// replyTimeout bounds the wait for one reply (a RESTORE of a big key takes a while).
const replyTimeout = time.Minute

func openRestoreStream(ctx context.Context, t RestoreTarget, addr string, p *Progress) (*restoreStream, error) {
	cn, err := t.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	st := &restoreStream{cn: cn, w: bufio.NewWriterSize(deadlineWriter{cn.c}, 256<<10), replace: t.Replace,
		pending: make(chan pendingKey, t.InFlight), done: make(chan struct{}), p: p}
	go st.read()
	go func() {
		select {
		case <-ctx.Done():
			cn.Close() // unblocks both sides
		case <-st.done:
		}
	}()
	return st, nil
}

// deadlineWriter gives each write to the connection its own deadline.
type deadlineWriter struct{ c net.Conn }

func (d deadlineWriter) Write(b []byte) (int, error) {
	_ = d.c.SetWriteDeadline(time.Now().Add(replyTimeout))
	return d.c.Write(b)
}

// restore writes one key: a string as SET key value [PXAT expiry], which costs a master
// less than half what RESTORE of the same key does (4 µs a call against 9 to 10 µs,
// measured on Redis 7.0 by bench/backup -local) and leaves the same key, expiry and
// encoding; any other type as RESTORE key expiry payload ABSTTL [REPLACE], the value as the
// backup encoded it. The cluster was found empty first (or Replace allows overwriting),
// so SET's overwriting is RESTORE … REPLACE's.
func (st *restoreStream) restore(e *rdb.Entry) error {
	if st.failed.Load() {
		return st.err
	}
	w := st.w
	var size int
	if e.Type == rdb.TypeString {
		v, err := e.StringValue()
		if err != nil {
			return fmt.Errorf("key %q: %w", e.Key, err)
		}
		if e.ExpireAtMs != 0 {
			w.WriteString("*5\r\n$3\r\nSET\r\n")
		} else {
			w.WriteString("*3\r\n$3\r\nSET\r\n")
		}
		writeBulk(w, e.Key)
		writeBulk(w, v)
		if e.ExpireAtMs != 0 {
			w.WriteString("$4\r\nPXAT\r\n")
			writeBulk(w, strconv.AppendInt(st.num[:0], e.ExpireAtMs, 10))
		}
		size = len(v)
	} else {
		payload := e.DumpPayload(e.Version)
		n := 5
		if st.replace {
			n = 6
		}
		w.WriteString("*" + strconv.Itoa(n) + "\r\n$7\r\nRESTORE\r\n")
		writeBulk(w, e.Key)
		writeBulk(w, strconv.AppendInt(st.num[:0], e.ExpireAtMs, 10))
		writeBulk(w, payload)
		w.WriteString("$6\r\nABSTTL\r\n")
		if st.replace {
			w.WriteString("$7\r\nREPLACE\r\n")
		}
		size = len(payload)
	}
	st.unflushed = append(st.unflushed, pendingKey{key: string(e.Key), bytes: size + len(e.Key)})
	st.unflushedBytes += size
	if len(st.unflushed) >= 512 || st.unflushedBytes >= 1<<20 {
		return st.flush()
	}
	return nil
}

func writeBulk(w *bufio.Writer, b []byte) {
	w.WriteString("$" + strconv.Itoa(len(b)) + "\r\n")
	w.Write(b)
	w.WriteString("\r\n")
}

// flush sends what is buffered, then hands its keys to the reader (waiting while InFlight
// keys are unanswered): the reader only ever waits for the reply of a command sent.
func (st *restoreStream) flush() error {
	if err := st.w.Flush(); err != nil {
		if st.failed.Load() {
			return st.err
		}
		return fmt.Errorf("RESTORE on %s: %w", st.cn.addr, err)
	}
	for _, pk := range st.unflushed {
		st.pending <- pk
	}
	st.unflushed, st.unflushedBytes = st.unflushed[:0], 0
	return nil
}

// read takes the replies in order; the first error reply or read failure stops it from
// counting, and it drains pending so the writer never blocks.
func (st *restoreStream) read() {
	defer close(st.done)
	var keys, bytes int64
	defer func() { st.p.Keys.Add(keys); st.p.Bytes.Add(bytes) }()
	for pk := range st.pending {
		if st.failed.Load() {
			continue
		}
		_ = st.cn.c.SetReadDeadline(time.Now().Add(replyTimeout))
		line, err := st.cn.line()
		switch {
		case err != nil:
			st.fail(fmt.Errorf("restoring %q on %s: %w", pk.key, st.cn.addr, err))
		case strings.HasPrefix(line, "-") && refusedPayload(line):
			st.fail(fmt.Errorf("%w: restoring %q on %s: %s", ErrIncompatible, pk.key, st.cn.addr, line[1:]))
		case strings.HasPrefix(line, "-"):
			st.fail(fmt.Errorf("restoring %q on %s: %s", pk.key, st.cn.addr, line[1:]))
		default:
			if keys, bytes = keys+1, bytes+int64(pk.bytes); keys == 1000 {
				st.p.Keys.Add(keys)
				st.p.Bytes.Add(bytes)
				keys, bytes = 0, 0
			}
		}
	}
}

func (st *restoreStream) fail(err error) {
	st.err = err
	st.failed.Store(true)
	st.cn.Close() // the writer's next write fails at once
}

// close sends what is buffered, waits for every reply and closes the connection; it
// returns the first failure.
func (st *restoreStream) close() error {
	ferr := st.flush()
	close(st.pending)
	<-st.done
	st.cn.Close()
	if st.failed.Load() {
		return st.err
	}
	return ferr
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
