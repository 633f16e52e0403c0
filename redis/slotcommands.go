// The slot commands an Admin sends: CLUSTER SETSLOT, the claim of many slots in one
// transaction (ClaimSlots), GETKEYSINSLOT, COUNTKEYSINSLOT, MIGRATE, DUMP and RESET.

package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// SetSlot sends CLUSTER SETSLOT slot IMPORTING|MIGRATING|NODE nodeID, or STABLE.
func (a *admin) SetSlot(ctx context.Context, slot int, state, nodeID string) error {
	args := []interface{}{"cluster", "setslot", slot, state}
	if nodeID != "" {
		args = append(args, nodeID)
	}
	if err := a.c.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("failed to set slot %d %s %s on %s: %w", slot, state, nodeID, a.addr, err)
	}
	return nil
}

// SetSlots sends CLUSTER SETSLOT slot state [nodeID] for every slot in one pipeline: one
// round trip, and the node rewrites its nodes.conf once for all of them (it saves the
// config before it next sleeps, not per command) instead of once per slot. The errors are
// per slot, nil where it succeeded.
func (a *admin) SetSlots(ctx context.Context, slots []int, state, nodeID string) []error {
	cmds := make([]*goredis.Cmd, len(slots))
	_, _ = a.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, slot := range slots {
			args := []interface{}{"cluster", "setslot", slot, state}
			if nodeID != "" {
				args = append(args, nodeID)
			}
			cmds[i] = p.Do(ctx, args...)
		}
		return nil
	})
	errs := make([]error, len(slots))
	for i, c := range cmds {
		if err := c.Err(); err != nil {
			errs[i] = fmt.Errorf("failed to set slot %d %s %s on %s: %w", slots[i], state, nodeID, a.addr, err)
		}
	}
	return errs
}

// ClaimSlots gives slots that this node imports to this node (nodeID is its own ID), the
// target's part of closing a group of slots, with one PONG broadcast instead of one a slot.
//
// CLUSTER SETSLOT NODE of a slot the node imports does two things. It bumps the node's
// config epoch above every epoch the node knows, unless it is there already, so its claim
// beats the source's. And it broadcasts a PONG to every node of the cluster, which walks
// all 16384 slots of it. One broadcast a slot was about a seventh of Redis' CPU while keys
// moved (bench/README.md).
//
// So the claim is one transaction: CLUSTER BUMPEPOCH (the same bump), then SETSLOT STABLE
// and NODE for every slot but the last (STABLE clears IMPORTING: the same claim, without a
// bump or a broadcast), then NODE for the last, whose broadcast carries the whole group.
// MULTI/EXEC matters: Redis runs it at once however its bytes arrive, so no cluster-bus
// message can reach the node between its bump and a claim, and a connection lost before
// EXEC leaves every slot as it was (IMPORTING), never one between its STABLE and its NODE.
// Two things are read first on the same connection, so the transaction cannot fail half
// way (EXEC runs every command even if one fails): the node must be the master nodeID
// (CLUSTER NODES), else SETSLOT NODE could fail after its STABLE; and MULTI goes alone,
// since were it refused the commands after it would run one by one. A node that is not
// that master, or refuses the transaction (an operator user whose ACL rules predate it),
// gets SETSLOT NODE a slot, as before, and so does Valkey (below). The errors are per slot.
func (a *admin) ClaimSlots(ctx context.Context, slots []int, nodeID string) []error {
	if len(slots) <= 1 {
		return a.SetSlots(ctx, slots, "node", nodeID)
	}
	conn := a.c.Conn(ctx)
	for _, h := range a.hooks {
		conn.AddHook(h)
	}
	replies, owner, err := claimInOneTransaction(ctx, conn, slots, nodeID)
	conn.Close() // before the fallback takes a connection of its own
	switch {
	case errors.Is(err, errClaimOneByOne):
		return a.SetSlots(ctx, slots, "node", nodeID)
	case err != nil:
		return a.claimFailed(slots, nodeID, err)
	}
	errs := make([]error, len(slots))
	for j, r := range replies {
		e, failed := r.(error)
		switch {
		case !failed:
		case owner[j] < 0:
			return a.claimFailed(slots, nodeID, fmt.Errorf("CLUSTER BUMPEPOCH: %w", e))
		case errs[owner[j]] == nil:
			errs[owner[j]] = fmt.Errorf("failed to set slot %d node %s on %s: %w", slots[owner[j]], nodeID, a.addr, e)
		}
	}
	return errs
}

