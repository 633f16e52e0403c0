package backup

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// masterFeed is the one connection to a master that every source's keys for it go
// through, as redis-cli --pipe feeds one master: a writer goroutine sends the chunks the
// sources queue, a reader goroutine takes the replies meanwhile, chunk by chunk in the
// order they were sent. A source only waits when its master's queue is full, never for
// another master: with a connection per source and master, a source whose write to one
// busy master blocked left the other masters without its keys meanwhile.
type masterFeed struct {
	cn *conn
	// queue are the chunks the sources handed over, queued their bytes (at most
	// feedBytes unless the queue holds a single chunk); pending the chunks sent whose
	// replies are not read yet (at most about InFlight keys); free the chunks done with.
	queue   chan *chunk
	mu      sync.Mutex
	room    *sync.Cond
	queued  int
	pending chan *chunk
	free    chan *chunk
	bufs    chan []byte   // sent chunks' buffers, for new chunks
	done    chan struct{} // closed when the reader is done
	p       *Progress
	// failed is set, after err, at the first error reply, read or write failure.
	failed atomic.Bool
	err    error
}

// feedBytes bounds what a master's queue holds: what waits for a busy master (2 MB, some
// 18,000 keys of 64 bytes, 30 ms or more of a master's work), per master since the
// operator restores into clusters of any size.
const feedBytes = 2 << 20

// replyTimeout bounds each wait for a master's replies on the socket (a RESTORE of a big
// key takes a while) and each write.
var replyTimeout = time.Minute // a variable for tests

func openFeed(ctx context.Context, t RestoreTarget, addr string, p *Progress) (*masterFeed, error) {
	cn, err := t.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if cn.r.Buffered() == 0 { // the handshake's replies are all read
		// Every read of the socket waits replyTimeout at most, wherever a reply stops
		// in the buffer.
		cn.r = bufio.NewReaderSize(waitBounded{cn.c}, 1<<20)
	}
	// At most InFlight keys unanswered: the chunks sent and queued for the reader, and the
	// one it reads.
	inflight := max(1, t.InFlight/chunkKeys-1)
	f := &masterFeed{cn: cn, queue: make(chan *chunk, 1024), pending: make(chan *chunk, inflight),
		free: make(chan *chunk, 64), bufs: make(chan []byte, 16), done: make(chan struct{}), p: p}
	f.room = sync.NewCond(&f.mu)
	go f.write()
	go f.read()
	go func() {
		select {
		case <-ctx.Done():
			cn.Close() // unblocks both sides
		case <-f.done:
		}
	}()
	return f, nil
}

// waitBounded reads a connection with a fresh deadline for each read of the socket: a
// reply split across reads waits replyTimeout at most for each part, not for the sum.
type waitBounded struct{ c net.Conn }

func (w waitBounded) Read(p []byte) (int, error) {
	_ = w.c.SetReadDeadline(time.Now().Add(replyTimeout))
	return w.c.Read(p)
}

// newChunk is an empty chunk, a recycled one when there is.
func (f *masterFeed) newChunk() *chunk {
	c := &chunk{}
	select {
	case c = <-f.free:
	default:
	}
	select {
	case c.buf = <-f.bufs:
	default:
		if c.buf == nil {
			c.buf = make([]byte, 0, chunkBytes/4)
		}
	}
	c.reset()
	return c
}

// send queues c, waiting while the queue is full; it fails once the feed failed.
func (f *masterFeed) send(c *chunk) error {
	n := c.size()
	f.mu.Lock()
	for f.queued > 0 && f.queued+n > feedBytes && !f.failed.Load() {
		f.room.Wait()
	}
	f.queued += n
	f.mu.Unlock()
	if f.failed.Load() {
		return f.err
	}
	f.queue <- c
	return nil
}

// write sends the queued chunks, in order, and hands each to the reader.
func (f *masterFeed) write() {
	defer close(f.pending)
	for c := range f.queue {
		n := c.size()
		if !f.failed.Load() {
			_ = f.cn.c.SetWriteDeadline(time.Now().Add(replyTimeout))
			var err error
			if c.big == nil {
				_, err = f.cn.c.Write(c.buf)
			} else {
				bufs := net.Buffers{c.buf, c.big, c.after}
				_, err = bufs.WriteTo(f.cn.c)
			}
			if err != nil {
				f.fail(fmt.Errorf("RESTORE on %s: %w", f.cn.addr, err))
			}
		}
		// Once sent, only the keys wait for their replies: the buffer goes to a new chunk,
		// a big value is let go.
		select {
		case f.bufs <- c.buf[:0]:
		default:
		}
		c.buf, c.big, c.after = nil, nil, nil
		f.mu.Lock()
		f.queued -= n
		f.room.Broadcast()
		f.mu.Unlock()
		if f.failed.Load() {
			f.recycle(c)
			continue
		}
		f.pending <- c
	}
}

func (f *masterFeed) recycle(c *chunk) {
	select {
	case f.free <- c:
	default:
	}
}

// read takes the replies in order; after the first error reply or read failure it only
// drains pending so the writer never blocks.
func (f *masterFeed) read() {
	defer close(f.done)
	for c := range f.pending {
		if !f.failed.Load() {
			// The keys a master acknowledged count, also those before a refused one.
			ok := f.answers(c)
			var bytes int64
			for _, n := range c.bytes[:ok] {
				bytes += int64(n)
			}
			f.p.Keys.Add(int64(ok))
			f.p.Bytes.Add(bytes)
		}
		f.recycle(c)
	}
}

// answers reads a reply for each command of c, and returns how many keys were
// acknowledged before the first failure (an MSET's keys are acknowledged together).
func (f *masterFeed) answers(c *chunk) int {
	acked := 0
	for _, n := range c.cmds {
		line, err := f.cn.r.ReadSlice('\n')
		switch {
		case err != nil:
			f.fail(fmt.Errorf("restoring %s on %s: failed to read a reply from %s: %w", c.command(acked, n), f.cn.addr, f.cn.addr, err))
		case line[0] == '-' && refusedPayload(string(line)):
			f.fail(fmt.Errorf("%w: restoring %s on %s: %s", ErrIncompatible, c.command(acked, n), f.cn.addr, bytes.TrimRight(line[1:], "\r\n")))
		case line[0] == '-':
			f.fail(fmt.Errorf("restoring %s on %s: %s", c.command(acked, n), f.cn.addr, bytes.TrimRight(line[1:], "\r\n")))
		default:
			acked += n
			continue
		}
		return acked
	}
	return acked
}

// fail records the feed's first failure and closes the connection: the other side's
// next read or write fails at once, and senders waiting for room are woken.
func (f *masterFeed) fail(err error) {
	f.mu.Lock()
	if !f.failed.Load() {
		f.err = err
		f.failed.Store(true)
	}
	f.room.Broadcast()
	f.mu.Unlock()
	f.cn.Close()
}

// close waits for every queued chunk to be sent and answered (no source sends any more)
// and closes the connection; it returns the first failure.
func (f *masterFeed) close() error {
	close(f.queue)
	<-f.done
	f.cn.Close()
	if f.failed.Load() {
		return f.err
	}
	return nil
}
