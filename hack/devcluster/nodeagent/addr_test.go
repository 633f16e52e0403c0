package main

import (
	"path/filepath"
	"testing"
)

func TestAddrFor(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{0, "127.10.0.1"},
		{1, "127.10.0.2"},
		{253, "127.10.0.254"},
		{254, "127.10.1.1"},
		{addrSpace - 1, "127.10.255.254"},
		{addrSpace, "127.10.0.1"},
	}
	for _, tt := range tests {
		if got := addrFor(tt.n); got != tt.want {
			t.Errorf("addrFor(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
}

func TestNextFree(t *testing.T) {
	tests := []struct {
		name     string
		start    int
		inUse    []string
		want     string
		wantNext int
	}{
		{"first", 0, nil, "127.10.0.1", 1},
		{"skips held", 0, []string{"127.10.0.1", "127.10.0.2"}, "127.10.0.3", 3},
		{"moves on from counter", 5, []string{"127.10.0.1"}, "127.10.0.6", 6},
		{"wraps", addrSpace - 1, []string{"127.10.255.254"}, "127.10.0.1", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			used := map[string]bool{}
			for _, a := range tt.inUse {
				used[a] = true
			}
			got, next, ok := nextFree(tt.start, used)
			if !ok || got != tt.want || next != tt.wantNext {
				t.Errorf("nextFree = %s, %d, %v; want %s, %d", got, next, ok, tt.want, tt.wantNext)
			}
		})
	}
}

func TestAllocatorNeverReusesAndPersists(t *testing.T) {
	file := filepath.Join(t.TempDir(), "next-ip")
	a := newAllocator(file)
	first, _ := a.allocate()
	a.release(first)
	second, _ := a.allocate()
	if first == second {
		t.Fatalf("released address %s handed out again at once", first)
	}
	b := newAllocator(file) // an agent restart
	third, _ := b.allocate()
	if third == first || third == second {
		t.Fatalf("restarted allocator reused %s", third)
	}
}
