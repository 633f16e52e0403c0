package backup

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// StoreTokenEnv is the environment variable that gives the store server the SHA-256 (hex)
// of its token: every request but /healthz must carry the token itself as
// "Authorization: Bearer TOKEN". The pod's spec holds only the digest, which lets no one
// in; the token stays in the operator's memory (no Secret is written for it).
const StoreTokenEnv = "BACKUP_STORE_TOKEN_SHA256"

// StorePort is the port the store server listens on in its pod.
const StorePort = 8080

// storeStatus is the HTTP status of a Store's error (Remote reads them back).
func storeStatus(err error) int {
	switch {
	case errors.Is(err, ErrVolumeFull):
		return http.StatusInsufficientStorage
	case errors.Is(err, ErrObjectMissing):
		return http.StatusNotFound
	case errors.Is(err, errBadName):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// TokenDigest is the hex SHA-256 of a store token, what a store pod is given.
func TokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// StoreHandler serves store over HTTP to the holders of the token whose TokenDigest is
// digest, for Remote:
// PUT, GET and DELETE /objects/KEY, GET /objects?prefix=P (a JSON list), and
// GET /healthz (no token) for the pod's readiness probe. Each request is logged.
func StoreHandler(store Store, digest string, logger *log.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("PUT /objects/{key...}", func(w http.ResponseWriter, r *http.Request) {
		up, err := store.Put(r.Context(), r.PathValue("key"), r.Body, nil)
		reply(w, up, err)
	})
	mux.HandleFunc("GET /objects/{key...}", func(w http.ResponseWriter, r *http.Request) {
		f, err := store.Get(r.Context(), r.PathValue("key"))
		if err != nil {
			http.Error(w, err.Error(), storeStatus(err))
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.Copy(w, f)
	})
	mux.HandleFunc("DELETE /objects/{key...}", func(w http.ResponseWriter, r *http.Request) {
		reply(w, struct{}{}, store.Delete(r.Context(), r.PathValue("key")))
	})
	mux.HandleFunc("GET /objects", func(w http.ResponseWriter, r *http.Request) {
		names, err := store.List(r.Context(), r.URL.Query().Get("prefix"))
		reply(w, names, err)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start, rec := time.Now(), &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		probe := r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead)
		if !probe && !tokenMatches(r, digest) {
			// A stranger's body is never read: the server would otherwise drain it before
			// answering and again before closing, with no deadline (uploads are long, so
			// the server has no read timeout), held open by a client that trickles it.
			rec.Header().Set("Connection", "close")
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			http.Error(rec, "a store token is needed", http.StatusUnauthorized)
		} else {
			mux.ServeHTTP(rec, r)
		}
		if !probe {
			logger.Printf("%s %s: %d, %v", r.Method, r.URL.RequestURI(), rec.status, time.Since(start).Round(time.Millisecond))
		}
	})
}

// tokenMatches tells whether r carries "Authorization: Bearer TOKEN" with a token whose
// SHA-256 is digest (hex). The comparison takes the same time whatever the token: both
// sides are 32-byte digests compared in constant time. A digest that is not 64 hex digits
// matches nothing.
func tokenMatches(r *http.Request, digest string) bool {
	want, err := hex.DecodeString(digest)
	given, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if err != nil || len(want) != sha256.Size || !bearer {
		return false
	}
	sum := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(sum[:], want) == 1
}

// reply writes v as JSON, or err with its status.
func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		http.Error(w, err.Error(), storeStatus(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// RunStoreServer is the manager's "backup-store" subcommand, the process of a store pod:
// it serves the directory --dir (where the PersistentVolumeClaim is mounted) over HTTPS
// on --listen until SIGTERM, with the key pair --tls-cert and --tls-key (the certificate
// $BACKUP_STORE_CERT_SHA256 is the digest of), to the holders of the token
// $BACKUP_STORE_TOKEN_SHA256 is the digest of.
func RunStoreServer(args []string) error {
	srv, dir, err := storeServer(args)
	if err != nil {
		return err
	}
	logger := srv.ErrorLog
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	logger.Printf("serving %s on %s (HTTPS)", dir, srv.Addr)
	if err := srv.ListenAndServeTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// storeServer is the store pod's server as args and the environment configure it, and the
// directory it serves; an error for anything that would let it serve other than the pod
// was made for (no token digest, another certificate).
func storeServer(args []string) (*http.Server, string, error) {
	fs := flag.NewFlagSet("backup-store", flag.ContinueOnError)
	dir := fs.String("dir", "/backup", "Directory the backups' objects are written under (the volume's mount).")
	listen := fs.String("listen", fmt.Sprintf(":%d", StorePort), "Address to serve on.")
	certFile := fs.String("tls-cert", "/tls/tls.crt", "The pod's certificate (PEM), whose SHA-256 is $"+StoreCertEnv+".")
	keyFile := fs.String("tls-key", "/tls/tls.key", "The certificate's private key (PEM).")
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	digest := os.Getenv(StoreTokenEnv)
	if raw, err := hex.DecodeString(digest); err != nil || len(raw) != sha256.Size {
		return nil, "", fmt.Errorf("$%s is not a SHA-256 digest: the store would serve anyone", StoreTokenEnv)
	}
	if st, err := os.Stat(*dir); err != nil || !st.IsDir() {
		return nil, "", fmt.Errorf("--dir %s: not a directory (%v)", *dir, err)
	}
	tlsConf, err := storeTLS(*certFile, *keyFile, os.Getenv(StoreCertEnv))
	if err != nil {
		return nil, "", err
	}
	logger := log.New(os.Stderr, "", log.LstdFlags|log.LUTC)
	return &http.Server{Addr: *listen, Handler: StoreHandler(Dir{Root: *dir}, digest, logger), TLSConfig: tlsConf, ErrorLog: logger,
		ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}, *dir, nil
}
