package backup

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Shard is one master at the cut.
type Shard struct {
	Addr   string
	NodeID string
	Slots  topology.SlotRanges
	// ConfigEpoch is the master's at the cut; a different one afterwards means its slots
	// changed hands meanwhile.
	ConfigEpoch uint64
	// ReplID and Offset are the replication ID and offset the master's snapshot starts at
	// (+FULLRESYNC): the RDB holds every write up to Offset and none after.
	ReplID string
	Offset int64
	// Diskless is true when the master streams its snapshot from its fork as it writes
	// it (diskless.go); else the fork writes it to disk first, and DiskReason says why
	// ("repl-diskless-sync-delay 5").
	Diskless   bool
	DiskReason string
}

// Cut is one point of the write stream across every master.
type Cut struct {
	Shards []Shard
	// PauseBegan is when the first CLIENT PAUSE was sent, PauseEnded when the last
	// CLIENT UNPAUSE was answered: every write acknowledged before PauseBegan is in the
	// snapshots, none sent after PauseEnded is. Paused is their difference, the longest any
	// client's write can have waited on the cut.
	PauseBegan, PauseEnded time.Time
	Paused                 time.Duration
}

// WaitError says the cluster is not in a state a cut can be taken in (slots migrating, a
// node failing, a master unreachable, a fork already running): nothing was paused or the
// cut was discarded; try again later.
type WaitError struct {
	// Reason is a CamelCase word for the status (OpenSlots, NodeFailing, ...).
	Reason  string
	Message string
}

func (e *WaitError) Error() string { return e.Message }