// errClaimOneByOne: the node cannot take the claim as one transaction; SETSLOT NODE a
// slot at a time does it.
var errClaimOneByOne = errors.New("claim the slots one by one")

// claimInOneTransaction checks the node may take the claim in one MULTI (it is the master
// nodeID, its SETSLOT does not block, it accepts MULTI), then sends it: BUMPEPOCH, then
// each slot's STABLE (all but the last) and NODE, then EXEC. It returns EXEC's replies and,
// for each, the index of its slot (-1 for BUMPEPOCH); errClaimOneByOne when the node must
// be claimed a slot at a time instead.
func claimInOneTransaction(ctx context.Context, conn *goredis.Conn, slots []int, nodeID string) ([]interface{}, []int, error) {
	nodes := goredis.NewStringCmd(ctx, "cluster", "nodes")
	if err := conn.Process(ctx, nodes); err != nil {
		return nil, nil, err
	}
	if !isMasterNamed(nodes.Val(), nodeID) {
		return nil, nil, errClaimOneByOne
	}
	// Valkey 8 and later make CLUSTER SETSLOT wait for the node's replicas, which inside
	// MULTI trips an assertion and kills the server (Valkey 8.1.1: multi.c:244
	// 'c->flag.blocked == 0', seen in TestServers): there, a slot at a time.
	info := goredis.NewStringCmd(ctx, "info", "server")
	if err := conn.Process(ctx, info); err == nil && topology.ParseServer(info.Val()).SetSlotBlocks() {
		return nil, nil, errClaimOneByOne
	}
	if err := conn.Process(ctx, goredis.NewStatusCmd(ctx, "multi")); err != nil {
		if refusedCommand(err) {
			return nil, nil, errClaimOneByOne
		}
		return nil, nil, err
	}
	owner := []int{-1}
	var exec *goredis.Cmd
	_, _ = conn.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Do(ctx, "cluster", "bumpepoch")
		for i, slot := range slots {
			if i < len(slots)-1 {
				p.Do(ctx, "cluster", "setslot", slot, "stable")
				owner = append(owner, i)
			}
			p.Do(ctx, "cluster", "setslot", slot, "node", nodeID)
			owner = append(owner, i)
		}
		exec = p.Do(ctx, "exec")
		return nil
	})
	replies, err := exec.Slice()
	switch {
	case err != nil && refusedCommand(err):
		// EXECABORT: a command was refused when queued, and Redis ran none of them.
		return nil, nil, errClaimOneByOne
	case err != nil:
		return nil, nil, err
	case len(replies) != len(owner):
		return nil, nil, fmt.Errorf("EXEC answered %d replies for %d commands", len(replies), len(owner))
	}
	return replies, owner, nil
}

// claimFailed is err for every slot of a claim.
func (a *admin) claimFailed(slots []int, nodeID string, err error) []error {
	errs := make([]error, len(slots))
	for i := range errs {
		errs[i] = fmt.Errorf("failed to set slot %d node %s on %s: %w", slots[i], nodeID, a.addr, err)
	}
	return errs
}

// isMasterNamed: the CLUSTER NODES text says this node ("myself") is the master id.
func isMasterNamed(clusterNodes, id string) bool {
	nodes, err := topology.ParseClusterNodes(clusterNodes)
	if err != nil {
		return false
	}
	for _, n := range nodes {
		if n.Myself {
			return n.ID == id && n.Master
		}
	}
	return false
}

// refusedCommand: Redis refused a command itself (NOPERM, unknown or renamed), or
// discarded a transaction because it refused one of its commands when queued (EXECABORT),
// before running anything.
func refusedCommand(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "EXECABORT") || strings.HasPrefix(msg, "NOPERM") || strings.HasPrefix(msg, "ERR unknown")
}

