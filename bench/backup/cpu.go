package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU time, the figure that a shared machine's load does not skew: on 2 cores shared with
// other runs, a restore's wall time says as much about the neighbours as about the restore,
// while the CPU seconds each side spends for the same keys stay put.

// cpuUse is the CPU spent during one restore: by the restoring side (this process, with
// the library; the redis-cli processes, for the reference), by the store serving the
// objects (-local: versitygw), and by the target masters.
type cpuUse struct {
	client, store, servers time.Duration
}

func (c cpuUse) String() string {
	if c == (cpuUse{}) {
		return ""
	}
	s := "  CPU: restorer " + c.client.Round(time.Millisecond).String()
	if c.store > 0 {
		s += ", store " + c.store.Round(time.Millisecond).String()
	}
	return s + ", masters " + c.servers.Round(time.Millisecond).String()
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
	var total float64
	for _, a := range addrs {
		host, port, _ := strings.Cut(a, ":")
		cmd := exec.Command("redis-cli", "-h", host, "-p", port, "--no-auth-warning", "info", "cpu")
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+password)
		out, _ := cmd.Output()
		for _, l := range strings.Split(string(out), "\n") {
			name, v, _ := strings.Cut(strings.TrimSpace(l), ":")
			if name == "used_cpu_user" || name == "used_cpu_sys" {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}
