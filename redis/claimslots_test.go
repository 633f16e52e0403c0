package redis

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// openGroup forms 3 masters, writes 20 keys in each of n slots of the first, opens those
// slots to the second and moves every key: the state in which the target claims them
// (closeSlots). It returns the source and the target.
func openGroup(t *testing.T, n int) (members []topology.Member, f Factory, slots []int, keys []string, src, dst MasterAddr) {
	t.Helper()
	members, f, _, st, _ := formRecorded(t, 3, time.Minute)
	src = MasterAddr{ID: st.Members[0].ID(), Addr: members[0].Addr}
	dst = MasterAddr{ID: st.Members[1].ID(), Addr: members[1].Addr}
	start := st.Members[0].Self().Slots[0].Start
	for i := range n {
		slots = append(slots, start+i)
		keys = append(keys, slotKeyNames(tagFor(start+i), 20)...)
	}
	putKeys(t, f, members, keys)
	ctx := ctxFor(t, 30*time.Second)
	s, d := f.For(src.Addr), f.For(dst.Addr)
	if err := firstErr(d.SetSlots(ctx, slots, "importing", src.ID)); err != nil {
		t.Fatal(err)
	}
	if err := firstErr(s.SetSlots(ctx, slots, "migrating", dst.ID)); err != nil {
		t.Fatal(err)
	}
	for _, slot := range slots {
		k, err := s.GetKeysInSlot(ctx, slot, 100)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx, dst.Addr, k, false, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return members, f, slots, keys, src, dst
}

func pongsSent(t *testing.T, f Factory, addr string) int {
	t.Helper()
	info, err := f.For(addr).ClusterInfo(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(info.Fields["cluster_stats_messages_pong_sent"])
	if err != nil {
		t.Fatalf("cluster_stats_messages_pong_sent of %s: %v", addr, err)
	}
	return n
}

// setslotCalls is how many CLUSTER SETSLOT the node at addr has run (INFO commandstats).
func setslotCalls(t *testing.T, addr string) int {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	text, err := c.Info(ctxFor(t, 5*time.Second), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_cluster|setslot:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// A group of slots closes on its target with one PONG broadcast, not one a slot, and
// with the same outcome: the target's epoch the greatest, every slot and key its own in
// every node's view.
func TestMigrateSlotsClaimsAGroupWithOneBroadcast(t *testing.T) {
	t.Parallel()
	members, f, _, st, _ := formRecorded(t, 3, time.Minute)
	start := st.Members[0].Self().Slots[0].Start
	slots := make([]int, 32)
	var keys []string
	for i := range slots {
		slots[i] = start + i
		keys = append(keys, slotKeyNames(tagFor(slots[i]), 20)...)
	}
	putKeys(t, f, members, keys)
	src := MasterAddr{ID: st.Members[0].ID(), Addr: members[0].Addr}
	dst := MasterAddr{ID: st.Members[1].ID(), Addr: members[1].Addr}

	before := pongsSent(t, f, dst.Addr)
	moved, err := MigrateSlots(ctxFor(t, time.Minute), f, slots, src, dst, []string{members[2].Addr}, MoveOptions{Pipeline: 100})
	if err != nil {
		t.Fatal(err)
	}
	sent := pongsSent(t, f, dst.Addr) - before
	if moved != len(keys) {
		t.Fatalf("moved %d keys, want %d", moved, len(keys))
	}
	// One broadcast a slot would be 32 × 2 PONGs; one is 2, plus what the target
	// answers to pings meanwhile.
	if sent >= len(slots) {
		t.Errorf("the target sent %d PONGs while it claimed %d slots, want one broadcast", sent, len(slots))
	}
	info, err := f.For(dst.Addr).ClusterInfo(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if info.MyEpoch != info.CurrentEpoch {
		t.Errorf("target's epoch %d, cluster's current epoch %d: want the target's the greatest", info.MyEpoch, info.CurrentEpoch)
	}
	waitOwned(t, f, members, slots, dst.ID)
	for _, slot := range slots {
		if n := countOn(t, f, dst.Addr, slot); n != 20 {
			t.Fatalf("slot %d on the target: %d keys, want 20", slot, n)
		}
	}
}

// A connection lost in the middle of the claim leaves every slot as it was, IMPORTING on
// the target: never one that the target neither imports nor owns while it holds its keys
// (which a failover of the source would leave with no marker for FixOpenSlots to find).
// Then the claim is made again, and nothing is lost.
func TestClaimSlotsCutMidwayLeavesEverySlotImporting(t *testing.T) {
	t.Parallel()
	members, f, slots, keys, _, dst := openGroup(t, 8)

	p := cutAfterThird(t, dst.Addr, "stable")
	errs := f.For(p).ClaimSlots(ctxFor(t, 10*time.Second), slots, dst.ID)
	if firstErr(errs) == nil {
		t.Fatal("a claim whose connection was cut reported no error")
	}
	time.Sleep(100 * time.Millisecond) // what reached the target has been read
	st, err := Observe(ctxFor(t, 10*time.Second), f, members)
	if err != nil {
		t.Fatal(err)
	}
	self := st.Members[1].Self()
	for _, slot := range slots {
		if self.Slots.Contains(slot) || self.Importing[slot] == "" {
			t.Errorf("slot %d after the cut: owned %v, importing %q; want still importing", slot, self.Slots.Contains(slot), self.Importing[slot])
		}
	}
	if err := firstErr(f.For(dst.Addr).ClaimSlots(ctxFor(t, 10*time.Second), slots, dst.ID)); err != nil {
		t.Fatal(err)
	}
	if err := firstErr(f.For(members[0].Addr).SetSlots(ctxFor(t, 10*time.Second), slots, "node", dst.ID)); err != nil {
		t.Fatal(err)
	}
	waitOwned(t, f, members, slots, dst.ID)
	if n := lostKeys(t, f, members, keys); n > 0 {
		t.Fatalf("%d of %d keys lost", n, len(keys))
	}
}

// An operator user whose ACL rules predate the transaction (no MULTI, EXEC or BUMPEPOCH)
// gets SETSLOT NODE a slot, as before, and none of the transaction's commands runs
// outside it: the target runs exactly one SETSLOT a slot.
func TestClaimSlotsWithoutTransactionRightsClaimsSlotBySlot(t *testing.T) {
	t.Parallel()
	members, f, slots, keys, src, dst := openGroup(t, 8)

	admin := goredis.NewClient(&goredis.Options{Addr: dst.Addr})
	defer admin.Close()
	rules := []interface{}{"acl", "setuser", "old", "on", ">pw", "~*", "-@all"}
	for _, c := range OperatorCommands {
		if c != "multi" && c != "exec" && c != "cluster|bumpepoch" {
			rules = append(rules, "+"+c)
		}
	}
	if err := admin.Do(ctxFor(t, 5*time.Second), rules...).Err(); err != nil {
		t.Fatal(err)
	}
	old := newFactory(t, Options{User: "old", Password: "pw"})
	calls := setslotCalls(t, dst.Addr)
	if err := firstErr(old.For(dst.Addr).ClaimSlots(ctxFor(t, 10*time.Second), slots, dst.ID)); err != nil {
		t.Fatal(err)
	}
	if got := setslotCalls(t, dst.Addr) - calls; got != len(slots) {
		t.Errorf("the target ran %d SETSLOTs for %d slots, want one a slot", got, len(slots))
	}
	if err := firstErr(f.For(src.Addr).SetSlots(ctxFor(t, 10*time.Second), slots, "node", dst.ID)); err != nil {
		t.Fatal(err)
	}
	waitOwned(t, f, members, slots, dst.ID)
	if n := lostKeys(t, f, members, keys); n > 0 {
		t.Fatalf("%d of %d keys lost", n, len(keys))
	}
}

// cutAfterThird is a proxy to upstream that forwards commands one by one and closes both
// connections right after forwarding the third CLUSTER SETSLOT … state.
func cutAfterThird(t *testing.T, upstream, state string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	seen := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", upstream)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(c, u) }()
				r := bufio.NewReader(c)
				for {
					raw, args, err := readCommand(r)
					if err != nil {
						return
					}
					if _, err := u.Write(raw); err != nil {
						return
					}
					if len(args) >= 4 && strings.EqualFold(args[1], "setslot") && strings.EqualFold(args[3], state) {
						mu.Lock()
						seen++
						cut := seen == 3
						mu.Unlock()
						if cut {
							return
						}
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// readCommand reads one RESP array of bulk strings: its bytes and its arguments.
func readCommand(r *bufio.Reader) ([]byte, []string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, nil, err
	}
	raw := []byte(line)
	n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	var args []string
	for range n {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return nil, nil, err
		}
		size, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(hdr, "$")))
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, nil, err
		}
		raw = append(append(raw, hdr...), buf...)
		args = append(args, string(buf[:size]))
	}
	return raw, args, nil
}

// waitOwned waits until every member maps every slot to the node owner.
func waitOwned(t *testing.T, f Factory, members []topology.Member, slots []int, owner string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := Observe(ctxFor(t, 5*time.Second), f, members)
		wrong := ""
		for i := range members {
			if err != nil {
				break
			}
			for _, slot := range slots {
				if o := ownerIn(&st.Members[i], slot); o != owner {
					wrong = members[i].Addr + " maps slot " + strconv.Itoa(slot) + " to " + o
				}
			}
		}
		if err == nil && wrong == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots not all owned by %s: %s %v", owner, wrong, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ownerIn is the node that member's view gives slot to, "" for none.
func ownerIn(m *topology.MemberState, slot int) string {
	for _, n := range m.Nodes {
		if n.Master && n.Slots.Contains(slot) {
			return n.ID
		}
	}
	return ""
}

// The transaction's own CLUSTER BUMPEPOCH makes the claim beat the source's, whatever the
// group's slots: here the first and the last are the target's already and the others
// lose IMPORTING to STABLE, so no SETSLOT NODE bumps, and the source's epoch is above
// the target's before the claim.
func TestClaimSlotsBumpsTheEpochWhateverItsSlots(t *testing.T) {
	t.Parallel()
	members, f, _, st, _ := formRecorded(t, 3, time.Minute)
	src, dst := st.Members[0], st.Members[1]
	ctx := ctxFor(t, 30*time.Second)
	raw := goredis.NewClient(&goredis.Options{Addr: members[0].Addr})
	defer raw.Close()
	if err := raw.Do(ctx, "cluster", "bumpepoch").Err(); err != nil {
		t.Fatal(err)
	}
	waitEpochKnown(t, f, members, 1, 0)

	own := dst.Self().Slots[0].Start
	moving := []int{src.Self().Slots[0].Start, src.Self().Slots[0].Start + 1}
	slots := []int{own, moving[0], moving[1], own + 1}
	if err := firstErr(f.For(members[1].Addr).SetSlots(ctx, moving, "importing", src.ID())); err != nil {
		t.Fatal(err)
	}
	if err := firstErr(f.For(members[0].Addr).SetSlots(ctx, moving, "migrating", dst.ID())); err != nil {
		t.Fatal(err)
	}
	if err := firstErr(f.For(members[1].Addr).ClaimSlots(ctx, slots, dst.ID())); err != nil {
		t.Fatal(err)
	}
	after, err := Observe(ctx, f, members)
	if err != nil {
		t.Fatal(err)
	}
	srcEpoch := after.Members[0].Self().ConfigEpoch
	info := after.Members[1].Info
	if info.MyEpoch <= srcEpoch || info.MyEpoch != info.CurrentEpoch {
		t.Errorf("target's epoch %d after its claim, source's %d, current %d: want the target's the greatest", info.MyEpoch, srcEpoch, info.CurrentEpoch)
	}
	if err := firstErr(f.For(members[0].Addr).SetSlots(ctx, moving, "node", dst.ID())); err != nil {
		t.Fatal(err)
	}
	waitOwned(t, f, members, slots, dst.ID())
}

// A claim for a node ID that is not the target's own (a stale ID) is not made in one
// transaction, where STABLE would clear a slot's IMPORTING before its NODE failed or gave
// the slot away: SETSLOT NODE a slot, as before, and every slot is still imported.
func TestClaimSlotsForAnotherNodeIDKeepsImporting(t *testing.T) {
	t.Parallel()
	members, f, slots, keys, src, dst := openGroup(t, 4)

	_ = f.For(dst.Addr).ClaimSlots(ctxFor(t, 10*time.Second), slots, src.ID)
	st, err := Observe(ctxFor(t, 10*time.Second), f, members)
	if err != nil {
		t.Fatal(err)
	}
	self := st.Members[1].Self()
	for _, slot := range slots {
		if self.Importing[slot] == "" {
			t.Errorf("slot %d no longer imported by the target after a claim for another node ID", slot)
		}
		if n := countOn(t, f, dst.Addr, slot); n != 20 {
			t.Errorf("slot %d on the target: %d keys, want 20", slot, n)
		}
	}
	if err := firstErr(f.For(dst.Addr).ClaimSlots(ctxFor(t, 10*time.Second), slots, dst.ID)); err != nil {
		t.Fatal(err)
	}
	if err := firstErr(f.For(src.Addr).SetSlots(ctxFor(t, 10*time.Second), slots, "node", dst.ID)); err != nil {
		t.Fatal(err)
	}
	waitOwned(t, f, members, slots, dst.ID)
	if n := lostKeys(t, f, members, keys); n > 0 {
		t.Fatalf("%d of %d keys lost", n, len(keys))
	}
}

// waitEpochKnown waits until the member at index i knows the config epoch the node id
// (the member at index j) has.
func waitEpochKnown(t *testing.T, f Factory, members []topology.Member, i, j int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := Observe(ctxFor(t, 5*time.Second), f, members)
		if err == nil {
			own := st.Members[j].Self()
			if seen := st.Members[i].Find(own.ID); seen != nil && seen.ConfigEpoch == own.ConfigEpoch {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never learned the config epoch of %s: %v", members[i].Addr, members[j].Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