func wait(reason, format string, args ...any) error {
	return &WaitError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// IsWait reports whether err says to wait and try again.
func IsWait(err error) (*WaitError, bool) {
	var w *WaitError
	ok := errors.As(err, &w)
	return w, ok
}

// Options shape a cut.
type Options struct {
	// PauseTimeout is CLIENT PAUSE's own timeout: should the operator die mid-cut, writes
	// resume by themselves after it. A cut that took longer is discarded. Default 2 s.
	PauseTimeout time.Duration
}

// Take takes one consistent cut of the cluster whose nodes are at addrs, and returns
// one Snapshot per master, to be opened, read and closed by the caller.
//
// How: every node's view must show all 16384 slots served, no slot migrating or importing
// and no node failing (else a WaitError, nothing paused). A replication connection is
// opened to every master (REPLCONF rdb-only 1: the RDB and nothing after it), asking for a
// diskless snapshot (REPLCONF capa eof) from each master whose repl-diskless-sync is yes
// and repl-diskless-sync-delay 0, and for a disk one from any other (diskless.go). Then
// writes are paused on every master (CLIENT PAUSE WRITE) and, once every master has
// answered, each is sent PSYNC ? -1: with no background save running, the master forks for
// the snapshot while handling it (to its disk, or streaming to this connection) and
// answers +FULLRESYNC, in the same command, with the replication offset the snapshot
// starts at, which must equal the master's offset under the pause (else the master
// attached us to an older BGSAVE: discarded). Writes are unpaused only once every master
// has answered, so every fork happened under the pause: a fork deferred past PSYNC (a
// diskless delay the settings read did not show) holds its +FULLRESYNC back with it, and a
// cut whose pause outlasted its timeout is discarded. Since every pause was in force
// before any fork, a write that made it into one snapshot was preceded by every write that
// made it to any master before it. Last, the masters' views are read again: a slot that
// changed hands meanwhile discards the cut.
func Take(ctx context.Context, d Dialer, addrs []string, o Options) (*Cut, []*Snapshot, error) {
	if o.PauseTimeout == 0 {
		o.PauseTimeout = 2 * time.Second
	}
	masters, err := stableMasters(ctx, d, addrs)
	if err != nil {
		return nil, nil, err
	}
	// Connections first, so the pause covers no dial or AUTH.
	c := &cutConns{ctl: make([]*conn, len(masters)), rep: make([]*conn, len(masters))}
	if err := c.dial(ctx, d, masters); err != nil {
		c.closeAll()
		return nil, nil, err
	}
	cut := &Cut{PauseBegan: time.Now()}
	errs, unerrs := c.pauseAndSync(masters, o.PauseTimeout)
	cut.PauseEnded = time.Now()
	cut.Paused = cut.PauseEnded.Sub(cut.PauseBegan)
	for i := range c.ctl {
		c.ctl[i].Close()
		c.ctl[i] = nil
	}
	if err := cutDiscarded(errs, unerrs, cut, o.PauseTimeout); err != nil {
		c.closeAll()
		return nil, nil, err
	}
	after, err := stableMasters(ctx, d, mastersAddrs(masters))
	if err != nil {
		c.closeAll()
		return nil, nil, err
	}
	if !sameShards(masters, after) {
		c.closeAll()
		return nil, nil, wait("TopologyChanged", "the masters or their slots changed during the cut")
	}
	cut.Shards = masters
	snaps := make([]*Snapshot, len(masters))
	for i := range masters {
		snaps[i] = &Snapshot{Shard: masters[i], cn: c.rep[i]}
	}
	return cut, snaps, nil
}

// cutDiscarded is why a cut must be discarded: a master's PSYNC failed or came late, the
// unpause failed, or the pause outlasted its own timeout.
func cutDiscarded(errs, unerrs []error, cut *Cut, pauseTimeout time.Duration) error {
	if err := firstErr(errs); err != nil {
		return err
	}
	if err := firstErr(unerrs); err != nil {
		return fmt.Errorf("CLIENT UNPAUSE: %w (writes resume by themselves after %v)", err, pauseTimeout)
	}
	if cut.Paused >= pauseTimeout {
		return wait("PauseTooLong", "the cut took %v, longer than the pause (%v): a snapshot may have started after writes resumed", cut.Paused, pauseTimeout)
	}
	return nil
}

// cutConns are a cut's connections to each master: ctl for INFO and the pause, rep for
// the replication stream the snapshot comes on.
type cutConns struct {
	ctl, rep []*conn
}

func (c *cutConns) closeAll() {
	for i := range c.ctl {
		if c.ctl[i] != nil {
			c.ctl[i].Close()
		}
		if c.rep[i] != nil {
			c.rep[i].Close()
		}
	}
}

// dial opens both connections to every master, refusing a master with a background save
// running (its snapshot would start after the cut), and asks for the RDB only, diskless
// where the master's settings allow (askSnapshot).
func (c *cutConns) dial(ctx context.Context, d Dialer, masters []Shard) error {
	var err error
	for i := range masters {
		m := &masters[i]
		if c.ctl[i], err = d.dial(ctx, m.Addr); err != nil {
			return wait("MasterUnreachable", "master %s: %v", m.Addr, err)
		}
		info, err := c.ctl[i].do("INFO", "persistence")
		if err != nil {
			return fmt.Errorf("INFO persistence on %s: %w", m.Addr, err)
		}
		for _, f := range []string{"rdb_bgsave_in_progress", "aof_rewrite_in_progress", "module_fork_in_progress"} {
			if v, _ := infoField(info, f); v == "1" {
				return wait("ForkBusy", "master %s has a background save running (%s); its snapshot would start after the cut", m.Addr, f)
			}
		}
		if c.rep[i], err = d.dial(ctx, m.Addr); err != nil {
			return wait("MasterUnreachable", "master %s: %v", m.Addr, err)
		}
		if _, err := c.rep[i].do("REPLCONF", "rdb-only", "1"); err != nil {
			return fmt.Errorf("REPLCONF rdb-only on %s: %w", m.Addr, err)
		}
		if err := askSnapshot(c.ctl[i], c.rep[i], m); err != nil {
			return err
		}
	}
	return nil
}

// pauseAndSync pauses writes on every master, then, once all have answered, sends each
// PSYNC (syncAtCut), and unpauses every master whatever happened: the errors of the pause
// and PSYNC, and those of the unpause.
func (c *cutConns) pauseAndSync(masters []Shard, pauseTimeout time.Duration) (errs, unerrs []error) {
	pauseMs := strconv.FormatInt(pauseTimeout.Milliseconds(), 10)
	errs = parallel(len(masters), func(i int) error {
		_, err := c.ctl[i].do("CLIENT", "PAUSE", pauseMs, "WRITE")
		return err
	})
	if err := firstErr(errs); err == nil {
		errs = parallel(len(masters), func(i int) error {
			return c.syncAtCut(i, &masters[i], pauseTimeout)
		})
	}
	unerrs = parallel(len(masters), func(i int) error {
		_, err := c.ctl[i].do("CLIENT", "UNPAUSE")
		return err
	})
	return errs, unerrs
}

// syncAtCut sends master i PSYNC under the pause and records where its snapshot starts,
// which must be its offset under the pause (else it joined an older background save).
func (c *cutConns) syncAtCut(i int, m *Shard, pauseTimeout time.Duration) error {
	info, err := c.ctl[i].do("INFO", "replication")
	if err != nil {
		return err
	}
	v, _ := infoField(info, "master_repl_offset")
	want, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("no master_repl_offset in INFO of %s", m.Addr)
	}
	if err := c.rep[i].send("PSYNC", "?", "-1"); err != nil {
		return err
	}
	line, err := readFullResync(c.rep[i], pauseTimeout)
	if err != nil {
		return err
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "FULLRESYNC" {
		return fmt.Errorf("PSYNC on %s answered %q", m.Addr, line)
	}
	got, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return fmt.Errorf("PSYNC on %s answered %q", m.Addr, line)
	}
	if got != want {
		return wait("ForkBusy", "master %s started its snapshot at offset %d, not at the cut's %d (it joined a background save already running)", m.Addr, got, want)
	}
	m.ReplID, m.Offset = f[1], got
	return nil
}

