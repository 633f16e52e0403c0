// Command kubelet is the upstream node agent, built from k8s.io/kubernetes: each devcluster
// node runs one, with its own containerd.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
