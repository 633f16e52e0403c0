package backup

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// S3 is a client of an S3-compatible object store: the few calls a backup needs (bucket
// check, multipart upload, get, delete), path-style, signed with AWS Signature V4. It is
// the operator's own so the binary carries no SDK.
type S3 struct {
	// Endpoint is the store's base URL (http:// or https://host:port).
	Endpoint  string
	Region    string
	AccessKey string
	SecretKey string
	// TLS is used for an https endpoint (a CA of the user's); nil: the system's roots.
	TLS *tls.Config
	// PartSize is the size of the first parts uploaded (default 8 MiB; S3 wants at least
	// 5 MiB for all parts but the last); a large object's later parts grow (partSizeAt).
	PartSize int
	// PartsInFlight is how many parts of one upload may be sent at once while the next is
	// read (default 2): a store gives each connection limited bandwidth.
	PartsInFlight int
	// parts is the pool the parts are read into; nil: the process's (uploadBuffers).
	parts  *partPool
	client *http.Client
	// stream reads objects (Get): no bound on the whole exchange, which a large object
	// would outlast, but on the wait for the answer's headers and (getIdle) between reads.
	stream *http.Client
}

// getIdle is how long an object being read (Get) may send nothing before it is dropped.
const getIdle = 2 * time.Minute

func (s *S3) streaming() *http.Client {
	if s.stream == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = s.TLS
		tr.ResponseHeaderTimeout = time.Minute
		s.stream = &http.Client{Transport: tr}
	}
	return s.stream
}

func (s *S3) http() *http.Client {
	if s.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = s.TLS
		s.client = &http.Client{Transport: tr, Timeout: 5 * time.Minute}
	}
	return s.client
}

