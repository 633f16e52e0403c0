package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// FixOpenSlots finishes every slot that a master marks MIGRATING or IMPORTING, whoever
// opened it (an interrupted step of the operator, a half-done `redis-cli --cluster
// reshard`) and whatever happened since (a failover of the source or the target), the way
// `redis-cli --cluster fix` does:
//
//   - the owner is the one master that claims the slot for itself; after a failover that
//     is the promoted replica. A slot no master claims, or two claim, is left for Redis'
//     own failover or epoch resolution and tried again at the next step;
//   - keys of the slot found (CLUSTER COUNTKEYSINSLOT) on masters that do not own it are
//     never left there: the move is resumed from the owner to the master that holds them
//     (the target the owner migrates to when it still imports or holds keys, else the
//     holder that imports it, else the holder with the most keys), and keys on any other
//     non-owner are moved to the owner first;
//   - a marker naming a node that is no longer a live master, or a move that never got a
//     key across, is closed with SETSLOT STABLE; a resumed move ends with SETSLOT NODE on
//     every master.
//
// Keys move before markers close, so a step cut off anywhere leaves a marker for the next
// one to find. Nothing is done unless every member answered. A stuck key is reported as a
// *StuckKeyError after the other slots were tried; ErrBudgetSpent ends the step early.
func FixOpenSlots(ctx context.Context, f Factory, st *topology.ClusterState, pipeline int) (ScaleProgress, error) {
	return fixOpenSlots(ctx, f, st, MoveOptions{Pipeline: pipeline})
}

// FixOpenSlotsWith is FixOpenSlots with every MoveOptions (the node timeout in force).
func FixOpenSlotsWith(ctx context.Context, f Factory, st *topology.ClusterState, opts MoveOptions) (ScaleProgress, error) {
	return fixOpenSlots(ctx, f, st, opts)
}

func fixOpenSlots(ctx context.Context, f Factory, st *topology.ClusterState, opts MoveOptions) (ScaleProgress, error) {
	prog := ScaleProgress{Phase: PhaseFinishingSlots}
	if !st.AllReachable() {
		prog.Phase = topology.PhaseWaitingForPods
		return prog, nil
	}
	var stuck, failed error
	for _, slot := range markedSlots(st) {
		fx := &slotFix{f: f, st: st, slot: slot, opts: opts}
		err := fx.run(ctx)
		prog.MovedKeys += fx.keys
		prog.Actions = append(prog.Actions, fx.actions...)
		switch {
		case fx.done:
			prog.MovedSlots++
		default:
			prog.Remaining++
		}
		var sk *StuckKeyError
		if errors.As(err, &sk) {
			// Other slots need not wait for this key.
			if stuck == nil {
				stuck = err
			}
			continue
		}
		if err != nil && failed == nil {
			// The other slots are still tried: after a failover of the source of a group of
			// open slots, the target maps every slot it imports to nobody and reports the
			// cluster down, so no key moves to it until the slots without keys to move
			// (further on) are closed and it learns their owner.
			failed = fmt.Errorf("failed to finish open slot %d: %w", slot, err)
		}
	}
	if failed != nil {
		return prog, failed
	}
	return prog, stuck
}

