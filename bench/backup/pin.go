package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// -pin: the servers on one core and the clients on the other: every redis-server of the
// bench's clusters (masters and replicas; their forks inherit it) on CPU 0, the operator,
// the store and this process (its writer, its redis-cli children) on CPU 1; a restore's
// new cluster is pinned once its pods run, before its keys come. It is the nearest this
// 2-core machine comes to a deployment where the operator and the store run on other
// machines than the masters: both methods' clients then stop taking CPU from the
// servers. The control plane and the nodes' agents still run on both cores.

// pinned is what -pin did, undone by unpin; a nil *pinned pins nothing.
type pinned struct{ pids []int }

// pinClients pins operatorPID, storePID and this process to CPU 1.
func pinClients(operatorPID, storePID int) (*pinned, error) {
	if runtime.NumCPU() < 2 {
		return nil, fmt.Errorf("-pin needs 2 cores, this machine has %d", runtime.NumCPU())
	}
	p := &pinned{}
	for _, pid := range []int{operatorPID, storePID, os.Getpid()} {
		if err := p.pin(pid, 1); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// servers pins to CPU 0 the redis-servers of the pods of ns whose names start with prefix,
// once there is one for each such pod; it says whether it did.
func (p *pinned) servers(ctx context.Context, s *framework.Stack, ns, prefix string, want int) (bool, error) {
	if p == nil {
		return true, nil
	}
	pods, err := s.Pods(ctx, ns, "")
	if err != nil {
		return false, err
	}
	var uids []string
	for _, pod := range pods {
		if strings.HasPrefix(pod.Name, prefix) {
			uids = append(uids, string(pod.UID))
		}
	}
	pids, err := serverPIDs(uids)
	if err != nil || len(uids) != want || len(pids) != want {
		return false, err
	}
	for _, pid := range pids {
		if err := p.pin(pid, 0); err != nil {
			return false, err
		}
	}
	fmt.Printf("pinned: %d redis-servers of %s* on CPU 0\n", len(pids), prefix)
	return true, nil
}

// pin sets every thread of pid on cpu.
func (p *pinned) pin(pid, cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := setAffinity(pid, &set); err != nil {
		return err
	}
	p.pids = append(p.pids, pid)
	return nil
}

// unpin lets every pinned process run on every core again.
func (p *pinned) unpin() {
	if p == nil {
		return
	}
	var all unix.CPUSet
	for cpu := range runtime.NumCPU() {
		all.Set(cpu)
	}
	for _, pid := range p.pids {
		_ = setAffinity(pid, &all)
	}
	if len(p.pids) > 0 {
		fmt.Println("unpinned")
	}
	p.pids = nil
}

func setAffinity(pid int, set *unix.CPUSet) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, _ := strconv.Atoi(t.Name())
		if err := unix.SchedSetaffinity(tid, set); err != nil {
			return fmt.Errorf("sched_setaffinity %d (of %d): %w", tid, pid, err)
		}
	}
	return nil
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