// S3Error is an error answer of the store.
type S3Error struct {
	Status  int
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func (e *S3Error) Error() string {
	return fmt.Sprintf("S3 %d %s: %s", e.Status, e.Code, e.Message)
}

// do sends one signed request; body may be nil. The caller closes the response body.
func (s *S3) do(ctx context.Context, method, bucket, key string, query url.Values, body []byte) (*http.Response, error) {
	return s.send(ctx, s.http(), method, bucket, key, query, body)
}

func (s *S3) send(ctx context.Context, hc *http.Client, method, bucket, key string, query url.Values, body []byte) (*http.Response, error) {
	var chunks [][]byte
	if body != nil {
		chunks = [][]byte{body}
	}
	return s.sendChunks(ctx, hc, method, bucket, key, query, chunks)
}

// sendChunks sends one signed request whose body is chunks in order (a part read into
// buffers of the pool); none: no body.
func (s *S3) sendChunks(ctx context.Context, hc *http.Client, method, bucket, key string, query url.Values, chunks [][]byte) (*http.Response, error) {
	u, err := url.Parse(strings.TrimRight(s.Endpoint, "/"))
	if err != nil {
		return nil, fmt.Errorf("bad S3 endpoint %q: %w", s.Endpoint, err)
	}
	path := "/" + bucket
	if key != "" {
		path += "/" + key
	}
	u.Path = path
	u.RawQuery = canonicalQuery(query)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	sum := sha256.New()
	for _, c := range chunks {
		sum.Write(c)
		req.ContentLength += int64(len(c))
	}
	if req.ContentLength > 0 { // an empty body stays none: not sent chunked
		// GetBody: the transport may send the body again (a connection closed under it).
		req.GetBody = func() (io.ReadCloser, error) { return chunksReader(chunks), nil }
		req.Body, _ = req.GetBody()
	}
	s.sign(req, hex.EncodeToString(sum.Sum(nil)), time.Now().UTC())
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("S3 %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		e := &S3Error{Status: resp.StatusCode}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = xml.Unmarshal(b, e)
		if e.Code == "" {
			e.Code = http.StatusText(resp.StatusCode)
		}
		return nil, e
	}
	return resp, nil
}

func chunksReader(chunks [][]byte) io.ReadCloser {
	rs := make([]io.Reader, len(chunks))
	for i, c := range chunks {
		rs[i] = bytes.NewReader(c)
	}
	return io.NopCloser(io.MultiReader(rs...))
}

func canonicalQuery(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		for _, v := range q[k] {
			parts = append(parts, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	return strings.Join(parts, "&")
}

// uriEncode is SigV4's URI encoding: every byte but A-Z a-z 0-9 - _ . ~ (and / when
// encodeSlash is false) as %XX.
func uriEncode(s string, encodeSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && !encodeSlash) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

func (s *S3) sign(req *http.Request, payloadHash string, now time.Time) {
	region := s.Region
	if region == "" {
		region = "us-east-1"
	}
	amzDate := now.Format("20060102T150405Z")
	day := now.Format("20060102")
	req.Header.Set("x-amz-date", amzDate)
	req.Header.Set("x-amz-content-sha256", payloadHash)
	host := req.URL.Host
	signed := []string{"host", "x-amz-content-sha256", "x-amz-date"}
	canonHeaders := "host:" + host + "\nx-amz-content-sha256:" + payloadHash + "\nx-amz-date:" + amzDate + "\n"
	canon := strings.Join([]string{req.Method, uriEncode(req.URL.Path, false), req.URL.RawQuery,
		canonHeaders, strings.Join(signed, ";"), payloadHash}, "\n")
	scope := day + "/" + region + "/s3/aws4_request"
	ch := sha256.Sum256([]byte(canon))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(ch[:])
	k := hmacSHA256([]byte("AWS4"+s.SecretKey), day)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, "s3")
	k = hmacSHA256(k, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(k, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+s.AccessKey+"/"+scope+
		", SignedHeaders="+strings.Join(signed, ";")+", Signature="+sig)
}

// HeadBucket checks the bucket exists and the credentials may use it.
func (s *S3) HeadBucket(ctx context.Context, bucket string) error {
	resp, err := s.do(ctx, http.MethodHead, bucket, "", nil, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// List returns the names of the bucket's objects that begin with prefix, in the store's
// order (by name), every page of them (ListObjectsV2).
func (s *S3) List(ctx context.Context, bucket, prefix string) ([]string, error) {
	var names []string
	token := ""
	for {
		q := url.Values{"list-type": {"2"}, "prefix": {prefix}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		resp, err := s.do(ctx, http.MethodGet, bucket, "", q, nil)
		if err != nil {
			return nil, err
		}
		var page struct {
			Contents []struct {
				Key string `xml:"Key"`
			} `xml:"Contents"`
			IsTruncated           bool   `xml:"IsTruncated"`
			NextContinuationToken string `xml:"NextContinuationToken"`
		}
		err = xml.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("S3 list of %s/%s: %w", bucket, prefix, err)
		}
		for _, c := range page.Contents {
			names = append(names, c.Key)
		}
		if !page.IsTruncated || page.NextContinuationToken == "" {
			return names, nil
		}
		token = page.NextContinuationToken
	}
}

// CreateBucket makes a bucket (tests; a backup never creates one).
func (s *S3) CreateBucket(ctx context.Context, bucket string) error {
	resp, err := s.do(ctx, http.MethodPut, bucket, "", nil, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// PutSmall uploads a small object in one request (the manifest).
func (s *S3) PutSmall(ctx context.Context, bucket, key string, body []byte) error {
	resp, err := s.do(ctx, http.MethodPut, bucket, key, nil, body)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Get opens the object key; the caller closes it. Reading it takes as long as it takes
// (a shard of many GB), but an object that sends nothing for getIdle is dropped: its
// reads then fail.
func (s *S3) Get(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	resp, err := s.send(ctx, s.streaming(), http.MethodGet, bucket, key, nil, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	return &idleBody{r: resp.Body, cancel: cancel, idle: time.AfterFunc(getIdle, cancel)}, nil
}

// idleBody cancels its request when no read returns for getIdle.
type idleBody struct {
	r      io.ReadCloser
	cancel context.CancelFunc
	idle   *time.Timer
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.idle.Reset(getIdle)
	return n, err
}

func (b *idleBody) Close() error {
	b.idle.Stop()
	b.cancel()
	return b.r.Close()
}

// Delete removes the object key; a missing one is no error.
func (s *S3) Delete(ctx context.Context, bucket, key string) error {
	resp, err := s.do(ctx, http.MethodDelete, bucket, key, nil, nil)
	var e *S3Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}
