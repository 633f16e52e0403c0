package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// CPU time, the figure that a shared machine's load does not skew: on 2 cores shared with
// other runs, a restore's wall time says as much about the neighbours as about the restore,
// while the CPU seconds each side spends for the same keys stay put.

// cpuUse is the CPU spent during one restore: by the restoring side (this process, with
// the library; the redis-cli processes, for the reference), by the store serving the
// objects (-local: versitygw), and by the target masters.
// For a backup on the devcluster: the operator's process or the redis-cli processes
// (client, named "operator" or "redis-cli"), and the store (versitygw); the masters' forks
// write the same snapshots for both and are not counted.
type cpuUse struct {
	clientName             string // "restorer" when empty
	client, store, servers time.Duration
	// forks is the masters' snapshot children's (a backup's; INFO cpu's *_children).
	forks time.Duration
}

func (c cpuUse) String() string {
	if c == (cpuUse{}) {
		return ""
	}
	name := c.clientName
	if name == "" {
		name = "restorer"
	}
	s := "  CPU: " + name + " " + c.client.Round(time.Millisecond).String()
	if c.store > 0 {
		s += ", store " + c.store.Round(time.Millisecond).String()
	}
	if c.servers > 0 {
		s += ", masters " + c.servers.Round(time.Millisecond).String()
	}
	if c.forks > 0 {
		s += ", masters' forks " + c.forks.Round(time.Millisecond).String()
	}
	return s
}

// selfCPU is this process' user and system time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user and system time so far of process pid, from /proc (0 if unknown).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces), from the 3rd: utime is
	// the 14th, stime the 15th, in clock ticks (100 a second on Linux).
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	k, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

// serversCPU is the sum of the main threads' used_cpu_user and used_cpu_sys (INFO cpu) of
// the nodes at addrs.
func serversCPU(addrs []string, password string) time.Duration {
	return infoCPU(addrs, password, "used_cpu_user", "used_cpu_sys")
}

// forksCPU is the sum of the CPU of the nodes' children that ended (their snapshots), after
// half a second: a master counts a child's time once its cron has reaped it.
func forksCPU(addrs []string, password string) time.Duration {
	time.Sleep(500 * time.Millisecond)
	return infoCPU(addrs, password, "used_cpu_user_children", "used_cpu_sys_children")
}

// infoCPU sums the fields of INFO cpu (seconds) of the nodes at addrs.
func infoCPU(addrs []string, password string, fields ...string) time.Duration {
	var total float64
	for _, a := range addrs {
		host, port, _ := strings.Cut(a, ":")
		cmd := exec.Command("redis-cli", "-h", host, "-p", port, "--no-auth-warning", "info", "cpu")
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+password)
		out, _ := cmd.Output()
		for _, l := range strings.Split(string(out), "\n") {
			name, v, _ := strings.Cut(strings.TrimSpace(l), ":")
			if slices.Contains(fields, name) {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

// childCPU sums the user and system time of child processes that ended.
type childCPU struct {
	mu  sync.Mutex
	sum time.Duration
}

func (c *childCPU) add(ps *os.ProcessState) {
	if ps == nil {
		return
	}
	c.mu.Lock()
	c.sum += ps.UserTime() + ps.SystemTime()
	c.mu.Unlock()
}

func (c *childCPU) total() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sum
}

// profileOperator starts a 2 s CPU profile of the bench's operator, written to
// prefix-NAME.prof; the returned wait waits for it. Nothing with prefix empty.
func profileOperator(prefix, name string) (wait func() error) {
	if prefix == "" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + operatorPprof + "/debug/pprof/profile?seconds=2")
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(prefix + "-" + name + ".prof")
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // the profile is running before the apply
	return func() error { return <-done }
}

// podServers are the host PIDs of the redis-servers of ns's pods whose names start with
// prefix, and how many such pods there are.
func podServers(ctx context.Context, s *framework.Stack, ns, prefix string) ([]int, int, error) {
	pods, err := s.Pods(ctx, ns, "")
	if err != nil {
		return nil, 0, err
	}
	var uids []string
	for _, pod := range pods {
		if strings.HasPrefix(pod.Name, prefix) {
			uids = append(uids, string(pod.UID))
		}
	}
	pids, err := serverPIDs(uids)
	return pids, len(uids), err
}

// serverPIDs are the redis-server processes whose cgroup names one of the pod UIDs (as the
// kubelet writes it with either cgroup driver).
func serverPIDs(uids []string) ([]int, error) {
	procs, err := filepath.Glob("/proc/[0-9]*/comm")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, comm := range procs {
		b, err := os.ReadFile(comm)
		if err != nil || strings.TrimSpace(string(b)) != "redis-server" {
			continue
		}
		dir := filepath.Dir(comm)
		cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil {
			continue
		}
		for _, uid := range uids {
			if strings.Contains(string(cg), uid) || strings.Contains(string(cg), strings.ReplaceAll(uid, "-", "_")) {
				pid, _ := strconv.Atoi(filepath.Base(dir))
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}

// sumCPU is procCPU summed over pids.
func sumCPU(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		total += procCPU(pid)
	}
	return total
}
