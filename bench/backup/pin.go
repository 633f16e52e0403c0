//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"

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

// pinned is what -pin did, undone by unpin: each process pinned and the cores it had
// before; a nil *pinned pins nothing.
type pinned struct {
	pids   []int
	before []unix.CPUSet
}

// pinClients pins operatorPID, storePID and this process to CPU 1.
func pinClients(operatorPID, storePID int) (*pinned, error) {
	if runtime.NumCPU() < 2 {
		return nil, fmt.Errorf("-pin needs 2 cores, this machine has %d", runtime.NumCPU())
	}
	p := &pinned{}
	for _, pid := range []int{operatorPID, storePID, os.Getpid()} {
		if err := p.pin(pid, 1); err != nil {
			p.unpin()
			return nil, err
		}
	}
	return p, nil
}

// mustServers is servers, failing when it finds fewer than want.
func (p *pinned) mustServers(ctx context.Context, s *framework.Stack, ns, prefix string, want int) error {
	ok, err := p.servers(ctx, s, ns, prefix, want)
	switch {
	case err != nil:
		return fmt.Errorf("-pin: %s*: %w", prefix, err)
	case !ok:
		return fmt.Errorf("-pin: %d redis-servers of %s* not found", want, prefix)
	}
	return nil
}

// servers pins to CPU 0 the redis-servers of the pods of ns whose names start with prefix,
// once there is one for each such pod; it says whether it did.
func (p *pinned) servers(ctx context.Context, s *framework.Stack, ns, prefix string, want int) (bool, error) {
	if p == nil {
		return true, nil
	}
	pids, pods, err := podServers(ctx, s, ns, prefix)
	if err != nil || pods != want || len(pids) != want {
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

// pin sets every thread of pid on cpu, recording the cores it had.
func (p *pinned) pin(pid, cpu int) error {
	var before, set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &before); err != nil {
		return fmt.Errorf("sched_getaffinity %d: %w", pid, err)
	}
	p.pids, p.before = append(p.pids, pid), append(p.before, before)
	set.Set(cpu)
	return setAffinity(pid, &set)
}

// unpin gives every pinned process the cores it had before.
func (p *pinned) unpin() {
	if p == nil {
		return
	}
	for i, pid := range p.pids {
		if err := setAffinity(pid, &p.before[i]); err != nil {
			fmt.Fprintf(os.Stderr, "-pin: process %d keeps its pinning: %v\n", pid, err)
		}
	}
	if len(p.pids) > 0 {
		fmt.Println("unpinned")
	}
	p.pids, p.before = nil, nil
}

func setAffinity(pid int, set *unix.CPUSet) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, _ := strconv.Atoi(t.Name())
		// A thread that ended meanwhile needs nothing.
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("sched_setaffinity %d (of %d): %w", tid, pid, err)
		}
	}
	return nil
}
