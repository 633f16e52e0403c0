package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeResult: ok, and when the probe could not be emulated, why (the caller then says so).
type probeResult struct {
	OK          bool
	Unsupported string
}

// runProbe runs a tcpSocket probe against the pod address, or an exec probe inside the
// process's mount namespace (nsenter) with the container's env. httpGet and grpc are not
// emulated.
func runProbe(ctx context.Context, pr *corev1.Probe, c *corev1.Container, podIP string, pid int, env []string) probeResult {
	timeout := time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second
	switch {
	case pr.TCPSocket != nil:
		host := pr.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		port, err := resolvePort(pr.TCPSocket.Port, c)
		if err != nil {
			return probeResult{}
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), timeout)
		if err != nil {
			return probeResult{}
		}
		conn.Close()
		return probeResult{OK: true}
	case pr.Exec != nil && len(pr.Exec.Command) > 0:
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		args := append([]string{"-t", strconv.Itoa(pid), "-m", "--"}, pr.Exec.Command...)
		cmd := exec.CommandContext(ctx, "nsenter", args...)
		cmd.Env = env
		return probeResult{OK: cmd.Run() == nil}
	case pr.HTTPGet != nil:
		return probeResult{OK: true, Unsupported: "httpGet probes are not emulated"}
	case pr.GRPC != nil:
		return probeResult{OK: true, Unsupported: "grpc probes are not emulated"}
	}
	return probeResult{OK: true}
}

func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("no container port named %s", p.StrVal)
}

// prober tracks one probe's consecutive results against its thresholds.
type prober struct {
	probe              *corev1.Probe
	last               time.Time
	successes, failure int32
	passing            bool
	unsupported        string
}

// due reports whether the probe should run now: after initialDelaySeconds, then every
// periodSeconds, capped at 2s so tests do not wait a kubelet's default 10s between probes.
func (p *prober) due(started time.Time, now time.Time) bool {
	if now.Sub(started) < time.Duration(p.probe.InitialDelaySeconds)*time.Second {
		return false
	}
	period := min(time.Duration(max(p.probe.PeriodSeconds, 1))*time.Second, 2*time.Second)
	return now.Sub(p.last) >= period
}

// record applies successThreshold/failureThreshold (defaults 1 and 3) and returns the new state.
func (p *prober) record(r probeResult, now time.Time) bool {
	p.last = now
	p.unsupported = r.Unsupported
	if r.OK {
		p.successes++
		p.failure = 0
		if p.successes >= max(p.probe.SuccessThreshold, 1) {
			p.passing = true
		}
	} else {
		p.failure++
		p.successes = 0
		failureThreshold := p.probe.FailureThreshold
		if failureThreshold == 0 {
			failureThreshold = 3
		}
		if p.failure >= failureThreshold {
			p.passing = false
		}
	}
	return p.passing
}
