// Command pause is the pod sandbox's first process, in place of registry.k8s.io/pause: it holds
// the pod's namespaces open, reaps any zombie re-parented to it (it is PID 1 of the pod's PID
// namespace when the pod shares one), and exits 0 on SIGTERM or SIGINT.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that has exited; signals coalesce, so one SIGCHLD may stand for many.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
