package redistest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// S3Server is a running versitygw (an S3-compatible server, posix backend), built from
// its Go module by hack/devcluster/s3gw.sh: the real object store backup tests write to.
type S3Server struct {
	// Endpoint is its base URL, http://ADDR.
	Endpoint             string
	AccessKey, SecretKey string
	// Dir is the posix root: each bucket a directory, each object a file.
	Dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// repoRoot is the repository root, from this source file.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// StartS3 builds versitygw if needed, starts it on host ("127.0.0.1", or the devcluster's
// 198.18.0.1 for pods to reach) with a free port, and stops it by PID in t.Cleanup.
func StartS3(t testing.TB, host string) *S3Server {
	t.Helper()
	s, err := StartS3Server(t.TempDir(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartS3Server is StartS3 for callers without a testing.TB; Stop ends it.
func StartS3Server(dir, host string) (*S3Server, error) {
	root := repoRoot()
	build := exec.Command(filepath.Join(root, "hack", "devcluster", "s3gw.sh"))
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("failed to build versitygw: %w: %s", err, out)
	}
	data := filepath.Join(dir, "s3")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("failed to find a free port on %s: %w", host, err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	s := &S3Server{Endpoint: "http://" + addr, AccessKey: "backup-test", SecretKey: "backup-test-secret-key", Dir: data, exited: make(chan struct{})}
	logf, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(filepath.Join(root, "bin", "versitygw"), "--port", addr,
		"--access", s.AccessKey, "--secret", s.SecretKey, "posix", data)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("failed to start versitygw: %w", err)
	}
	go func() {
		_ = s.cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("versitygw exited before it answered (see %s)", logf.Name())
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("versitygw at %s did not answer: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server by its PID and waits for it.
func (s *S3Server) Stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
	<-s.exited
}

// PID is the server's process id (a benchmark reads its CPU time from /proc).
func (s *S3Server) PID() int { return s.cmd.Process.Pid }
