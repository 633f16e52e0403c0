package backup

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"
)

// streamed opens a Snapshot on one end of a pipe while the other end writes wire in
// chunks of the given sizes (the last repeated), then closes: what a master sends.
func streamed(t *testing.T, diskless bool, wire []byte, chunks ...int) *Snapshot {
	t.Helper()
	ours, theirs := net.Pipe()
	t.Cleanup(func() { ours.Close() })
	go func() {
		defer theirs.Close()
		for i := 0; len(wire) > 0; i++ {
			n := min(chunks[min(i, len(chunks)-1)], len(wire))
			if _, err := theirs.Write(wire[:n]); err != nil {
				return
			}
			wire = wire[n:]
		}
	}()
	s := &Snapshot{Shard: Shard{Addr: "master:6379", Diskless: diskless},
		cn: &conn{c: ours, r: bufio.NewReaderSize(ours, 1<<20), addr: "master:6379", timeout: time.Second}}
	if err := s.Open(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDisklessSnapshotStopsAtItsMark: the RDB read from a diskless snapshot is the bytes
// between the preamble and the end mark, whole, for any split of the stream into reads,
// a mark split across two reads included, and Size is their count once Read said io.EOF.
func TestDisklessSnapshotStopsAtItsMark(t *testing.T) {
	mark := strings.Repeat("0123456789abcdef", 3)[:eofMarkLen]
	rdb := make([]byte, 300_000)
	for i := range rdb {
		rdb[i] = byte(rand.IntN(256))
	}
	// A byte of the mark at the RDB's end: only the whole mark ends it.
	rdb[len(rdb)-1] = mark[0]
	wire := append([]byte("\n\n$EOF:"+mark+"\r\n"), rdb...)
	wire = append(wire, mark...)
	preamble := len("\n\n$EOF:" + mark + "\r\n")
	for _, chunks := range [][]int{
		{len(wire)},
		{1},
		{preamble + len(rdb) + 17, 23}, // the mark split 17 + 23
		{preamble + len(rdb) + 39, 1},  // all but its last byte first
		{preamble + len(rdb) - 5, 44},  // the RDB's last bytes with the mark
		{preamble, 4096, 7, 65536, 39, 40, 41, 100000}, // ragged
	} {
		s := streamed(t, true, wire, chunks...)
		if s.Size != -1 {
			t.Fatalf("chunks %v: Size %d before the end, want -1", chunks, s.Size)
		}
		got, err := io.ReadAll(s)
		if err != nil {
			t.Fatalf("chunks %v: %v", chunks, err)
		}
		if !bytes.Equal(got, rdb) {
			t.Fatalf("chunks %v: read %d bytes, not the RDB's %d", chunks, len(got), len(rdb))
		}
		if s.Size != int64(len(rdb)) {
			t.Fatalf("chunks %v: Size %d, want %d", chunks, s.Size, len(rdb))
		}
	}
}

// TestTruncatedSnapshotFails: a stream that ends before a diskless snapshot's mark (mid
// RDB, or mid mark) or before a disk snapshot's announced length is an error, never a
// shorter RDB read as whole.
func TestTruncatedSnapshotFails(t *testing.T) {
	mark := strings.Repeat("f", eofMarkLen)
	rdb := bytes.Repeat([]byte("REDIS0011 some keys "), 5000)
	eof := append([]byte("$EOF:"+mark+"\r\n"), rdb...)
	eof = append(eof, mark...)
	for _, cut := range []int{len(eof) - 1, len(eof) - eofMarkLen, len(eof) - eofMarkLen - 1000} {
		s := streamed(t, true, eof[:cut], 4096)
		_, err := io.ReadAll(s)
		if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "without its end mark") {
			t.Fatalf("diskless stream cut %d bytes short: %v", len(eof)-cut, err)
		}
		if s.Size != -1 {
			t.Fatalf("diskless stream cut short: Size %d, want -1", s.Size)
		}
	}
	disk := append([]byte("$100000\r\n"), rdb...)
	s := streamed(t, false, disk[:len(disk)-1], 4096)
	if _, err := io.ReadAll(s); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("disk stream cut 1 byte short: %v", err)
	}
}

// TestSnapshotPreambles: a diskless preamble that was not asked for, a mark of the wrong
// length and an error in place of the RDB (a fork that failed after +FULLRESYNC) fail
// Open.
func TestSnapshotPreambles(t *testing.T) {
	for _, c := range []struct {
		diskless bool
		wire     string
		want     string
	}{
		{false, "$EOF:" + strings.Repeat("a", eofMarkLen) + "\r\n", "not asked for"},
		{true, "$EOF:abc\r\n", "bad diskless snapshot mark"},
		{true, "-ERR BGSAVE failed, replication can't continue\r\n", "failed its snapshot: ERR BGSAVE failed"},
		{true, "+OK\r\n", "unexpected snapshot preamble"},
	} {
		ours, theirs := net.Pipe()
		go func() { _, _ = theirs.Write([]byte(c.wire)); theirs.Close() }()
		s := &Snapshot{Shard: Shard{Addr: "m:1", Diskless: c.diskless}, cn: &conn{c: ours, r: bufio.NewReader(ours), addr: "m:1", timeout: time.Second}}
		err := s.Open(time.Second)
		ours.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%q: %v, want %q", c.wire, err, c.want)
		}
	}
}
