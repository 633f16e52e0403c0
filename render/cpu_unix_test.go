//go:build unix

package render

import (
	"syscall"
	"time"
)

// processCPU is the CPU time of this process (all threads, GC included). The
// benchmarks report it per op beside ns/op because the build machine is shared: wall
// time per op there includes waiting for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
