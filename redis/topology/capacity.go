package topology

import (
	"fmt"
	"strconv"
	"strings"
)

// CapacityHeadroom is the share of a master's maxmemory a resize leaves free: writes go on
// while slots move, a key's size varies from the average of its slot, and used_memory
// moves with fragmentation and client buffers. 20% covers that without refusing the
// common case of masters half full.
const CapacityHeadroom = 0.20

// Memory is the part of INFO memory the capacity check reads, in bytes.
type Memory struct {
	// Used is used_memory: what maxmemory is compared with.
	Used int64
	// Dataset is used_memory_dataset: the keys and values alone, what moves with the slots.
	Dataset int64
	// NotCounted is mem_not_counted_for_evict: replica output buffers and the AOF
	// buffers, which Redis leaves out when it compares used_memory with maxmemory. A
	// master receiving keys fast buffers their RESTOREs for its replica for a moment.
	NotCounted int64
	// MaxMemory is maxmemory; 0 means unlimited.
	MaxMemory int64
	// Policy is maxmemory-policy (noeviction, allkeys-lru, ...).
	Policy string
}

// ParseMemory parses the "key:value" lines of INFO memory.
func ParseMemory(text string) (Memory, error) {
	var m Memory
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "used_memory":
			dst = &m.Used
		case "used_memory_dataset":
			dst = &m.Dataset
		case "maxmemory":
			dst = &m.MaxMemory
		case "mem_not_counted_for_evict":
			dst = &m.NotCounted
		case "maxmemory_policy":
			m.Policy = value
			continue
		default:
			continue
		}
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("failed to parse INFO memory %s: %w", key, err)
		}
		*dst, seen[key] = n, true
	}
	for _, k := range []string{"used_memory", "used_memory_dataset", "maxmemory"} {
		if !seen[k] {
			return Memory{}, fmt.Errorf("failed to parse INFO memory: no %s", k)
		}
	}
	return m, nil
}

// CapacityError refuses moves that would fill a master past its maxmemory less
// CapacityHeadroom: Pod would use Projected bytes where Limit is allowed (MaxMemory less
// the headroom). Dataset is the data of every master, KeptMaxMemory the maxmemory of the
// masters that hold slots after the moves (0 when one of them is unlimited). It wraps
// ErrRefused.
type CapacityError struct {
	Pod                         string
	Projected, MaxMemory, Limit int64
	Dataset, KeptMaxMemory      int64
	Masters                     int
}

func (e *CapacityError) Error() string {
	return fmt.Sprintf("the %d masters would not hold the data with %d%% headroom: %s would use %s of its maxmemory %s (at most %s); the data of all masters is %s, the kept masters' maxmemory %s in all",
		e.Masters, int(CapacityHeadroom*100), e.Pod, mib(e.Projected), mib(e.MaxMemory), mib(e.Limit), mib(e.Dataset), mib(e.KeptMaxMemory))
}

func (e *CapacityError) Unwrap() error { return ErrRefused }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func Receives(moves []SlotMove, id string) bool {
	for _, mv := range moves {
		if mv.To == id {
			return true
		}
	}
	return false
}

// ProjectCapacity is checkCapacity's arithmetic, apart so it can be tested on any figures.
func ProjectCapacity(st *ClusterState, masters []int, mem map[string]Memory, moves []SlotMove) error {
	perSlot := map[string]float64{}
	slots := map[string]int{}
	var dataset int64
	for _, i := range masters {
		self := st.Members[i].Self()
		slots[self.ID] = self.Slots.Count()
		dataset += mem[self.ID].Dataset
		if n := self.Slots.Count(); n > 0 {
			perSlot[self.ID] = float64(mem[self.ID].Dataset) / float64(n)
		}
	}
	projected := map[string]float64{}
	for id, m := range mem {
		projected[id] = float64(m.Used - m.NotCounted) // what maxmemory is compared with
	}
	for _, mv := range moves {
		projected[mv.To] += perSlot[mv.From]
		projected[mv.From] -= perSlot[mv.From]
		slots[mv.To]++
		slots[mv.From]--
	}
	var worst *CapacityError
	var keptMax int64
	unlimited, kept := false, 0
	for _, i := range masters {
		id, pod := st.Members[i].ID(), st.Members[i].Pod
		if slots[id] == 0 {
			continue // gives every slot away: leaving
		}
		kept++
		m := mem[id]
		if m.MaxMemory == 0 {
			unlimited = true
			continue
		}
		keptMax += m.MaxMemory
		limit := int64(float64(m.MaxMemory) * (1 - CapacityHeadroom))
		over := int64(projected[id]) - limit
		if over > 0 && (worst == nil || over > worst.Projected-worst.Limit) {
			worst = &CapacityError{Pod: pod, Projected: int64(projected[id]), MaxMemory: m.MaxMemory, Limit: limit}
		}
	}
	if worst == nil {
		return nil
	}
	if unlimited {
		keptMax = 0
	}
	worst.Dataset, worst.KeptMaxMemory, worst.Masters = dataset, keptMax, kept
	return worst
}
