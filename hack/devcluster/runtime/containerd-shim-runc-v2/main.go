// Command containerd-shim-runc-v2 is the upstream runc v2 shim (runtime io.containerd.runc.v2),
// mirroring containerd's cmd/containerd-shim-runc-v2/main.go. containerd finds it on PATH.
package main

import (
	"context"

	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/manager"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/task/plugin"
	"github.com/containerd/containerd/v2/pkg/shim"
)

func main() {
	shim.RunShim(context.Background(), manager.NewShimManager("io.containerd.runc.v2"))
}
