package topology

import (
	"fmt"
	"strconv"
	"strings"
)

// Replication is the part of INFO replication the operator reads.
type Replication struct {
	// Role is "master" or "slave".
	Role string
	// LinkUp is master_link_status:up on a replica.
	LinkUp bool
	// Syncing is master_sync_in_progress:1: a full sync still loads.
	Syncing bool
	// Offset is slave_repl_offset on a replica, master_repl_offset on a master.
	Offset int64
	// MasterAddr is "master_host:master_port" on a replica: whom it replicates from.
	MasterAddr string
	// LinkDownSeconds is master_link_down_since_seconds on a replica whose link is down:
	// how stale its copy is. -1 when Redis does not say (link up, or never synced).
	LinkDownSeconds int64
}

// InSync reports whether a replica is connected to its master and not in a full sync, so
// a failover to it loses nothing and does not stall.
func (r Replication) InSync() bool {
	return r.Role == "slave" && r.LinkUp && !r.Syncing
}

// ParseReplication parses the "key:value" lines of INFO replication.
func ParseReplication(text string) (Replication, error) {
	r := Replication{LinkDownSeconds: -1}
	var host, port string
	for _, line := range strings.Split(text, "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch key {
		case "role":
			r.Role = value
		case "master_host":
			host = value
		case "master_port":
			port = value
		case "master_link_status":
			r.LinkUp = value == "up"
		case "master_sync_in_progress":
			r.Syncing = value == "1"
		case "master_link_down_since_seconds":
			if n, err := strconv.ParseInt(value, 10, 64); err == nil {
				r.LinkDownSeconds = n
			}
		case "slave_repl_offset", "master_repl_offset":
			if key == "master_repl_offset" && r.Role == "slave" {
				continue
			}
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return Replication{}, fmt.Errorf("failed to parse INFO replication %s: %w", key, err)
			}
			r.Offset = n
		}
	}
	if r.Role == "" {
		return Replication{}, fmt.Errorf("failed to parse INFO replication: no role")
	}
	if p, err := strconv.Atoi(port); host != "" && err == nil {
		r.MasterAddr = joinHostPort(host, p)
	}
	return r, nil
}
