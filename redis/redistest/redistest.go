// Package redistest starts real cluster-enabled redis-server processes on loopback for
// tests and benchmarks, and stops them by PID.
package redistest

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// RedisServer is the binary used; tests assume Redis 7 at /usr/bin.
var RedisServer = "/usr/bin/redis-server"

// Config shapes the servers.
type Config struct {
	// Password sets requirepass and masterauth when not empty and AuthConf is empty;
	// with AuthConf it is the default user's password the servers are awaited with.
	Password string
	// AuthConf, when set, is written to auth.conf in each server's directory and
	// included, as the operator's pods include the file of their NAME-auth Secret.
	AuthConf string
	// NodeTimeout is cluster-node-timeout; 5000 ms when zero, Redis' default.
	NodeTimeout time.Duration
	// TLSDir, when set, holds tls.crt, tls.key and ca.crt (WriteTLSDir): the servers
	// listen with TLS only (port 0, tls-port), as the pods of spec.tls with
	// disablePlainPort, with tls-cluster and tls-replication; TLSClient is what the
	// tests dial them with (ClientConfig).
	TLSDir    string
	TLSClient *tls.Config
	// Args are more redis-server arguments, after the others (Redis keeps the last value
	// of a directive), e.g. "--appendonly", "yes" for servers configured as the pods are.
	Args []string
	// Server is the server binary; RedisServer when empty (ImageServer gives Valkey's).
	Server string
}

// Server is one running redis-server.
type Server struct {
	Addr string // 127.0.0.1:port; the bus is port+10000
	Dir  string
	cmd  *exec.Cmd
	// exited is closed when the process has ended (killed, or failed to bind its port).
	exited chan struct{}
}

// Start runs n servers for the test and stops them in t.Cleanup.
func Start(t testing.TB, n int, cfg Config) []*Server {
	t.Helper()
	servers, err := StartServers(t.TempDir(), n, cfg)
	t.Cleanup(func() { StopAll(servers) })
	if err != nil {
		t.Fatal(err)
	}
	return servers
}

// StartServers runs n servers with data dirs under root and waits until each answers PING.
func StartServers(root string, n int, cfg Config) ([]*Server, error) {
	var out []*Server
	for i := 0; i < n; i++ {
		s, err := startOne(filepath.Join(root, fmt.Sprintf("node-%d", i)), cfg)
		if err != nil {
			StopAll(out)
			return nil, err
		}
		out = append(out, s)
	}
	for i, s := range out {
		if s.waitReady(cfg, 10*time.Second) == nil {
			continue
		}
		s.Stop()
		again, err := startReady(s.Dir, cfg, 10*time.Second)
		if err != nil {
			StopAll(out)
			return nil, err
		}
		out[i] = again
	}
	return out, nil
}

// StartIn runs one server with its data in dir, on a new port, and waits until it
// answers PING. With the dir of a stopped server it is that node back at a new address
// (its nodes.conf and dump.rdb kept), as a pod recreated with its volume.
func StartIn(dir string, cfg Config) (*Server, error) {
	return startReady(dir, cfg, 10*time.Second)
}

func startOne(dir string, cfg Config) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create %s: %w", dir, err)
	}
	port, err := freePortPair()
	if err != nil {
		return nil, err
	}
	timeout := cfg.NodeTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--cluster-node-timeout", strconv.FormatInt(timeout.Milliseconds(), 10),
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", filepath.Join(dir, "redis.log")}
	switch {
	case cfg.AuthConf != "":
		file := filepath.Join(dir, "auth.conf")
		if err := os.WriteFile(file, []byte(cfg.AuthConf), 0o600); err != nil {
			return nil, fmt.Errorf("failed to write %s: %w", file, err)
		}
		args = append(args, "--include", file)
	case cfg.Password != "":
		args = append(args, "--requirepass", cfg.Password, "--masterauth", cfg.Password)
	}
	if cfg.TLSDir != "" {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(port),
			"--tls-cert-file", filepath.Join(cfg.TLSDir, "tls.crt"), "--tls-key-file", filepath.Join(cfg.TLSDir, "tls.key"),
			"--tls-ca-cert-file", filepath.Join(cfg.TLSDir, "ca.crt"), "--tls-cluster", "yes", "--tls-replication", "yes")
	}
	args = append(args, cfg.Args...)
	bin := RedisServer
	if cfg.Server != "" {
		bin = cfg.Server
	}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start redis-server: %w", err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

