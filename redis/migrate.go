package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// slotMover is what migrating a slot needs from a node, beyond Admin: the admin of a
// Factory has it; fakes of Admin need not.
type slotMover interface {
	SetSlot(ctx context.Context, slot int, state, nodeID string) error
	GetKeysInSlot(ctx context.Context, slot, count int) ([]string, error)
	Migrate(ctx context.Context, targetAddr string, keys []string, replace bool, timeout time.Duration) error
	ClusterReset(ctx context.Context) error
}

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

// GetKeysInSlot lists up to count keys of the slot held by this node.
func (a *admin) GetKeysInSlot(ctx context.Context, slot, count int) ([]string, error) {
	keys, err := a.c.ClusterGetKeysInSlot(ctx, slot, count).Result()
	if err != nil {
		return nil, fmt.Errorf("failed to list keys of slot %d on %s: %w", slot, a.addr, err)
	}
	return keys, nil
}

// Migrate moves keys to the node at targetAddr (MIGRATE host port "" 0 timeout [REPLACE]
// [AUTH password] KEYS ...). AUTH with the password alone authenticates as the default
// user, as the operator's own connections do.
func (a *admin) Migrate(ctx context.Context, targetAddr string, keys []string, replace bool, timeout time.Duration) error {
	host, port, err := net.SplitHostPort(targetAddr)
	if err != nil {
		return fmt.Errorf("failed to migrate keys to %s: %w", targetAddr, err)
	}
	args := []interface{}{"migrate", host, port, "", 0, timeout.Milliseconds()}
	if replace {
		args = append(args, "replace")
	}
	if a.password != "" {
		args = append(args, "auth", a.password)
	}
	args = append(args, "keys")
	for _, k := range keys {
		args = append(args, k)
	}
	if err := a.c.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("failed to migrate %d keys from %s to %s: %w", len(keys), a.addr, targetAddr, err)
	}
	return nil
}

// ClusterReset makes a node that left the cluster forget every other node (soft reset),
// so it cannot gossip them back to the members that forgot it.
func (a *admin) ClusterReset(ctx context.Context) error {
	if err := a.c.Do(ctx, "cluster", "reset", "soft").Err(); err != nil {
		return fmt.Errorf("failed to reset cluster state of %s: %w", a.addr, err)
	}
	return nil
}

func mover(a Admin) (slotMover, error) {
	m, ok := a.(slotMover)
	if !ok {
		return nil, errors.New("failed to migrate slots: this Admin cannot move slots")
	}
	return m, nil
}

// migrateTimeout is MIGRATE's own I/O timeout for one batch.
const migrateTimeout = 5 * time.Second

// MigrateSlot moves one slot and its keys from src to dst (node IDs srcID, dstID) the way
// redis-cli does: IMPORTING on the target, MIGRATING on the source, batches of `pipeline`
// keys with MIGRATE until the source has none left, then SETSLOT NODE on the target, the
// source and every other master (others). It is idempotent: markers already set are set
// again, keys already moved are not listed any more, and a key left on both sides by an
// interrupted MIGRATE is replaced on the target, so a half-done slot is finished, not
// restarted. A slot the target already owns only has its markers closed.
func MigrateSlot(ctx context.Context, f Factory, slot int, src, dst MasterAddr, others []string, pipeline int) (int, error) {
	s, err := mover(f.For(src.Addr))
	if err != nil {
		return 0, err
	}
	d, err := mover(f.For(dst.Addr))
	if err != nil {
		return 0, err
	}
	if err := d.SetSlot(ctx, slot, "importing", src.ID); err != nil {
		return 0, err
	}
	if err := s.SetSlot(ctx, slot, "migrating", dst.ID); err != nil {
		return 0, err
	}
	moved := 0
	for {
		keys, err := s.GetKeysInSlot(ctx, slot, pipeline)
		if err != nil {
			return moved, err
		}
		if len(keys) == 0 {
			break
		}
		err = s.Migrate(ctx, dst.Addr, keys, false, migrateTimeout)
		if err != nil && strings.Contains(err.Error(), "BUSYKEY") {
			// An earlier MIGRATE copied the key and was cut off before deleting it here:
			// the source's copy is the current one.
			err = s.Migrate(ctx, dst.Addr, keys, true, migrateTimeout)
		}
		if err != nil {
			return moved, err
		}
		moved += len(keys)
	}
	return moved, closeSlot(ctx, f, slot, dst, src.Addr, others)
}

// closeSlot gives the slot to dst on dst first (which bumps its epoch and clears its
// IMPORTING), then on the source and the other masters, so no node keeps an open marker.
func closeSlot(ctx context.Context, f Factory, slot int, dst MasterAddr, src string, others []string) error {
	for _, addr := range append([]string{dst.Addr, src}, others...) {
		if addr == "" {
			continue
		}
		m, err := mover(f.For(addr))
		if err != nil {
			return err
		}
		err = m.SetSlot(ctx, slot, "node", dst.ID)
		switch {
		case err == nil:
		case addr != src && addr != dst.Addr:
			// Another master that does not know dst yet learns the owner by gossip.
		case addr == src && strings.Contains(err.Error(), "only with masters"):
			// The source gave away its last slot and, hearing dst's newer epoch, already
			// turned itself into dst's replica (cluster-allow-replica-migration): the slot
			// is closed on it.
		default:
			return err
		}
	}
	return nil
}

// MasterAddr names a master by node ID and address.
type MasterAddr struct {
	ID, Addr string
}
