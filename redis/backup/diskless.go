package backup

import (
	"fmt"
	"strings"
)

// How each master's snapshot comes, decided before the pause.
//
// A disk snapshot: the master's fork writes the RDB to its disk, then the master sends
// $<length> and the file. A diskless one: the fork streams the RDB through the master to
// the connection as it writes it ($EOF:<mark>, the RDB, the mark), with no disk in between
// and no wait for the whole file: asked for with REPLCONF capa eof. Either way the master
// forks while handling PSYNC, inside the pause, as long as it forks at once: with
// repl-diskless-sync yes and a repl-diskless-sync-delay above 0, a replica announcing
// capa eof gets its fork only after the delay, from the master's cron (seconds: past
// the pause's timeout, which would discard every cut). So a master is asked for a diskless
// snapshot only when its repl-diskless-sync is yes and its repl-diskless-sync-delay 0
// (what the pods set, templates/configmap.cue); any other gets a disk snapshot at once,
// since without capa eof the delay does not apply.

// askSnapshot reads master m's replication settings on ctl and, when they allow it, asks
// for a diskless snapshot on rep (recording which in m); else m keeps the disk snapshot,
// with DiskReason saying why.
func askSnapshot(ctl, rep *conn, m *Shard) error {
	m.Diskless, m.DiskReason = false, disklessRefused(ctl)
	if m.DiskReason != "" {
		return nil
	}
	info, err := ctl.do("INFO", "server")
	if err != nil {
		return fmt.Errorf("INFO server on %s: %w", m.Addr, err)
	}
	// Valkey 9 streams a diskless snapshot in the RDB version its replica says it reads
	// (REPLCONF version; RDB 11 when it says none) and fails the snapshot on a key that
	// version cannot hold (a hash with field expiries): the master's own version gets
	// its own format, the one its disk snapshot has.
	if v, ok := infoField(info, "valkey_version"); ok && v != "" {
		if _, err := rep.do("REPLCONF", "version", v); err != nil {
			m.DiskReason = fmt.Sprintf("REPLCONF version refused: %v", err)
			return nil
		}
	}
	if _, err := rep.do("REPLCONF", "capa", "eof"); err != nil {
		return fmt.Errorf("REPLCONF capa eof on %s: %w", m.Addr, err)
	}
	m.Diskless = true
	return nil
}

// disklessRefused is why the master on ctl must get a disk snapshot ("" when none):
// repl-diskless-sync not yes, a repl-diskless-sync-delay, or settings it would not tell.
func disklessRefused(ctl *conn) string {
	for _, s := range []struct{ name, want string }{{"repl-diskless-sync", "yes"}, {"repl-diskless-sync-delay", "0"}} {
		v, err := ctl.config(s.name)
		if err != nil {
			return fmt.Sprintf("CONFIG GET %s: %v", s.name, err)
		}
		if v != s.want {
			if v == "" {
				v = "unknown"
			}
			return s.name + " " + v
		}
	}
	return ""
}

// Snapshots says how the cut's snapshots come: "diskless" when all are, else which masters
// write theirs to disk first, and why.
func (c *Cut) Snapshots() string {
	var disk []string
	for _, s := range c.Shards {
		if !s.Diskless {
			disk = append(disk, fmt.Sprintf("%s (%s)", s.Addr, s.DiskReason))
		}
	}
	switch len(disk) {
	case 0:
		return "diskless"
	case len(c.Shards):
		return "from disk: " + strings.Join(disk, ", ")
	}
	return fmt.Sprintf("diskless but %d from disk: %s", len(disk), strings.Join(disk, ", "))
}
