package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// The commands of atomic slot migration (migrate_atomic.go) and their replies.

// AtomicMigrationCommands are the commands the atomic mover sends, as ACL command names.
// They are not in OperatorCommands: a server without them (Redis, Valkey 8) refuses an ACL
// rule naming them, and the operator user's rules are one file for every pod. The mover
// grants them to the operator user on a node that refuses them with NOPERM (ACL SETUSER
// adds, the user has +acl|setuser), so a node restarted from the file gets them back on use.
var AtomicMigrationCommands = []string{"cluster|migrateslots", "cluster|getslotmigrations", "cluster|cancelslotmigrations"}

// SlotMigration is one job of CLUSTER GETSLOTMIGRATIONS.
type SlotMigration struct {
	Name string
	// Operation is "EXPORT" (this node is the source) or "IMPORT".
	Operation string
	Slots     []topology.SlotRange
	// Source and Target are node IDs (empty on a replica's tracking entry).
	Source, Target string
	Created        time.Time
	State, Message string
}

// Finished: the job is done, one way or the other, and only kept as a log entry.
func (j SlotMigration) Finished() bool {
	return j.State == "success" || j.State == "failed" || j.State == "cancelled"
}

// AtomicJob is one SLOTSRANGE … NODE group of CLUSTER MIGRATESLOTS.
type AtomicJob struct {
	Slots  []topology.SlotRange
	Target string
}

// MigrateSlotsAtomic sends CLUSTER MIGRATESLOTS with one group a job.
func (a *admin) MigrateSlotsAtomic(ctx context.Context, jobs []AtomicJob) error {
	args := []interface{}{"cluster", "migrateslots"}
	for _, j := range jobs {
		args = append(args, "slotsrange")
		for _, r := range j.Slots {
			args = append(args, r.Start, r.End)
		}
		args = append(args, "node", j.Target)
	}
	err := a.grantingAtomic(ctx, func() error { return a.c.Do(ctx, args...).Err() })
	if err != nil {
		return fmt.Errorf("failed to start slot migrations on %s: %w", a.addr, err)
	}
	return nil
}

// SlotMigrations reads CLUSTER GETSLOTMIGRATIONS: the node's jobs, running and recent.
func (a *admin) SlotMigrations(ctx context.Context) ([]SlotMigration, error) {
	var reply interface{}
	err := a.grantingAtomic(ctx, func() error {
		var err error
		reply, err = a.c.Do(ctx, "cluster", "getslotmigrations").Result()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to read slot migrations of %s: %w", a.addr, err)
	}
	return ParseSlotMigrations(reply)
}

// CancelSlotMigrations cancels every export the node runs; none running is not an error.
func (a *admin) CancelSlotMigrations(ctx context.Context) error {
	err := a.grantingAtomic(ctx, func() error { return a.c.Do(ctx, "cluster", "cancelslotmigrations").Err() })
	if err != nil && !strings.Contains(err.Error(), "No migrations ongoing") {
		return fmt.Errorf("failed to cancel slot migrations on %s: %w", a.addr, err)
	}
	return nil
}

// CountKeysInSlots sums CLUSTER COUNTKEYSINSLOT over slots, in one pipeline.
func (a *admin) CountKeysInSlots(ctx context.Context, slots []int) (int64, error) {
	cmds := make([]*goredis.IntCmd, len(slots))
	_, _ = a.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, s := range slots {
			cmds[i] = p.ClusterCountKeysInSlot(ctx, s)
		}
		return nil
	})
	var n int64
	for _, c := range cmds {
		v, err := c.Result()
		if err != nil {
			return n, fmt.Errorf("failed to count keys on %s: %w", a.addr, err)
		}
		n += v
	}
	return n, nil
}

// grantingAtomic runs call; refused with NOPERM while the operator speaks as its own user,
// it grants that user AtomicMigrationCommands on this node and runs call once more.
func (a *admin) grantingAtomic(ctx context.Context, call func() error) error {
	err := call()
	if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") || a.user == "" || a.user == DefaultUser {
		return err
	}
	args := []interface{}{"acl", "setuser", a.user}
	for _, c := range AtomicMigrationCommands {
		args = append(args, "+"+c)
	}
	if gerr := a.c.Do(ctx, args...).Err(); gerr != nil {
		return fmt.Errorf("%w (and granting the slot migration commands to %s: %w)", err, a.user, gerr)
	}
	return call()
}

// ParseSlotMigrations reads CLUSTER GETSLOTMIGRATIONS' reply: an array of maps (flat arrays of
// key, value under RESP2).
func ParseSlotMigrations(reply interface{}) ([]SlotMigration, error) {
	list, ok := reply.([]interface{})
	if !ok {
		return nil, fmt.Errorf("unexpected CLUSTER GETSLOTMIGRATIONS reply %T", reply)
	}
	out := make([]SlotMigration, 0, len(list))
	for _, item := range list {
		fields := map[string]string{}
		switch m := item.(type) {
		case []interface{}:
			for i := 0; i+1 < len(m); i += 2 {
				fields[fmt.Sprint(m[i])] = fmt.Sprint(m[i+1])
			}
		case map[interface{}]interface{}:
			for k, v := range m {
				fields[fmt.Sprint(k)] = fmt.Sprint(v)
			}
		default:
			return nil, fmt.Errorf("unexpected CLUSTER GETSLOTMIGRATIONS entry %T", item)
		}
		j := SlotMigration{Name: fields["name"], Operation: fields["operation"], Source: fields["source_node"],
			Target: fields["target_node"], State: fields["state"], Message: fields["message"]}
		if sec, err := strconv.ParseInt(fields["create_time"], 10, 64); err == nil {
			j.Created = time.Unix(sec, 0)
		}
		for _, r := range strings.Fields(fields["slot_ranges"]) {
			lo, hi, _ := strings.Cut(r, "-")
			s, err1 := strconv.Atoi(lo)
			e, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("unexpected slot range %q in CLUSTER GETSLOTMIGRATIONS", r)
			}
			j.Slots = append(j.Slots, topology.SlotRange{Start: s, End: e})
		}
		out = append(out, j)
	}
	return out, nil
}

// readJobs reads GETSLOTMIGRATIONS of the nodes (id -> address), in parallel.
func readJobs(ctx context.Context, f Factory, nodes map[string]string) (map[string][]SlotMigration, error) {
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	out := make([][]SlotMigration, len(ids))
	idx := make([]int, len(ids))
	for i := range idx {
		idx[i] = i
	}
	err := parallel(idx, func(i int) error {
		m := f.For(nodes[ids[i]])
		js, err := m.SlotMigrations(ctx)
		out[i] = js
		return err
	})
	res := map[string][]SlotMigration{}
	for i, id := range ids {
		res[id] = out[i]
	}
	return res, err
}