// markedSlots are the slots some master marks MIGRATING or IMPORTING, in order. A
// replica's markers are not the operator's to close (topology's NoOpenSlots says why).
func markedSlots(st *topology.ClusterState) []int {
	seen := map[int]bool{}
	for i := range st.Members {
		self := st.Members[i].Self()
		if self == nil || !self.Master {
			continue
		}
		for s := range self.Migrating {
			seen[s] = true
		}
		for s := range self.Importing {
			seen[s] = true
		}
	}
	out := make([]int, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}

// slotFix finishes one slot.
type slotFix struct {
	f    Factory
	st   *topology.ClusterState
	slot int
	opts MoveOptions

	masters []int         // member indexes of the masters
	owner   int           // member index of the owner
	keys    int           // keys moved
	counts  map[int]int64 // keys of the slot held by each master but the owner
	actions []topology.Action
	done    bool
}

func (fx *slotFix) self(i int) *topology.Node { return fx.st.Members[i].Self() }

func (fx *slotFix) pod(i int) string { return fx.st.Members[i].Pod }

func (fx *slotFix) run(ctx context.Context) error {
	var claims []int
	for i := range fx.st.Members {
		if self := fx.self(i); self.Master {
			fx.masters = append(fx.masters, i)
			if self.Slots.Contains(fx.slot) {
				claims = append(claims, i)
			}
		}
	}
	if len(claims) != 1 {
		// No owner: the source failed and no replica took over yet; two: a failover or
		// a SETSLOT NODE is still propagating. Redis settles both; acting now could
		// pick the wrong side.
		return nil
	}
	fx.owner = claims[0]
	if err := fx.countKeys(ctx); err != nil {
		return err
	}
	var holders []int
	for _, i := range fx.masters {
		if fx.counts[i] > 0 {
			holders = append(holders, i)
		}
	}
	target := fx.chooseTarget(holders)
	if !fx.settled(append(holders, fx.owner, target)) {
		return nil
	}
	for _, i := range fx.masters {
		var err error
		switch {
		case i == fx.owner || i == target:
		case fx.counts[i] > 0:
			err = fx.giveBack(ctx, i)
		case fx.marked(i):
			err = fx.stable(ctx, i, "no key of it there")
		}
		if err != nil {
			return err
		}
	}
	if target < 0 {
		fx.done = true
		if fx.marked(fx.owner) {
			return fx.stable(ctx, fx.owner, "no other master holds a key of it")
		}
		return nil
	}
	return fx.resume(ctx, target)
}

// countKeys asks every master but the owner how many keys of the slot it holds.
func (fx *slotFix) countKeys(ctx context.Context) error {
	fx.counts = map[int]int64{}
	for _, i := range fx.masters {
		if i == fx.owner {
			continue
		}
		var err error
		if fx.counts[i], err = fx.f.For(fx.st.Members[i].Addr).CountKeysInSlot(ctx, fx.slot); err != nil {
			return err
		}
	}
	return nil
}

// chooseTarget is the master the move goes on to, -1 for none: the one the owner marks
// as its target when that one is a master that imports the slot or holds keys of it;
// else the holder that imports it, then the holder with the most keys. After a failover
// of the target, its promoted replica holds the keys moved so far without a marker, and
// is chosen.
func (fx *slotFix) chooseTarget(holders []int) int {
	if to := fx.self(fx.owner).Migrating[fx.slot]; to != "" {
		for _, i := range fx.masters {
			if fx.self(i).ID == to && i != fx.owner && (fx.self(i).Importing[fx.slot] != "" || fx.counts[i] > 0) {
				return i
			}
		}
	}
	best := -1
	for _, h := range holders {
		if best < 0 || fx.better(h, best) {
			best = h
		}
	}
	return best
}

func (fx *slotFix) better(a, b int) bool {
	ia, ib := fx.self(a).Importing[fx.slot] != "", fx.self(b).Importing[fx.slot] != ""
	if ia != ib {
		return ia
	}
	return fx.counts[a] > fx.counts[b]
}

// settled reports whether every member sees each involved node (-1 ignored) as a
// master, known, not failing: SETSLOT refuses a target that is not a master in the
// receiving node's view, and a failing one is about to change.
func (fx *slotFix) settled(involved []int) bool {
	for _, i := range involved {
		if i < 0 {
			continue
		}
		id := fx.self(i).ID
		for m := range fx.st.Members {
			n := fx.st.Members[m].Find(id)
			if n == nil || !n.Master || n.Fail || n.PFail || n.Handshake || n.NoAddr {
				return false
			}
		}
	}
	return true
}

func (fx *slotFix) marked(i int) bool {
	self := fx.self(i)
	return self.Migrating[fx.slot] != "" || self.Importing[fx.slot] != ""
}

// giveBack moves the keys a non-owner holds to the owner, then closes its marker. MIGRATE
// only works on a node for a slot that is open there, so the slot is marked importing
// from the owner first. A key the owner also has is replaced only when the values match.
func (fx *slotFix) giveBack(ctx context.Context, h int) error {
	hm := fx.f.For(fx.st.Members[h].Addr)
	om := fx.f.For(fx.st.Members[fx.owner].Addr)
	owner := fx.st.Members[fx.owner]
	km := keyMover{s: hm, src: fx.st.Members[h].Addr, dst: owner.Addr, slot: fx.slot, timeout: fx.opts.timeout(),
		owner: om, stuck: fx.f.backoff(), asking: true}
	if err := km.stuck.check(km.src, km.dst, fx.slot); err != nil {
		return err
	}
	if err := hm.SetSlot(ctx, fx.slot, "importing", owner.ID()); err != nil {
		return err
	}
	n, err := km.drain(ctx, fx.opts)
	fx.keys += n
	if err != nil {
		return err
	}
	fx.counts[h] = 0
	fx.report(h, "Slot %d: moved %d keys from %s, which does not own it, to its owner %s", fx.slot, n, fx.pod(h), fx.pod(fx.owner))
	return fx.stable(ctx, h, "its keys are back with the owner")
}

// resume finishes the move from the owner to target with MigrateSlot, which marks both
// sides again (replacing markers that name a node that is no longer a master), moves the
// rest and gives the slot to target on every master.
func (fx *slotFix) resume(ctx context.Context, target int) error {
	if fx.self(fx.owner).Importing[fx.slot] != "" {
		// SETSLOT NODE on the owner would leave this one behind.
		if err := fx.stable(ctx, fx.owner, "it owns the slot"); err != nil {
			return err
		}
	}
	src, dst := fx.st.Members[fx.owner], fx.st.Members[target]
	if n := dst.Find(src.ID()); n == nil || !n.Slots.Contains(fx.slot) {
		// A node importing a slot ignores news of its owner: after a failover of the
		// source it still maps the slot to the old master, now a replica, or to
		// nobody, and refuses the keys (CLUSTERDOWN Hash slot not served).
		if err := fx.setNode(ctx, target, fx.owner); err != nil {
			return err
		}
	}
	var others []string
	for _, i := range fx.masters {
		if i != fx.owner && i != target {
			others = append(others, fx.st.Members[i].Addr)
		}
	}
	n, err := MigrateSlotWith(ctx, fx.f, fx.slot, MasterAddr{ID: src.ID(), Addr: src.Addr}, MasterAddr{ID: dst.ID(), Addr: dst.Addr}, others, fx.opts)
	fx.keys += n
	if err != nil {
		return err
	}
	fx.done = true
	fx.report(target, "Slot %d: moved the remaining %d keys from %s to %s, which held %d of them, and gave it the slot",
		fx.slot, n, fx.pod(fx.owner), fx.pod(target), fx.counts[target])
	return nil
}

// setNode tells member i that member owner owns the slot; its markers stay as they are.
func (fx *slotFix) setNode(ctx context.Context, i, owner int) error {
	m := fx.f.For(fx.st.Members[i].Addr)
	if err := m.SetSlot(ctx, fx.slot, "node", fx.st.Members[owner].ID()); err != nil {
		return err
	}
	fx.report(i, "Slot %d: told %s that %s owns it", fx.slot, fx.pod(i), fx.pod(owner))
	return nil
}

// stable closes the slot's markers on member i.
func (fx *slotFix) stable(ctx context.Context, i int, why string) error {
	m := fx.f.For(fx.st.Members[i].Addr)
	if err := m.SetSlot(ctx, fx.slot, "stable", ""); err != nil {
		return err
	}
	fx.report(i, "Slot %d: closed its marker on %s (%s)", fx.slot, fx.pod(i), why)
	return nil
}

func (fx *slotFix) report(i int, format string, args ...interface{}) {
	fx.actions = append(fx.actions, topology.Action{Kind: topology.ActionFixSlot, Member: i, Message: fmt.Sprintf(format, args...)})
}
