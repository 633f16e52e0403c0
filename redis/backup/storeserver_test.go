package backup

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawRequest sends req as written (no client rewrites its path) to the server at addr
// and returns the answer's status line and everything the server sent until it closed the
// connection or stopped for a second.
func rawRequest(t *testing.T, addr, req string) (string, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	all, _ := io.ReadAll(c) // until EOF, or the deadline
	status, _, _ := strings.Cut(string(all), "\r\n")
	return status, string(all)
}

// TestStorePodClosesOnAStrangerWithoutReadingItsBody: a request without the token that
// announces a body and sends part of it is answered 401 at once and its connection
// closed: the server does not wait for a stranger's body (it would hold the connection
// as long as the stranger trickles it).
func TestStorePodClosesOnAStrangerWithoutReadingItsBody(t *testing.T) {
	srv := httptest.NewServer(StoreHandler(Dir{Root: t.TempDir()}, TokenDigest("s3cret"), log.New(io.Discard, "", 0)))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, req := range []string{
		"PUT /objects/p/x.rdb HTTP/1.1\r\nHost: s\r\nContent-Length: 100000\r\n\r\npartial",
		"PUT /objects/p/x.rdb HTTP/1.1\r\nHost: s\r\nTransfer-Encoding: chunked\r\n\r\n10\r\npartial",
	} {
		start := time.Now()
		status, all := rawRequest(t, addr, req)
		if status != "HTTP/1.1 401 Unauthorized" || !strings.Contains(all, "Connection: close") {
			t.Fatalf("a stranger's upload: %q (after %v)", all, time.Since(start))
		}
		if waited := time.Since(start); waited > 900*time.Millisecond {
			t.Fatalf("the connection stayed open %v after the refusal", waited)
		}
	}
}

// TestStorePodOpensOnlyTheProbeWithoutToken: without the token only GET /healthz is
// answered; any other method on it, a digest that is no SHA-256 (an empty token, too) and
// a key that leaves the directory once unescaped are refused.
func TestStorePodOpensOnlyTheProbeWithoutToken(t *testing.T) {
	root := t.TempDir()
	srv := httptest.NewServer(StoreHandler(Dir{Root: root}, TokenDigest("s3cret"), log.New(io.Discard, "", 0)))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	for req, want := range map[string]string{
		"GET /healthz HTTP/1.1\r\nHost: s\r\nConnection: close\r\n\r\n":                                                                            "HTTP/1.1 200 OK",
		"PUT /healthz HTTP/1.1\r\nHost: s\r\nConnection: close\r\nContent-Length: 0\r\n\r\n":                                                       "HTTP/1.1 401 Unauthorized",
		"DELETE /healthz HTTP/1.1\r\nHost: s\r\nConnection: close\r\n\r\n":                                                                         "HTTP/1.1 401 Unauthorized",
		"GET /objects HTTP/1.1\r\nHost: s\r\nConnection: close\r\nAuthorization: Bearer \r\n\r\n":                                                  "HTTP/1.1 401 Unauthorized",
		"GET /objects HTTP/1.1\r\nHost: s\r\nConnection: close\r\nAuthorization: s3cret\r\n\r\n":                                                   "HTTP/1.1 401 Unauthorized",
		"GET /objects HTTP/1.1\r\nHost: s\r\nConnection: close\r\nAuthorization: Bearer s3cret\r\n\r\n":                                            "HTTP/1.1 200 OK",
		"GET /objects?prefix=..%2F HTTP/1.1\r\nHost: s\r\nConnection: close\r\nAuthorization: Bearer s3cret\r\n\r\n":                               "HTTP/1.1 400 Bad Request",
		"PUT /objects/a%2F..%2F..%2Fescape HTTP/1.1\r\nHost: s\r\nConnection: close\r\nAuthorization: Bearer s3cret\r\nContent-Length: 1\r\n\r\nx": "HTTP/1.1 400 Bad Request",
		"GET /objects/%2E%2E/escape HTTP/1.1\r\nHost: s\r\nConnection: close\r\nAuthorization: Bearer s3cret\r\n\r\n":                              "HTTP/1.1 400 Bad Request",
	} {
		if status, all := rawRequest(t, addr, req); status != want {
			t.Errorf("%q: %q, want %s", req, all, want)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "escape")); err == nil {
		t.Fatal("written outside the directory")
	}
	for _, digest := range []string{"", "not hex", strings.Repeat("0", 63)} {
		h := StoreHandler(Dir{Root: root}, digest, log.New(io.Discard, "", 0))
		for _, token := range []string{"", "x"} {
			req := httptest.NewRequest(http.MethodGet, "/objects", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			rec := httptest.NewRecorder()
			if h.ServeHTTP(rec, req); rec.Code != http.StatusUnauthorized {
				t.Errorf("digest %q, token %q: %d", digest, token, rec.Code)
			}
		}
	}
}
