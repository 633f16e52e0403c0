package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// TestPartSizeAt: the first parts are the base size (a shard of ~10 MB pipelines), none but
// the last is under S3's 5 MiB, sizes never shrink nor pass the pool, and 10,000 parts hold
// what the pool allows: over 500 GiB with the operator's pool, 1 TiB with twice its buffers.
func TestPartSizeAt(t *testing.T) {
	const mib = 1 << 20
	most := partBuffers * partBufferSize
	if got := partSizeAt(1, partBufferSize, most); got != 8*mib {
		t.Fatalf("first part %d, want 8 MiB", got)
	}
	prev := 0
	for n := 1; n <= maxParts; n++ {
		size := partSizeAt(n, partBufferSize, most)
		if size < minPartSize || size < prev || size > most || size > 5<<30 {
			t.Fatalf("part %d is %d bytes (previous %d)", n, size, prev)
		}
		prev = size
	}
	if got := partSizeAt(partsPerSize+1, 8*mib, most); got != 16*mib {
		t.Fatalf("part %d is %d, want the size doubled", partsPerSize+1, got)
	}
	if got := maxObjectSize(partBufferSize, most); got < 500<<30 {
		t.Fatalf("the operator's uploads hold at most %d bytes, want over 500 GiB", got)
	}
	if got := maxObjectSize(partBufferSize, 2*most); got < 1<<40 {
		t.Fatalf("128 MiB of buffers hold at most %d bytes, want 1 TiB", got)
	}
	if got := maxObjectSize(5*mib, 5*mib); got != 10000*5*mib {
		t.Fatalf("parts that cannot grow hold %d", got)
	}
}

// concurrentParts is a proxy before the S3 server that holds each part upload 100 ms and
// records how many were sent at once: it shows the parts of an upload overlap.
type concurrentParts struct {
	now, most atomic.Int32
}

func (c *concurrentParts) start(t *testing.T, endpoint string) string {
	target, _ := url.Parse(endpoint)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Query().Has("partNumber") {
			n := c.now.Add(1)
			defer c.now.Add(-1)
			for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
			}
			time.Sleep(100 * time.Millisecond)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestS3PutPipelined puts objects of 0 bytes, under a part, exactly a part, and several
// parts with a ragged end, through parts of 5 MiB, 2 in flight: each reads back equal, its
// size and SHA-256 those of the bytes, progress counts them all, and parts were sent two
// at once (never more).
func TestS3PutPipelined(t *testing.T) {
	srv := redistest.StartS3(t, "127.0.0.1")
	ctx := context.Background()
	var seen concurrentParts
	s3 := &S3{Endpoint: seen.start(t, srv.Endpoint), AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		PartSize: 5 << 20, PartsInFlight: 2, parts: newPartPool(4, 5<<20)}
	if err := s3.CreateBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, 1<<20 + 7, 5 << 20, 3*(5<<20) + 12345} {
		data := make([]byte, size)
		rand.Read(data)
		key := fmt.Sprintf("sizes/%d.rdb", size)
		var progressed int64
		up, err := s3.Put(ctx, "backups", key, bytes.NewReader(data), func(n int64) { progressed += n })
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		sum := sha256.Sum256(data)
		if up.Size != int64(size) || up.SHA256 != hex.EncodeToString(sum[:]) || progressed != up.Size {
			t.Fatalf("%d bytes: uploaded %+v, progress %d", size, up, progressed)
		}
		readBack(t, s3, key, data, up)
	}
	if most := seen.most.Load(); most != 2 {
		t.Fatalf("at most %d parts were sent at once, want 2", most)
	}
}

func readBack(t *testing.T, s3 *S3, key string, data []byte, up Uploaded) {
	t.Helper()
	rc, err := s3.Get(context.Background(), "backups", key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(VerifyingReader(rc, up.SHA256))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%s: read back %d bytes of %d, err %v", key, len(got), len(data), err)
	}
}

// TestS3PutMoreUploadsThanBuffers runs 6 uploads at once over a pool of 3 buffers whose
// parts each need 2 of them (PartSize 10 MiB, buffers of 5 MiB): taken one at a time,
// two uploads holding one each would wait for ever. All finish, each object whole.
func TestS3PutMoreUploadsThanBuffers(t *testing.T) {
	srv := redistest.StartS3(t, "127.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s3 := &S3{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		PartSize: 10 << 20, parts: newPartPool(3, 5<<20)}
	if err := s3.CreateBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	datas := make([][]byte, 6)
	ups := make([]Uploaded, 6)
	for i := range datas {
		datas[i] = make([]byte, 2*(10<<20)+i*(1<<20)+1)
		rand.Read(datas[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			ups[i], errs[i] = s3.Put(ctx, "backups", fmt.Sprintf("many/%d.rdb", i), bytes.NewReader(datas[i]), nil)
		}()
	}
	wg.Wait()
	for i := range datas {
		if errs[i] != nil {
			t.Fatalf("upload %d: %v", i, errs[i])
		}
		readBack(t, s3, fmt.Sprintf("many/%d.rdb", i), datas[i], ups[i])
	}
	if n := len(s3.parts.free); n != 3 {
		t.Fatalf("%d buffers back in the pool, want 3", n)
	}
}

// brokenSource gives n random bytes, then fails; after calls, if set, at the failure.
type brokenSource struct {
	n     int
	err   error
	after func()
}

func (r *brokenSource) Read(p []byte) (int, error) {
	if r.n == 0 {
		if r.after != nil {
			r.after()
			r.after = nil
			return copy(p, make([]byte, len(p))), nil // goes on: the context must stop it
		}
		return 0, r.err
	}
	p = p[:min(len(p), r.n)]
	rand.Read(p)
	r.n -= len(p)
	return len(p), nil
}

// TestS3PutAbortsOnFailure: a reader failing mid-object (after two parts were sent) and a
// context cancelled mid-object each fail the put and leave neither the object nor an
// unfinished upload with its parts.
func TestS3PutAbortsOnFailure(t *testing.T) {
	srv := redistest.StartS3(t, "127.0.0.1")
	ctx := context.Background()
	s3 := &S3{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		PartSize: 5 << 20, parts: newPartPool(3, 5<<20)}
	if err := s3.CreateBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("connection reset by the master")
	if _, err := s3.Put(ctx, "backups", "broken.rdb", &brokenSource{n: 12 << 20, err: broken}, nil); !errors.Is(err, broken) {
		t.Fatalf("a failing reader: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := s3.Put(cctx, "backups", "cancelled.rdb", &brokenSource{n: 7 << 20, err: io.EOF, after: cancel}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context: %v", err)
	}
	var e *S3Error
	for _, key := range []string{"broken.rdb", "cancelled.rdb"} {
		if _, err := s3.Get(ctx, "backups", key); !errors.As(err, &e) || e.Status != 404 {
			t.Fatalf("%s after a failed put: %v", key, err)
		}
	}
	resp, err := s3.do(ctx, http.MethodGet, "backups", "", url.Values{"uploads": {""}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "<Upload>") {
		t.Fatalf("unfinished uploads left: %s", b)
	}
	if n := len(s3.parts.free); n != 3 {
		t.Fatalf("%d buffers back in the pool, want 3", n)
	}
}
