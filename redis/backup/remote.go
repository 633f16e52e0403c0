package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Remote is a Store served by a store pod (StoreHandler over a Dir on the pod's volume):
// the operator's side of a PersistentVolumeClaim destination. Put streams the object and
// checks that the pod wrote the bytes it sent (size and SHA-256 computed on both sides).
type Remote struct {
	// URL is the store pod's base URL, https://POD-IP:8080.
	URL   string
	Token string
	// Cert is the store pod's certificate (PEM), the only one trusted (storetls.go): a
	// Remote without one, or with a URL that is not https, sends nothing.
	Cert []byte
	// Claim names the volume in errors ("PersistentVolumeClaim backups").
	Claim  string
	once   sync.Once
	client *http.Client
	tlsErr error
}

// StoreError is an error answer of a store pod.
type StoreError struct {
	Status  int
	Message string
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("store pod %d: %s", e.Status, strings.TrimSpace(e.Message))
}

// Unwrap gives the Store error the status stands for (ErrVolumeFull, ErrObjectMissing).
func (e *StoreError) Unwrap() error {
	switch e.Status {
	case http.StatusInsufficientStorage:
		return ErrVolumeFull
	case http.StatusNotFound:
		return ErrObjectMissing
	}
	return nil
}

// http is the client every request goes through, built once: the shards' uploads share
// one Remote from as many goroutines. A redirect is never followed (the token would go
// with it).
func (s *Remote) http() (*http.Client, error) {
	s.once.Do(func() {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if u, err := url.Parse(s.URL); err != nil || u.Scheme != "https" {
			s.tlsErr = fmt.Errorf("the store pod's URL %q is not https: the token and the data would cross the network in clear", s.URL)
		} else {
			tr.TLSClientConfig, s.tlsErr = pinnedTLS(s.Cert)
		}
		tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		tr.ResponseHeaderTimeout = time.Minute
		s.client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
	})
	return s.client, s.tlsErr
}

// call sends one request and returns the response of a 2xx answer; the caller closes it.
func (s *Remote) call(ctx context.Context, method, rawPath string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(s.URL, "/")+rawPath, body)
	if err != nil {
		return nil, err
	}
	hc, err := s.http()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Claim, err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Claim, err)
	}
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %w", s.Claim, &StoreError{Status: resp.StatusCode, Message: string(msg)})
	}
	return resp, nil
}

func objectPath(key string) string { return "/objects/" + (&url.URL{Path: key}).EscapedPath() }

// Put streams r to the store pod, which writes it to its volume.
func (s *Remote) Put(ctx context.Context, key string, r io.Reader, progress func(n int64)) (Uploaded, error) {
	var sent digest
	body := io.TeeReader(&counting{ctx: ctx, r: r, progress: progress}, &sent)
	resp, err := s.call(ctx, http.MethodPut, objectPath(key), io.NopCloser(body))
	if err != nil {
		return Uploaded{}, err
	}
	defer resp.Body.Close()
	var wrote Uploaded
	if err := json.NewDecoder(resp.Body).Decode(&wrote); err != nil {
		return Uploaded{}, fmt.Errorf("%s: the answer to writing %s: %w", s.Claim, key, err)
	}
	if want := sent.uploaded(); wrote != want {
		return Uploaded{}, fmt.Errorf("%s: %w: %s sent %d bytes with SHA-256 %s, the store pod wrote %d with %s",
			s.Claim, ErrChecksum, key, want.Size, want.SHA256, wrote.Size, wrote.SHA256)
	}
	return wrote, nil
}

// PutSmall writes body as the object key.
func (s *Remote) PutSmall(ctx context.Context, key string, body []byte) error {
	_, err := s.Put(ctx, key, strings.NewReader(string(body)), nil)
	return err
}

// Get opens the object key; as S3.Get, a read that waits getIdle for a byte fails.
func (s *Remote) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	resp, err := s.call(ctx, http.MethodGet, objectPath(key), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	return &idleBody{r: resp.Body, cancel: cancel, idle: time.AfterFunc(getIdle, cancel)}, nil
}

// Delete removes the object key; a missing one is no error.
func (s *Remote) Delete(ctx context.Context, key string) error {
	resp, err := s.call(ctx, http.MethodDelete, objectPath(key), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// List returns the objects under prefix.
func (s *Remote) List(ctx context.Context, prefix string) ([]string, error) {
	resp, err := s.call(ctx, http.MethodGet, "/objects?"+url.Values{"prefix": {prefix}}.Encode(), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var names []string
	if err := json.NewDecoder(resp.Body).Decode(&names); err != nil {
		return nil, fmt.Errorf("%s: listing %s: %w", s.Claim, prefix, err)
	}
	return names, nil
}
