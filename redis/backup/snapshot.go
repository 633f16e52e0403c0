package backup

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Snapshot is one master's RDB, read from its replication stream.
type Snapshot struct {
	Shard Shard
	// Size is the RDB's length in bytes, known once Open returned.
	Size int64
	cn   *conn
	body io.Reader
}

// Open waits for the master to have written its snapshot (the BGSAVE runs on the master
// after the cut; the master sends newlines meanwhile) and starts the RDB: Size is then set.
// A master that sends nothing for idle fails it.
func (s *Snapshot) Open(idle time.Duration) error {
	for {
		_ = s.cn.c.SetReadDeadline(time.Now().Add(idle))
		b, err := s.cn.r.ReadByte()
		if err != nil {
			return fmt.Errorf("failed to read the snapshot of %s: %w", s.Shard.Addr, err)
		}
		if b == '\n' {
			continue // keepalive while the BGSAVE runs
		}
		if b != '$' {
			return fmt.Errorf("unexpected snapshot preamble from %s: %q", s.Shard.Addr, b)
		}
		line, err := s.cn.line()
		if err != nil {
			return err
		}
		if strings.HasPrefix(line, "EOF:") {
			return fmt.Errorf("%s sent a diskless snapshot, which was not asked for", s.Shard.Addr)
		}
		n, err := strconv.ParseInt(line, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("bad snapshot length from %s: %q", s.Shard.Addr, line)
		}
		s.Size = n
		s.body = &deadlineReader{cn: s.cn, idle: idle, r: io.LimitReader(s.cn.r, n)}
		return nil
	}
}

// Read reads the RDB (after Open); io.EOF at its end.
func (s *Snapshot) Read(p []byte) (int, error) {
	if s.body == nil {
		return 0, errors.New("snapshot not opened")
	}
	return s.body.Read(p)
}

// Close ends the replication connection (the master forgets this replica).
func (s *Snapshot) Close() error { return s.cn.Close() }

type deadlineReader struct {
	cn   *conn
	idle time.Duration
	r    io.Reader
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	_ = d.cn.c.SetReadDeadline(time.Now().Add(d.idle))
	return d.r.Read(p)
}
