package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Operator is the operator built from this repository, running as its own process against
// the devcluster.
type Operator struct {
	// Logs is the file its stdout and stderr go to (appended across restarts).
	Logs string
	bin  string
	args []string
	kube string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	// ensure serialises EnsureRunning: tests running in parallel that each find the
	// process gone must start one operator between them, not kill each other's.
	ensure sync.Mutex
}

// StartOperator builds `go build -o bin/manager .` and runs it with --kubeconfig and args.
func (s *Stack) StartOperator(args ...string) (*Operator, error) {
	if _, err := os.Stat(filepath.Join(s.Root, "main.go")); err != nil {
		return nil, fmt.Errorf("failed to find the operator's main.go: %w", err)
	}
	bin := filepath.Join(s.Root, "bin", "manager")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = s.Root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("failed to build the operator: %w: %s", err, out)
	}
	return s.StartOperatorBinary(bin, args...)
}

// StartOperatorBinary runs an operator binary built elsewhere (another commit's, for the
// operator-upgrade test) with --kubeconfig and args.
func (s *Stack) StartOperatorBinary(bin string, args ...string) (*Operator, error) {
	return s.StartOperatorAs(s.Kubeconfig, bin, args...)
}

// StartOperatorAs runs an operator binary with another kubeconfig than the admin's (a
// ServiceAccount's, to prove its RBAC is enough).
func (s *Stack) StartOperatorAs(kubeconfig, bin string, args ...string) (*Operator, error) {
	if err := os.MkdirAll(filepath.Join(s.StateDir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("failed to create log dir: %w", err)
	}
	o := &Operator{Logs: filepath.Join(s.StateDir, "logs", fmt.Sprintf("operator-e2e-%d.log", time.Now().UnixNano())),
		bin: bin, args: args, kube: kubeconfig}
	return o, o.start()
}

func (o *Operator) start() error {
	logf, err := os.OpenFile(o.Logs, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("failed to open operator log: %w", err)
	}
	cmd := exec.Command(o.bin, append([]string{"--kubeconfig", o.kube}, o.args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("failed to start the operator: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	o.mu.Lock()
	o.cmd, o.done = cmd, done
	o.mu.Unlock()
	return nil
}

// PID of the running process.
func (o *Operator) PID() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cmd.Process.Pid
}

// Running reports whether the process has not exited.
func (o *Operator) Running() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case <-o.done:
		return false
	default:
		return true
	}
}

// Kill SIGKILLs the operator (a crash, mid-operation) and waits for it to be gone.
func (o *Operator) Kill() error { return o.signal(syscall.SIGKILL) }

// Stop SIGTERMs the operator and waits for it to exit (SIGKILL after 15s).
func (o *Operator) Stop() error {
	if err := o.signal(syscall.SIGTERM); err != nil {
		return err
	}
	return nil
}

func (o *Operator) signal(sig syscall.Signal) error {
	o.mu.Lock()
	cmd, done := o.cmd, o.done
	o.mu.Unlock()
	select {
	case <-done:
		return nil
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("failed to signal the operator: %w", err)
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	return nil
}

// EnsureRunning starts the operator again with the same arguments when it has exited (a test
// before stopped it); one running is left alone. Safe to call from tests running in parallel.
func (o *Operator) EnsureRunning() error {
	o.ensure.Lock()
	defer o.ensure.Unlock()
	if o.Running() {
		return nil
	}
	return o.start()
}

// Restart kills the operator and starts it again with the same arguments.
func (o *Operator) Restart() error {
	if err := o.Kill(); err != nil {
		return err
	}
	return o.start()
}