// startTries bounds how often a server is started again on a new port when its first
// one was taken between freePortPair and redis-server's bind (another test process, or
// a client's ephemeral port): redis-server then exits, and the retry is the fix.
const startTries = 3

// startReady starts one server and waits until it answers PING, on a new port when the
// process exited first.
func startReady(dir string, cfg Config, within time.Duration) (*Server, error) {
	var err error
	for try := 0; try < startTries; try++ {
		var s *Server
		if s, err = startOne(dir, cfg); err != nil {
			return nil, err
		}
		if err = s.waitReady(cfg, within); err == nil {
			return s, nil
		}
		s.Stop()
	}
	return nil, err
}

// portRange is where freePortPair looks: 12000-22000, bus ports (port+10000) included
// below the kernel's ephemeral range (32768 by default), so a client's outgoing
// connection never holds a port a server is about to bind, no server's port is another's
// bus port, and the Kubernetes components' 10248-10260 and the devcluster's etcd on
// 23790 stay clear.
func portRange() (lo, hi int) {
	lo, hi = 12000, 22000
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	var ephemeralLow, ephemeralHigh int
	if _, err := fmt.Sscan(string(raw), &ephemeralLow, &ephemeralHigh); err != nil {
		return lo, hi
	}
	if top := ephemeralLow - 10000; top < hi && top-lo >= 2000 {
		hi = top
	}
	return lo, hi
}

// freePortPair finds a port p on 127.0.0.1 with p+10000 free as well (the cluster bus).
func freePortPair() (int, error) {
	lo, hi := portRange()
	for try := 0; try < 200; try++ {
		p := lo + rand.IntN(hi-lo)
		l1, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000))
		l1.Close()
		if err != nil {
			continue
		}
		l2.Close()
		return p, nil
	}
	return 0, fmt.Errorf("failed to find a free port pair on 127.0.0.1")
}

func (s *Server) waitReady(cfg Config, within time.Duration) error {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr, Password: cfg.Password, MaxRetries: -1, TLSConfig: cfg.TLSClient})
	defer c.Close()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		if err == nil {
			err = s.answeredByUs(ctx, c)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("redis-server at %s exited before it answered (see %s): %w", s.Addr, filepath.Join(s.Dir, "redis.log"), err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("failed to reach redis-server at %s: %w", s.Addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// answeredByUs makes sure the server that answered is this process, not another test
// process' server that took the port between freePortPair and this one's bind: this
// process then exits, and without the check the caller would drive a stranger's node.
func (s *Server) answeredByUs(ctx context.Context, c *goredis.Client) error {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	want := "process_id:" + strconv.Itoa(s.cmd.Process.Pid)
	for _, line := range strings.Split(info, "\n") {
		if strings.TrimSpace(line) == want {
			return nil
		}
	}
	return fmt.Errorf("port %s is held by another redis-server", s.Addr)
}

// PID is the server's process ID, 0 once stopped: benchmarks read its CPU time from /proc.
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop kills the process by PID and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

// StopAll stops every server.
func StopAll(servers []*Server) {
	for _, s := range servers {
		s.Stop()
	}
}

// Addrs lists the servers' addresses.
func Addrs(servers []*Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Addr
	}
	return out
}

// ZAddBig writes a sorted set of n members ("member:0000000" …, score i) to key on the
// node at addr in pipelined ZADD batches, as a client loading a big key would.
func ZAddBig(ctx context.Context, t testing.TB, addr, password, key string, n int) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: password, ReadTimeout: 30 * time.Second})
	defer c.Close()
	const perZadd, perPipe = 1000, 50
	for i := 0; i < n; {
		p := c.Pipeline()
		for j := 0; j < perPipe && i < n; j++ {
			zs := make([]*goredis.Z, 0, perZadd)
			for k := 0; k < perZadd && i < n; k, i = k+1, i+1 {
				zs = append(zs, &goredis.Z{Score: float64(i), Member: fmt.Sprintf("member:%07d", i)})
			}
			p.ZAdd(ctx, key, zs...)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatalf("loading %s on %s: %v", key, addr, err)
		}
	}
}

// SlotOwner is the node ID of the member that claims slot in its own view, "" when none.
func SlotOwner(st *topology.ClusterState, slot int) string {
	for i := range st.Members {
		if self := st.Members[i].Self(); self != nil && self.Slots.Contains(slot) {
			return self.ID
		}
	}
	return ""
}