// GetKeysInSlots lists up to count keys of each slot, in one pipeline.
func (a *admin) GetKeysInSlots(ctx context.Context, slots []int, count int) ([][]string, error) {
	cmds := make([]*goredis.StringSliceCmd, len(slots))
	_, _ = a.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, slot := range slots {
			cmds[i] = p.ClusterGetKeysInSlot(ctx, slot, count)
		}
		return nil
	})
	out := make([][]string, len(slots))
	for i, c := range cmds {
		keys, err := c.Result()
		if err != nil {
			return nil, fmt.Errorf("failed to list keys of slot %d on %s: %w", slots[i], a.addr, err)
		}
		out[i] = keys
	}
	return out, nil
}

// firstErr is the first non-nil error of errs.
func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// GetKeysInSlot lists up to count keys of the slot held by this node.
func (a *admin) GetKeysInSlot(ctx context.Context, slot, count int) ([]string, error) {
	keys, err := a.c.ClusterGetKeysInSlot(ctx, slot, count).Result()
	if err != nil {
		return nil, fmt.Errorf("failed to list keys of slot %d on %s: %w", slot, a.addr, err)
	}
	return keys, nil
}

// Migrate moves keys to the node at targetAddr (MIGRATE host port "" 0 timeout [REPLACE]
// [AUTH2 user password | AUTH password] KEYS ...): the target is asked as the operator's
// own user when the operator has one, as the default user otherwise. The client waits
// callTimeout of timeout, and at least of DefaultMigrateTimeout, for the reply, longer than
// the pool's read timeout, so it does not give up on a MIGRATE that Redis is still running:
// a caller that left would send its next command to a node still busy with the last one. A
// quick try (QuickMigrateTimeout) may queue on the source behind a sibling stream's
// MIGRATE with the full timeout, hence the floor.
func (a *admin) Migrate(ctx context.Context, targetAddr string, keys []string, replace bool, timeout time.Duration) error {
	host, port, err := net.SplitHostPort(targetAddr)
	if err != nil {
		return fmt.Errorf("failed to migrate keys to %s: %w", targetAddr, err)
	}
	ms := timeout.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	args := []interface{}{"migrate", host, port, "", 0, ms}
	if replace {
		args = append(args, "replace")
	}
	switch {
	case a.user != "" && a.password != "":
		args = append(args, "auth2", a.user, a.password)
	case a.password != "":
		args = append(args, "auth", a.password)
	}
	args = append(args, "keys")
	for _, k := range keys {
		args = append(args, k)
	}
	if err := a.c.WithTimeout(callTimeout(max(timeout, DefaultMigrateTimeout))).Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("failed to migrate %d keys from %s to %s: %w", len(keys), a.addr, targetAddr, err)
	}
	return nil
}

// Dump is DUMP key: the serialized value, to compare two copies of a key; "" when the
// key does not exist. ASKING goes first on the same connection, so a node importing the
// slot answers for a key it holds instead of redirecting.
func (a *admin) Dump(ctx context.Context, key string) (string, error) {
	var dump *goredis.StringCmd
	_, _ = a.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Do(ctx, "asking")
		dump = p.Dump(ctx, key)
		return nil
	})
	v, err := dump.Result()
	if errors.Is(err, goredis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("failed to dump key %q on %s: %w", key, a.addr, err)
	}
	return v, nil
}

// CountKeysInSlot is CLUSTER COUNTKEYSINSLOT: the keys of the slot this node holds,
// whether or not it owns the slot.
func (a *admin) CountKeysInSlot(ctx context.Context, slot int) (int64, error) {
	n, err := a.c.ClusterCountKeysInSlot(ctx, slot).Result()
	if err != nil {
		return 0, fmt.Errorf("failed to count keys of slot %d on %s: %w", slot, a.addr, err)
	}
	return n, nil
}

// ClusterReset makes a node that left the cluster forget every other node (soft reset),
// so it cannot gossip them back to the members that forgot it.
func (a *admin) ClusterReset(ctx context.Context) error {
	if err := a.c.Do(ctx, "cluster", "reset", "soft").Err(); err != nil {
		return fmt.Errorf("failed to reset cluster state of %s: %w", a.addr, err)
	}
	return nil
}
