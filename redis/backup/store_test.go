package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// remoteDir serves a fresh directory as a store pod does, and returns a client of it.
func remoteDir(t *testing.T) (*Remote, string) {
	root := t.TempDir()
	return serveDir(t, root), root
}

// serveDir serves the directory root as a store pod does (HTTPS with a key pair of its
// own), and returns a client of it.
func serveDir(t *testing.T, root string) *Remote {
	id := storeIdentity(t)
	pair, err := tls.X509KeyPair(id.CertPEM, id.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(StoreHandler(Dir{Root: root}, TokenDigest(id.Token), log.New(io.Discard, "", 0)))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}
	srv.EnableHTTP2 = true // as a store pod's server, which negotiates h2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return &Remote{URL: srv.URL, Token: id.Token, Cert: id.CertPEM, Claim: "PersistentVolumeClaim test"}
}

func storeIdentity(t *testing.T) StoreIdentity {
	id, err := NewStoreIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestDirStoreThroughItsPodGivesWhatS3Gives writes the same object to a bucket of a real
// S3 server and to a directory through the store pod's HTTP server: the same size and
// SHA-256, the file under the same name, read back whole and verified; listing,
// deleting and a missing object behave as the bucket's.
func TestDirStoreThroughItsPodGivesWhatS3Gives(t *testing.T) {
	ctx := context.Background()
	s3srv := redistest.StartS3(t, "127.0.0.1")
	s3 := &S3{Endpoint: s3srv.Endpoint, AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, PartSize: 5 << 20}
	if err := s3.CreateBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	remote, root := remoteDir(t)
	data := make([]byte, 12<<20+123)
	rand.Read(data)
	const key = "prefix/ns/nightly/shard-0.rdb"
	var stores = map[string]Store{"s3": Bucket{S3: s3, Name: "backups"}, "pvc": remote}
	var ups []Uploaded
	for name, st := range stores {
		var progressed int64
		up, err := st.Put(ctx, key, bytes.NewReader(data), func(n int64) { progressed += n })
		if err != nil || up.Size != int64(len(data)) || progressed != up.Size {
			t.Fatalf("%s: put %+v (progress %d): %v", name, up, progressed, err)
		}
		ups = append(ups, up)
		rc, err := st.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(VerifyingReader(rc, up.SHA256))
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: read back %d bytes: %v", name, len(got), err)
		}
		for _, other := range []string{"prefix/ns/nightly-2/shard-0.rdb", "prefix/ns/nightly/manifest.json"} {
			if err := st.PutSmall(ctx, other, []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
		if names, err := st.List(ctx, "prefix/ns/nightly/"); err != nil || !slices.Equal(names, []string{"prefix/ns/nightly/manifest.json", key}) {
			t.Fatalf("%s: list of prefix/ns/nightly/: %q, %v", name, names, err)
		}
		if names, err := st.List(ctx, "prefix/ns/nightly"); err != nil || len(names) != 3 {
			t.Fatalf("%s: list of prefix/ns/nightly: %q, %v", name, names, err)
		}
		if names, err := st.List(ctx, "elsewhere/"); err != nil || len(names) != 0 {
			t.Fatalf("%s: list of elsewhere/: %q, %v", name, names, err)
		}
		for _, k := range []string{key, key} { // twice: a missing object is no error
			if err := st.Delete(ctx, k); err != nil {
				t.Fatalf("%s: delete: %v", name, err)
			}
		}
		_, err = st.Get(ctx, key)
		var e *S3Error
		if !errors.Is(err, ErrObjectMissing) && !(errors.As(err, &e) && e.Status == 404) {
			t.Fatalf("%s: deleted object: %v", name, err)
		}
	}
	if ups[0] != ups[1] {
		t.Fatalf("S3 and the volume disagree on the same bytes: %+v, %+v", ups[0], ups[1])
	}
	if _, err := os.Stat(filepath.Join(root, "prefix/ns/nightly/manifest.json")); err != nil {
		t.Fatalf("the volume does not hold the object under its name: %v", err)
	}
}

// TestStorePodRefusesWithoutToken: a request without the token, or with another, is
// refused; a name leaving the directory is refused.
func TestStorePodRefusesWithoutToken(t *testing.T) {
	ctx := context.Background()
	remote, root := remoteDir(t)
	var se *StoreError
	for _, token := range []string{"guess", ""} {
		wrong := &Remote{URL: remote.URL, Token: token, Cert: remote.Cert, Claim: remote.Claim}
		if _, err := wrong.List(ctx, ""); !errors.As(err, &se) || se.Status != http.StatusUnauthorized {
			t.Fatalf("token %q: %v", token, err)
		}
	}
	// The server's mux redirects the unclean path, which the client does not follow.
	if _, err := remote.Put(ctx, "../escape", bytes.NewReader([]byte("x")), nil); err == nil {
		t.Fatal("a name outside the directory was written")
	}
	if _, err := os.Stat(filepath.Join(root, "..", "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("written outside the directory: %v", err)
	}
}

// TestStorePodIsTrustedByItsCertificateAlone: the operator's client of a store pod trusts
// the certificate it made for that pod and no other: a pod serving another key pair (as
// one on the pod's address would) gets no request, so neither the token nor a byte; a
// client without the certificate, or with a URL that is not https, sends nothing at all.
// The store server starts only with the certificate its pod was made for, and a token
// digest.
func TestStorePodIsTrustedByItsCertificateAlone(t *testing.T) {
	ctx := context.Background()
	remote, _ := remoteDir(t)
	other := storeIdentity(t)
	var plainRequests atomic.Int32
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { plainRequests.Add(1) }))
	t.Cleanup(plain.Close)
	for name, c := range map[string]struct {
		remote *Remote
		want   string
	}{
		"another pod's certificate": {&Remote{URL: remote.URL, Token: remote.Token, Cert: other.CertPEM, Claim: remote.Claim}, "certificate"},
		"no certificate":            {&Remote{URL: remote.URL, Token: remote.Token, Claim: remote.Claim}, "no certificate of the store pod"},
		"plain HTTP":                {&Remote{URL: plain.URL, Token: remote.Token, Cert: remote.Cert, Claim: remote.Claim}, "is not https"},
	} {
		if _, err := c.remote.List(ctx, ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: got %v, want a refusal %q", name, err, c.want)
		}
	}
	if n := plainRequests.Load(); n != 0 {
		t.Fatalf("%d requests sent in clear", n)
	}
	if _, err := remote.List(ctx, ""); err != nil {
		t.Fatalf("the pinned certificate: %v", err)
	}

	dir, own := t.TempDir(), storeIdentity(t)
	for name, b := range map[string][]byte{"tls.crt": own.CertPEM, "tls.key": own.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--dir", dir, "--tls-cert", filepath.Join(dir, "tls.crt"), "--tls-key", filepath.Join(dir, "tls.key")}
	for _, c := range []struct{ token, cert, refusal string }{
		{TokenDigest(own.Token), CertDigest(own.CertPEM), ""},
		{TokenDigest(own.Token), CertDigest(other.CertPEM), StoreCertEnv},
		{TokenDigest(own.Token), "", StoreCertEnv},
		{"", CertDigest(own.CertPEM), StoreTokenEnv},
	} {
		t.Setenv(StoreTokenEnv, c.token)
		t.Setenv(StoreCertEnv, c.cert)
		srv, _, err := storeServer(args)
		switch {
		case c.refusal == "" && (err != nil || srv.TLSConfig == nil || len(srv.TLSConfig.Certificates) != 1):
			t.Fatalf("the pod's own certificate: %v", err)
		case c.refusal != "" && (err == nil || !strings.Contains(err.Error(), c.refusal)):
			t.Fatalf("token digest %q, certificate digest %q: want a refusal naming %s, got %v", c.token, c.cert, c.refusal, err)
		}
	}
}
