package backup

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Put uploads r as the object key with a multipart upload (parts from PartSize, several
// sent at once, see sendParts), and returns its size and SHA-256. A failure aborts the upload: no partial object is left.
func (s *S3) Put(ctx context.Context, bucket, key string, r io.Reader, progress func(n int64)) (Uploaded, error) {
	u, err := s.startUpload(ctx, bucket, key)
	if err != nil {
		return Uploaded{}, err
	}
	var whole digest
	parts, err := u.sendParts(ctx, r, &whole, progress)
	if err == nil {
		err = u.complete(ctx, parts)
	}
	if err != nil {
		return Uploaded{}, err
	}
	return whole.uploaded(), nil
}

// multipart is one multipart upload under way.
type multipart struct {
	s3          *S3
	bucket, key string
	id          string
}

// part is a part uploaded, as CompleteMultipartUpload names it.
type part struct {
	Number int    `xml:"PartNumber"`
	ETag   string `xml:"ETag"`
}

// startUpload begins a multipart upload of key (CreateMultipartUpload).
func (s *S3) startUpload(ctx context.Context, bucket, key string) (*multipart, error) {
	resp, err := s.do(ctx, http.MethodPost, bucket, key, url.Values{"uploads": {""}}, nil)
	if err != nil {
		return nil, err
	}
	var init struct {
		UploadID string `xml:"UploadId"`
	}
	err = xml.NewDecoder(resp.Body).Decode(&init)
	resp.Body.Close()
	if err != nil || init.UploadID == "" {
		return nil, fmt.Errorf("S3 multipart upload of %s: no upload ID (%v)", key, err)
	}
	return &multipart{s3: s, bucket: bucket, key: key, id: init.UploadID}, nil
}

// abort drops the upload's parts (AbortMultipartUpload), even when ctx is done.
func (u *multipart) abort(ctx context.Context) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if resp, err := u.s3.do(actx, http.MethodDelete, u.bucket, u.key, url.Values{"uploadId": {u.id}}, nil); err == nil {
		resp.Body.Close()
	}
}

// sendParts uploads r in parts (sizes by partSizeAt), reading the next part while up to
// PartsInFlight earlier ones are sent, so the source (a master's fork writing into its
// socket) is not left waiting on the store. whole gets the bytes in order. A failure (a
// read, a part, ctx) aborts the upload: no part is left behind.
func (u *multipart) sendParts(ctx context.Context, r io.Reader, whole *digest, progress func(n int64)) ([]part, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	inFlight := u.s3.PartsInFlight
	if inFlight <= 0 {
		inFlight = 2
	}
	f := &flight{slots: make(chan struct{}, inFlight), progress: progress, cancel: cancel}
	err := u.readParts(ctx, r, whole, f)
	if err != nil {
		cancel(err)
	}
	f.sending.Wait()
	if err == nil {
		err = f.err
	}
	if err != nil {
		u.abort(ctx)
		return nil, err
	}
	slices.SortFunc(f.parts, func(a, b part) int { return a.Number - b.Number })
	return f.parts, nil
}

// readParts reads r part by part into buffers of the pool, and starts sending each.
func (u *multipart) readParts(ctx context.Context, r io.Reader, whole *digest, f *flight) error {
	pool := u.s3.parts
	if pool == nil {
		pool = uploadBuffers
	}
	base := u.s3.PartSize
	if base == 0 {
		base = partBufferSize
	}
	for n := 1; ; n++ {
		if ctx.Err() != nil { // a part failed, or the caller gave up: read no more
			return context.Cause(ctx)
		}
		select { // a slot first: a part waiting for one holds no buffer
		case f.slots <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		want := partSizeAt(n, base, pool.capacity())
		bufs, err := pool.acquire(ctx, want)
		if err != nil {
			<-f.slots
			return err
		}
		chunks, size, end, err := readPart(r, bufs, want)
		if err == nil && size > 0 && n > maxParts {
			err = fmt.Errorf("larger than an upload holds (%d bytes in S3's %d parts)", maxObjectSize(base, pool.capacity()), maxParts)
		}
		if err != nil || (size == 0 && n > 1) {
			pool.release(bufs)
			<-f.slots
			if err != nil {
				return fmt.Errorf("reading %s: %w", u.key, err)
			}
			return nil
		}
		for _, c := range chunks {
			whole.Write(c)
		}
		f.sending.Add(1)
		go u.sendPart(ctx, f, pool, n, bufs, chunks, size)
		if end {
			return nil
		}
	}
}

// readPart reads up to size bytes of r into bufs: the chunks read, their size, and whether
// r ended.
func readPart(r io.Reader, bufs [][]byte, size int) ([][]byte, int, bool, error) {
	var chunks [][]byte
	got := 0
	for _, b := range bufs {
		want := min(len(b), size-got)
		if want == 0 {
			break
		}
		n, err := io.ReadFull(r, b[:want])
		chunks = append(chunks, b[:n])
		got += n
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return chunks, got, true, nil
		}
		if err != nil {
			return nil, 0, false, err
		}
	}
	return chunks, got, false, nil
}

// flight is the parts of one upload being sent.
type flight struct {
	slots    chan struct{} // one per part being read or sent (PartsInFlight)
	sending  sync.WaitGroup
	mu       sync.Mutex // guards parts, err, progress calls
	parts    []part
	err      error
	progress func(n int64)
	cancel   context.CancelCauseFunc
}

// sendPart sends part n (UploadPart) and gives its buffers and slot back.
func (u *multipart) sendPart(ctx context.Context, f *flight, pool *partPool, n int, bufs, chunks [][]byte, size int) {
	defer f.sending.Done()
	defer func() { pool.release(bufs); <-f.slots }()
	q := url.Values{"partNumber": {strconv.Itoa(n)}, "uploadId": {u.id}}
	resp, err := u.s3.sendChunks(ctx, u.s3.http(), http.MethodPut, u.bucket, u.key, q, chunks)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		if f.err == nil {
			f.err = err
			f.cancel(err) // the reader and the other parts stop
		}
		return
	}
	resp.Body.Close()
	f.parts = append(f.parts, part{Number: n, ETag: resp.Header.Get("ETag")})
	if f.progress != nil { // under mu: a caller's callback need not be safe for concurrent use
		f.progress(int64(size))
	}
}

// complete makes the parts the object (CompleteMultipartUpload).
func (u *multipart) complete(ctx context.Context, parts []part) error {
	body, _ := xml.Marshal(struct {
		XMLName xml.Name `xml:"CompleteMultipartUpload"`
		Parts   []part   `xml:"Part"`
	}{Parts: parts})
	resp, err := u.s3.do(ctx, http.MethodPost, u.bucket, u.key, url.Values{"uploadId": {u.id}}, body)
	if err != nil {
		u.abort(ctx)
		return err
	}
	// A 200 may still carry an error (S3's CompleteMultipartUpload).
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.Contains(b, []byte("<Error>")) {
		e := &S3Error{Status: 200}
		_ = xml.Unmarshal(b, e)
		return e
	}
	return nil
}
