package backup

import (
	"context"
	"sync"
)

// The operator's memory for uploads: every multipart upload of the process reads its parts
// into buffers of one pool, so the memory a backup takes does not grow with the masters it
// streams. The operator's container has 256 MiB (and GOMEMLIMIT set to it): 8 buffers of
// 8 MiB (64 MiB) leave the rest to its caches, and still keep 4 masters' uploads at 2 parts
// in flight each; more masters share the buffers and wait their turn.
const (
	partBuffers    = 8
	partBufferSize = 8 << 20
)

// uploadBuffers is the process's pool (allocated buffer by buffer, on first use).
var uploadBuffers = newPartPool(partBuffers, partBufferSize)

// S3's rules for a multipart upload.
const (
	minPartSize = 5 << 20 // every part but the last
	maxParts    = 10000
	// partsPerSize is how many parts are sent at one size before the size doubles.
	partsPerSize = 500
)

// partSizeAt is the size of part n (from 1) of an upload whose parts start at base bytes
// and may not exceed most: the object's size is not known when it starts (a snapshot
// streamed), so small objects get small parts (which pipeline) and a large one doubles its
// parts every partsPerSize parts to stay within S3's 10,000 parts.
func partSizeAt(n, base, most int) int {
	size := base
	for step := (n - 1) / partsPerSize; step > 0 && size < most; step-- {
		size *= 2
	}
	return min(size, most)
}

// maxObjectSize is the most an upload with these part sizes can hold: 10,000 parts.
func maxObjectSize(base, most int) int64 {
	var total int64
	for n := 1; n <= maxParts; n++ {
		total += int64(partSizeAt(n, base, most))
	}
	return total
}

// partPool is a fixed set of equal buffers shared by uploads. A part takes all the buffers
// it needs at once (under take), and gives them back once uploaded.
//
// Why an upload always makes progress, however many compete: a part that holds buffers
// never waits for another buffer; it only reads its bytes and uploads them (both end:
// the source ends or fails, the request has a timeout) and then gives its buffers back.
// The one acquirer holding take waits only for such releases, so it gets its buffers in
// finite time, and so does every acquirer after it in turn. No part holds buffers while it
// waits for more, so no two uploads can wait on each other.
type partPool struct {
	size int
	free chan []byte // nil entries: buffers not allocated yet
	take sync.Mutex
}

func newPartPool(buffers, size int) *partPool {
	p := &partPool{size: size, free: make(chan []byte, buffers)}
	for range buffers {
		p.free <- nil
	}
	return p
}

// capacity is the most one part may take: the whole pool.
func (p *partPool) capacity() int { return cap(p.free) * p.size }

// acquire takes the buffers a part of n bytes needs (at least one), or fails when ctx is
// done first; what it had taken is then given back.
func (p *partPool) acquire(ctx context.Context, n int) ([][]byte, error) {
	want := max(1, (n+p.size-1)/p.size)
	p.take.Lock()
	defer p.take.Unlock()
	bufs := make([][]byte, 0, want)
	for len(bufs) < want {
		select {
		case b := <-p.free:
			if b == nil {
				b = make([]byte, p.size)
			}
			bufs = append(bufs, b)
		case <-ctx.Done():
			p.release(bufs)
			return nil, context.Cause(ctx)
		}
	}
	return bufs, nil
}

// release gives buffers back.
func (p *partPool) release(bufs [][]byte) {
	for _, b := range bufs {
		p.free <- b
	}
}
