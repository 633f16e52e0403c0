package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Pod addresses are 127.10.x.y, handed out from a counter that only moves forward (persisted
// across agent restarts), so a recreated pod gets a new address as it would on a real cluster,
// and an address held by a running pod is never handed out again.
const addrSpace = 256 * 254

// addrFor maps counter value n to 127.10.x.y with y in 1..254.
func addrFor(n int) string {
	n %= addrSpace
	return fmt.Sprintf("127.10.%d.%d", n/254, n%254+1)
}

// nextFree returns the first address at or after counter start that is not in use, and the
// counter value that follows it. ok is false when every address is taken.
func nextFree(start int, inUse map[string]bool) (addr string, next int, ok bool) {
	for i := 0; i < addrSpace; i++ {
		a := addrFor(start + i)
		if !inUse[a] {
			return a, (start + i + 1) % addrSpace, true
		}
	}
	return "", start, false
}

// allocator hands out pod addresses and remembers its counter in a file.
type allocator struct {
	mu    sync.Mutex
	file  string
	next  int
	inUse map[string]bool
}

func newAllocator(file string) *allocator {
	a := &allocator{file: file, inUse: map[string]bool{}}
	if b, err := os.ReadFile(file); err == nil {
		a.next, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	return a
}

// reserve marks an address as held, for pods adopted after an agent restart.
func (a *allocator) reserve(addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inUse[addr] = true
}

func (a *allocator) allocate() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	addr, next, ok := nextFree(a.next, a.inUse)
	if !ok {
		return "", fmt.Errorf("failed to allocate a pod address: all %d are in use", addrSpace)
	}
	a.next = next
	a.inUse[addr] = true
	if err := os.WriteFile(a.file, []byte(strconv.Itoa(next)), 0o644); err != nil {
		return "", fmt.Errorf("failed to persist the address counter: %w", err)
	}
	return addr, nil
}

func (a *allocator) release(addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.inUse, addr)
}
