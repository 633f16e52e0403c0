// Command ctr is containerd's own client, mirroring containerd's cmd/ctr/main.go: used to
// import the project's images and for smoke tests.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/containerd/containerd/v2/cmd/ctr/app"
)

func main() {
	if err := app.New().Run(context.Background(), os.Args); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "ctr:", err)
		os.Exit(1)
	}
}
