// Package framework brings up the devcluster (real kube-apiserver, kube-controller-manager,
// kube-scheduler, etcd and nodes: kubelets with containerd) once per `go test` run, and gives the
// end-to-end suites helpers to drive it: apply objects, wait for a RedisCluster phase, run and
// kill the operator, reach Redis pods by their addresses, kill and delete pods, read events.
package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Stack is the running devcluster.
type Stack struct {
	// Root is the repository root.
	Root string
	// StateDir is .devcluster/ under Root: pids, logs, pod state.
	StateDir string
	// Kubeconfig is the admin kubeconfig of the devcluster.
	Kubeconfig string
	// startedHere is true when Up started the stack, so Down stops it; a stack that was
	// already running (a developer's `make demo`) is left alone.
	startedHere bool

	mu     sync.Mutex
	client client.Client // Client's, made on first use
}

// RepoRoot finds the repository root from this source file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Up starts the devcluster with hack/devcluster/up.sh (idempotent) and waits for its nodes.
func Up() (*Stack, error) {
	root := RepoRoot()
	s := &Stack{Root: root, StateDir: filepath.Join(root, ".devcluster"), Kubeconfig: filepath.Join(root, ".devcluster", "kubeconfig")}
	s.startedHere = !s.running()
	cmd := exec.Command(filepath.Join(root, "hack", "devcluster", "up.sh"))
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("failed to start the devcluster: %w", err)
	}
	return s, nil
}

func (s *Stack) running() bool {
	b, err := os.ReadFile(filepath.Join(s.StateDir, "pids", "kube-apiserver.pid"))
	if err != nil {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/cmdline")
	return err == nil && strings.Contains(string(cmdline), "kube-apiserver")
}

// Down stops the stack by PID with hack/devcluster/down.sh when Up started it, unless
// E2E_KEEP_CLUSTER is set (to look around after a failure).
func (s *Stack) Down() error {
	if !s.startedHere || os.Getenv("E2E_KEEP_CLUSTER") != "" {
		return nil
	}
	cmd := exec.Command(filepath.Join(s.Root, "hack", "devcluster", "down.sh"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("failed to stop the devcluster: %w", err)
	}
	return nil
}

// Kubectl runs bin/kubectl against the devcluster and returns its combined output.
func (s *Stack) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(s.Root, "bin", "kubectl"), append([]string{"--kubeconfig", s.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("failed to run kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// KubectlIn runs kubectl with stdin as its standard input: how a test hands a secret to
// `kubectl exec -i` without putting it in any process's arguments.
func (s *Stack) KubectlIn(stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(s.Root, "bin", "kubectl"), append([]string{"--kubeconfig", s.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("failed to run kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// WithCRD runs body on a devcluster (Up) with the RedisCluster CRD installed, and stops
// the devcluster afterwards (Down); body's error comes first. The benches' entry point.
func WithCRD(ctx context.Context, body func(*Stack) error) (err error) {
	s, err := Up()
	if err != nil {
		return err
	}
	defer func() {
		if derr := s.Down(); derr != nil && err == nil {
			err = derr
		}
	}()
	if err := s.InstallCRD(ctx); err != nil {
		return err
	}
	return body(s)
}

// Node runs hack/devcluster/node.sh ACTION N: stop, kill, start, partition or heal devnode-N.
func (s *Stack) Node(action string, n int) error {
	cmd := exec.Command(filepath.Join(s.Root, "hack", "devcluster", "node.sh"), action, fmt.Sprint(n))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("node.sh %s %d: %w: %s", action, n, err, out)
	}
	return nil
}
