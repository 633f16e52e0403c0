package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis/v8"
)

// readCommands are the commands that change nothing: anything else counted in INFO
// commandstats is a write. The operator's own reads, a client's handshake and this
// package's INFO are all here, and REPLCONF, which replicas send their master each
// second (ACK of the replication offset), nobody's write to the data or the cluster.
var readCommands = map[string]bool{
	"info": true, "ping": true, "auth": true, "hello": true, "dbsize": true, "echo": true,
	"cluster|nodes": true, "cluster|info": true, "cluster|myid": true, "cluster|slots": true,
	"cluster|shards": true, "cluster|countkeysinslot": true, "cluster|getkeysinslot": true,
	"config|get": true, "acl|users": true, "acl|whoami": true, "memory|usage": true,
	"replconf": true, "select": true, "get": true, "exists": true, "scan": true, "type": true, "ttl": true,
}

// NodeStats is what one Redis node says about the commands it ran and who is connected.
type NodeStats struct {
	// Calls by command name as INFO commandstats spells it ("cluster|nodes").
	Calls map[string]int64
	// ConnectedClients is INFO clients' connected_clients (cluster bus links excluded).
	ConnectedClients int64
	// CurrentEpoch is CLUSTER INFO's cluster_current_epoch.
	CurrentEpoch int64
}

// isWrite: every command but the reads above, CLIENT and COMMAND.
func isWrite(cmd string) bool {
	return !readCommands[cmd] && !strings.HasPrefix(cmd, "client|") && !strings.HasPrefix(cmd, "command")
}

// Total is the number of commands among Calls.
func (n NodeStats) Total() int64 {
	var t int64
	for _, c := range n.Calls {
		t += c
	}
	return t
}

// ReadNodeStats reads INFO commandstats, INFO clients and CLUSTER INFO of one node
// (addr "ip:port") over a connection of its own, closed before it returns. The three
// reads themselves are counted in the next reading (INFO and CLUSTER INFO).
func ReadNodeStats(ctx context.Context, addr, password string) (NodeStats, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, DialTimeout: 2 * time.Second,
		ReadTimeout: 3 * time.Second, PoolSize: 1, MaxRetries: -1})
	defer c.Close()
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return NodeStats{}, fmt.Errorf("failed to read INFO commandstats of %s: %w", addr, err)
	}
	clients, err := c.Info(ctx, "clients").Result()
	if err != nil {
		return NodeStats{}, fmt.Errorf("failed to read INFO clients of %s: %w", addr, err)
	}
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return NodeStats{}, fmt.Errorf("failed to read CLUSTER INFO of %s: %w", addr, err)
	}
	n := NodeStats{Calls: map[string]int64{}}
	for _, line := range strings.Split(stats, "\n") {
		// cmdstat_cluster|nodes:calls=12,usec=...
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		if v, err := strconv.ParseInt(calls, 10, 64); err == nil {
			n.Calls[strings.TrimPrefix(name, "cmdstat_")] = v
		}
	}
	// This connection is one of connected_clients.
	n.ConnectedClients = infoField(clients, "connected_clients") - 1
	n.CurrentEpoch = infoField(info, "cluster_current_epoch")
	return n, nil
}

func infoField(text, field string) int64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// StatsDelta is the difference between two readings of the same nodes.
type StatsDelta struct {
	// Commands and Writes sent between the readings, less the readings' own commands.
	Commands, Writes int64
	// WritesByCommand names the write commands, for a failure message.
	WritesByCommand map[string]int64
	// ByCommand is Commands by command name: who sends what (the operator's health
	// check, the pods' probes, replicas' REPLCONF ACK).
	ByCommand map[string]int64
	// EpochChanged lists the nodes whose cluster_current_epoch moved.
	EpochChanged []string
}

// ReadStats reads every addr's NodeStats, by addr.
func ReadStats(ctx context.Context, addrs []string, password string) (map[string]NodeStats, error) {
	out := make(map[string]NodeStats, len(addrs))
	for _, a := range addrs {
		n, err := ReadNodeStats(ctx, a, password)
		if err != nil {
			return nil, err
		}
		out[a] = n
	}
	return out, nil
}

// Delta compares two readings of the same nodes. Each reading costs every node two INFO
// and one CLUSTER INFO, which are taken off Commands.
func Delta(before, after map[string]NodeStats) StatsDelta {
	d := StatsDelta{WritesByCommand: map[string]int64{}, ByCommand: map[string]int64{}}
	for addr, a := range after {
		b, ok := before[addr]
		if !ok {
			continue
		}
		d.Commands += a.Total() - b.Total() - 3
		// The reading's own: INFO twice, CLUSTER INFO once.
		d.ByCommand["info"] -= 2
		d.ByCommand["cluster|info"]--
		for cmd, c := range a.Calls {
			n := c - b.Calls[cmd]
			if n <= 0 {
				continue
			}
			d.ByCommand[cmd] += n
			if isWrite(cmd) {
				d.Writes += n
				d.WritesByCommand[cmd] += n
			}
		}
		if a.CurrentEpoch != b.CurrentEpoch {
			d.EpochChanged = append(d.EpochChanged, fmt.Sprintf("%s %d->%d", addr, b.CurrentEpoch, a.CurrentEpoch))
		}
	}
	return d
}

// ProcStats is a process's resident memory and CPU time so far, from /proc.
type ProcStats struct {
	RSS int64 // bytes
	// RSSAnon and RSSFile split RSS: the heap and stacks, and the pages of the binary
	// (and other files) mapped in.
	RSSAnon, RSSFile int64
	CPU              time.Duration
}

// ReadProcStats reads /proc/PID/status (VmRSS, RssAnon, RssFile) and /proc/PID/stat (utime + stime).
func ReadProcStats(pid int) (ProcStats, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcStats{}, fmt.Errorf("failed to read the status of pid %d: %w", pid, err)
	}
	var ps ProcStats
	for _, line := range strings.Split(string(status), "\n") {
		for field, into := range map[string]*int64{"VmRSS:": &ps.RSS, "RssAnon:": &ps.RSSAnon, "RssFile:": &ps.RSSFile} {
			if v, ok := strings.CutPrefix(line, field); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				*into = kb * 1024
			}
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcStats{}, fmt.Errorf("failed to read the stat of pid %d: %w", pid, err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return ProcStats{}, fmt.Errorf("failed to parse the stat of pid %d", pid)
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	// USER_HZ is 100 on Linux.
	ps.CPU = time.Duration(utime+stime) * 10 * time.Millisecond
	return ps, nil
}

// InstallCRD applies the CRD and retries `kubectl wait` until it is established (a wait
// issued right after the apply can fail before the API server has the object).
func (s *Stack) InstallCRD(ctx context.Context) error {
	if _, err := s.Kubectl("apply", "--server-side", "-f", filepath.Join(s.Root, "config", "crd", "bases")); err != nil {
		return fmt.Errorf("failed to install the CRD: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := s.Kubectl("wait", "--for", "condition=established", "crd/redisclusters.redis.middleware.hc.cn", "--timeout", "10s")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("failed to see the CRD established: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