// readFullResync reads PSYNC's answer, skipping the newlines a master may send first.
func readFullResync(cn *conn, within time.Duration) (string, error) {
	_ = cn.c.SetReadDeadline(time.Now().Add(within))
	for {
		line, err := cn.line()
		if err != nil {
			return "", err
		}
		if line == "" {
			continue
		}
		if line[0] == '-' {
			return "", redisError(line[1:])
		}
		return strings.TrimPrefix(line, "+"), nil
	}
}

func mastersAddrs(ms []Shard) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Addr
	}
	return out
}

func sameShards(a, b []Shard) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Addr != b[i].Addr || a[i].NodeID != b[i].NodeID || a[i].ConfigEpoch != b[i].ConfigEpoch || !a[i].Slots.Equal(b[i].Slots) {
			return false
		}
	}
	return true
}

// stableMasters reads every node's own line (CLUSTER NODES) and returns the masters,
// sorted by their first slot, when the cluster is fit for a cut.
func stableMasters(ctx context.Context, d Dialer, addrs []string) ([]Shard, error) {
	var masters []Shard
	owned := 0
	for _, addr := range addrs {
		cn, err := d.dial(ctx, addr)
		if err != nil {
			return nil, wait("NodeUnreachable", "node %s: %v", addr, err)
		}
		text, err := cn.do("CLUSTER", "NODES")
		cn.Close()
		if err != nil {
			return nil, wait("NodeUnreachable", "CLUSTER NODES on %s: %v", addr, err)
		}
		nodes, err := topology.ParseClusterNodes(text)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			if n.Fail || n.PFail {
				return nil, wait("NodeFailing", "%s sees node %s (%s) failing", addr, n.ID, n.Addr())
			}
			if !n.Myself {
				continue
			}
			// A master's open slot only: a replica's markers route nothing (topology's
			// NoOpenSlots).
			if n.Master && (len(n.Migrating) > 0 || len(n.Importing) > 0) {
				return nil, wait("OpenSlots", "%s has slots migrating %v or importing %v", addr, keys(n.Migrating), keys(n.Importing))
			}
			if n.Master && n.Slots.Count() > 0 {
				masters = append(masters, Shard{Addr: addr, NodeID: n.ID, Slots: n.Slots.Normalize(), ConfigEpoch: n.ConfigEpoch})
				owned += n.Slots.Count()
			}
		}
	}
	var all topology.SlotRanges
	for _, m := range masters {
		all = append(all, m.Slots...)
	}
	if covered := all.Normalize().Count(); owned != topology.SlotCount || covered != topology.SlotCount {
		return nil, wait("SlotsNotCovered", "the masters reached own %d of %d slots (%d claims)", covered, topology.SlotCount, owned)
	}
	sort.Slice(masters, func(i, j int) bool { return masters[i].Slots[0].Start < masters[j].Slots[0].Start })
	return masters, nil
}

func keys(m map[int]string) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func parallel(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errs
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
