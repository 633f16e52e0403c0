// Package profile starts a bench's optional CPU profile (its -cpuprofile flag).
package profile

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// StartCPU writes a CPU profile of this program to path until the returned stop is called;
// with path empty it does nothing. A profile that cannot start ends the bench, named prog.
func StartCPU(prog, path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		os.Exit(1)
	}
	return pprof.StopCPUProfile
}
