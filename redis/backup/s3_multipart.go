package backup

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Put uploads r as the object key with a multipart upload (parts of PartSize), and
// returns its size and SHA-256. A failure aborts the upload: no partial object is left.
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

// sendParts uploads r in parts of PartSize (default 16 MiB), adding each to whole; a
// failure aborts the upload.
func (u *multipart) sendParts(ctx context.Context, r io.Reader, whole *digest, progress func(n int64)) ([]part, error) {
	partSize := u.s3.PartSize
	if partSize == 0 {
		partSize = 16 << 20
	}
	var parts []part
	buf := make([]byte, partSize)
	for n := 1; ; n++ {
		got, rerr := io.ReadFull(r, buf)
		if rerr != nil && rerr != io.ErrUnexpectedEOF && rerr != io.EOF {
			u.abort(ctx)
			return nil, fmt.Errorf("reading %s: %w", u.key, rerr)
		}
		if got == 0 && n > 1 {
			return parts, nil
		}
		whole.Write(buf[:got])
		resp, err := u.s3.do(ctx, http.MethodPut, u.bucket, u.key, url.Values{"partNumber": {strconv.Itoa(n)}, "uploadId": {u.id}}, buf[:got])
		if err != nil {
			u.abort(ctx)
			return nil, err
		}
		resp.Body.Close()
		parts = append(parts, part{Number: n, ETag: resp.Header.Get("ETag")})
		if progress != nil {
			progress(int64(got))
		}
		if rerr != nil { // the last, short part
			return parts, nil
		}
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
