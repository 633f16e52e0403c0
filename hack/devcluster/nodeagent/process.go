package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// mount is a pod volume mount: the host directory (or file) Src appears at Dst in the process's
// private mount namespace.
type mount struct {
	Src, Dst string
	ReadOnly bool
}

// mountScript is the shell script run by `unshare -m --propagation private`: it bind-mounts
// each volume at its mountPath, parents before children, then execs the container's command,
// so the paths in the pod spec (/etc/redis/redis.conf, /data) are the real ones and the host
// never sees the mounts.
func mountScript(mounts []mount) string {
	sorted := append([]mount(nil), mounts...)
	sort.SliceStable(sorted, func(i, j int) bool { return strings.Count(sorted[i].Dst, "/") < strings.Count(sorted[j].Dst, "/") })
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Written by the devcluster node agent; runs in the pod's private mount namespace.\nset -e\n")
	for _, m := range sorted {
		src, dst := shellQuote(m.Src), shellQuote(m.Dst)
		fmt.Fprintf(&b, "if [ -d %s ]; then mkdir -p %s; else mkdir -p \"$(dirname %s)\"; [ -e %s ] || touch %s; fi\n", src, dst, dst, dst, dst)
		fmt.Fprintf(&b, "mount --bind %s %s\n", src, dst)
		if m.ReadOnly {
			fmt.Fprintf(&b, "mount -o remount,bind,ro %s\n", dst)
		}
	}
	b.WriteString("exec \"$@\"\n")
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// proc is a running container process: a child of this agent, or one adopted from a previous
// agent run through its pid file (then exit codes are unknown and liveness is polled).
type proc struct {
	pid       int
	startedAt time.Time
	done      chan struct{} // closed when a child exits; nil for an adopted process
	exitCode  int
}

func (p *proc) alive() bool {
	if p.done != nil {
		select {
		case <-p.done:
			return false
		default:
			return true
		}
	}
	return pidRunsRedis(p.pid)
}

// pidRunsRedis tells whether pid is a live redis-server (or its start script): a zombie or
// a PID reused by another program does not count.
func pidRunsRedis(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), "redis-server")
}

// startProcess runs argv in a private mount namespace with the given mounts and env, logging
// to podDir/redis.log and recording the PID in podDir/redis.pid.
func startProcess(podDir string, argv []string, env []string, mounts []mount, workDir, header string) (*proc, error) {
	script := filepath.Join(podDir, "start.sh")
	if err := os.WriteFile(script, []byte(mountScript(mounts)), 0o755); err != nil {
		return nil, fmt.Errorf("failed to write start script: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(podDir, "redis.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to open log: %w", err)
	}
	fmt.Fprintf(logf, "=== devcluster node agent: %s at %s\n", header, time.Now().Format(time.RFC3339))
	args := append([]string{"-m", "--propagation", "private", "/bin/sh", script}, argv...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = env
	cmd.Dir = workDir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: a Ctrl-C in the agent's terminal must not reach it, and an agent restart leaves it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("failed to start %s: %w", argv[0], err)
	}
	p := &proc{pid: cmd.Process.Pid, startedAt: time.Now(), done: make(chan struct{})}
	if err := os.WriteFile(filepath.Join(podDir, "redis.pid"), []byte(strconv.Itoa(p.pid)), 0o644); err != nil {
		return nil, fmt.Errorf("failed to write pid file: %w", err)
	}
	go func() {
		err := cmd.Wait()
		logf.Close()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.exitCode = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.exitCode = 128 + int(ws.Signal())
			}
		}
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs, as the kubelet does on pod deletion.
func (p *proc) stop(grace time.Duration) {
	if !p.alive() {
		return
	}
	signalGroup(p.pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for p.alive() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if p.alive() {
		signalGroup(p.pid, syscall.SIGKILL)
		for i := 0; i < 50 && p.alive(); i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// signalGroup signals the process group the process leads (it was started with Setsid).
func signalGroup(pid int, sig syscall.Signal) {
	if err := syscall.Kill(-pid, sig); err != nil {
		_ = syscall.Kill(pid, sig)
	}
}
