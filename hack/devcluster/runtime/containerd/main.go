// Command containerd is the upstream containerd daemon, built from the module pinned in go.mod.
// It mirrors containerd's cmd/containerd/main.go; the builtins import registers the plugins
// (CRI, overlayfs snapshotter, runc v2 runtime, ...) exactly as the upstream binary does.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/containerd/containerd/v2/cmd/containerd/command"

	_ "github.com/containerd/containerd/v2/cmd/containerd/builtins"
)

func main() {
	if err := command.App().Run(context.Background(), os.Args); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "containerd:", err)
		os.Exit(1)
	}
}
