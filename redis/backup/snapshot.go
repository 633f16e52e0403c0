package backup

import (
	"bytes"
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
	// Size is the RDB's length in bytes. A disk snapshot announces it before its RDB: set
	// once Open returned. A diskless one (Shard.Diskless) only ends with a mark: Size is -1
	// until Read returned io.EOF at that mark, then the bytes read.
	Size int64
	cn   *conn
	body io.Reader
}

// eofMarkLen is the length of the random mark a diskless snapshot announces
// ($EOF:<mark>\r\n) and ends with (RDB_EOF_MARK_SIZE in Redis' replication.c).
const eofMarkLen = 40

// Open waits for the snapshot to start (a disk snapshot's BGSAVE runs on the master after
// the cut, and the master sends newlines meanwhile; a diskless one starts at once) and
// reads its preamble: $<length> for a disk snapshot, $EOF:<mark> for a diskless one, which
// only a master asked for one (Shard.Diskless) may send. A master that sends nothing for
// idle fails it.
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
		line, err := s.cn.line()
		if err != nil {
			return err
		}
		switch {
		case b == '-':
			// A fork that failed after +FULLRESYNC (diskless: the answer precedes the fork).
			return fmt.Errorf("%s failed its snapshot: %s", s.Shard.Addr, line)
		case b != '$':
			return fmt.Errorf("unexpected snapshot preamble from %s: %q", s.Shard.Addr, string(b)+line)
		}
		src := &deadlineReader{cn: s.cn, idle: idle}
		if mark, ok := strings.CutPrefix(line, "EOF:"); ok {
			if !s.Shard.Diskless {
				return fmt.Errorf("%s sent a diskless snapshot, which was not asked for", s.Shard.Addr)
			}
			if len(mark) != eofMarkLen {
				return fmt.Errorf("bad diskless snapshot mark from %s: %q", s.Shard.Addr, line)
			}
			s.Size = -1
			s.body = &eofReader{src: src, addr: s.Shard.Addr, mark: []byte(mark), buf: make([]byte, 0, 256<<10), size: &s.Size}
			return nil
		}
		n, err := strconv.ParseInt(line, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("bad snapshot length from %s: %q", s.Shard.Addr, line)
		}
		s.Size = n
		src.limited, src.left = true, n
		s.body = src
		return nil
	}
}

// Read reads the RDB (after Open); io.EOF at its end, an error for a stream that ended
// before it.
func (s *Snapshot) Read(p []byte) (int, error) {
	if s.body == nil {
		return 0, errors.New("snapshot not opened")
	}
	return s.body.Read(p)
}

// Close ends the replication connection (the master forgets this replica).
func (s *Snapshot) Close() error { return s.cn.Close() }

// deadlineReader reads from the connection with a fresh read deadline each time: idle
// bounds a stall, not the transfer. A disk snapshot's (limited) is its announced length,
// left bytes of which are still to come: a stream that ends before them is an error.
type deadlineReader struct {
	cn      *conn
	idle    time.Duration
	limited bool
	left    int64
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	_ = d.cn.c.SetReadDeadline(time.Now().Add(d.idle))
	if !d.limited {
		return d.cn.r.Read(p)
	}
	if d.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > d.left {
		p = p[:d.left]
	}
	n, err := d.cn.r.Read(p)
	d.left -= int64(n)
	if err == io.EOF {
		err = fmt.Errorf("the snapshot of %s ended %d bytes before its announced length: %w", d.cn.addr, d.left, io.ErrUnexpectedEOF)
	}
	return n, err
}

// eofReader reads a diskless snapshot: the RDB up to, not including, the mark it ends
// with. As Redis' own replica does (readSyncBulkPayload), the end is where the bytes
// received so far end with the mark; the master sends nothing after it. The last
// len(mark) bytes received are held back until more arrive, so a mark split across reads
// is found and never handed out. A stream that ends before the mark is an error.
type eofReader struct {
	src  io.Reader
	addr string
	mark []byte
	// buf[off:] are the bytes received and not handed out yet.
	buf  []byte
	off  int
	n    int64  // bytes handed out
	size *int64 // set to n at the mark
	done bool
	err  error
}

func (e *eofReader) Read(p []byte) (int, error) {
	for {
		held := len(e.mark)
		if e.done {
			held = 0
		}
		if ready := len(e.buf) - e.off - held; ready > 0 {
			n := copy(p, e.buf[e.off:e.off+ready])
			e.off += n
			e.n += int64(n)
			return n, nil
		}
		if e.done {
			*e.size = e.n
			return 0, io.EOF
		}
		if e.err != nil {
			return 0, e.err
		}
		e.fill()
	}
}

// fill reads once more from the stream, after the bytes held back, and decides whether
// the stream ended at the mark (done) or without it (err).
func (e *eofReader) fill() {
	rest := copy(e.buf[:cap(e.buf)], e.buf[e.off:])
	e.buf, e.off = e.buf[:rest], 0
	n, err := e.src.Read(e.buf[rest:cap(e.buf)])
	e.buf = e.buf[:rest+n]
	if n > 0 && bytes.HasSuffix(e.buf, e.mark) {
		e.buf, e.done = e.buf[:len(e.buf)-len(e.mark)], true
		return
	}
	switch {
	case err == io.EOF:
		e.err = fmt.Errorf("the diskless snapshot of %s ended after %d bytes without its end mark: %w", e.addr, e.n+int64(len(e.buf)), io.ErrUnexpectedEOF)
	case err != nil:
		e.err = fmt.Errorf("the diskless snapshot of %s broke off after %d bytes: %w", e.addr, e.n+int64(len(e.buf)), err)
	}
}
