package backup

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/rdb"
)

// A server that answers CONFIG GET with a negative or huge array, or a huge bulk, gets
// an error naming the reply, not a panic or an allocation of its choosing.
func TestConfigRefusesABrokenReply(t *testing.T) {
	for _, reply := range []string{"*-1\r\n", "*100000000\r\n", "*3\r\n", "*2\r\n$4\r\nname\r\n$999999999999\r\n"} {
		ours, theirs := net.Pipe()
		go func() {
			_, _ = theirs.Read(make([]byte, 4096))
			_, _ = theirs.Write([]byte(reply))
		}()
		cn := &conn{c: ours, r: bufio.NewReader(ours), addr: "m:1", timeout: time.Second}
		v, err := cn.config("repl-diskless-sync")
		if err == nil || !strings.Contains(err.Error(), "bad") {
			t.Errorf("reply %q: got %q, %v; want a bad-length error", reply, v, err)
		}
		ours.Close()
		theirs.Close()
	}
}

// A master whose replies arrive split mid-line, each part within replyTimeout of the
// last but all of them together past it (a congested link): the restore waits each part
// out, as every read of the socket gets a fresh deadline.
func TestRepliesSplitAcrossReadsWaitPerRead(t *testing.T) {
	defer func(d time.Duration) { replyTimeout = d }(replyTimeout)
	replyTimeout = 400 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		go func() { _, _ = io.Copy(io.Discard, c) }()
		for _, part := range []string{"+OK\r\n+O", "K\r\n+O", "K\r\n"} {
			_, _ = c.Write([]byte(part))
			time.Sleep(250 * time.Millisecond)
		}
		time.Sleep(time.Second)
	}()
	var p Progress
	f, err := openFeed(context.Background(), RestoreTarget{InFlight: 10000}, ln.Addr().String(), &p)
	if err != nil {
		t.Fatal(err)
	}
	c := f.newChunk()
	for _, k := range []string{"a", "b", "c"} {
		c.set(&rdb.Entry{Key: []byte(k), Type: rdb.TypeString}, []byte("v"))
	}
	if err := f.send(c); err != nil {
		t.Fatal(err)
	}
	if err := f.close(); err != nil {
		t.Fatalf("every reply came within replyTimeout of the read that waited for it: %v", err)
	}
	if got := p.Keys.Load(); got != 3 {
		t.Fatalf("%d keys acknowledged, want 3", got)
	}
}
