// Command criclean stops and removes every pod sandbox of one node's container runtime through
// the CRI, as the kubelet does when a pod goes: the CNI plugin then releases each pod's address
// and network namespace. down.sh runs it for each node before stopping containerd.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	address := flag.String("address", "", "the runtime's unix socket")
	flag.Parse()
	if err := run(*address); err != nil {
		fmt.Fprintln(os.Stderr, "criclean:", err)
		os.Exit(1)
	}
}

func run(address string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("failed to dial %s: %w", address, err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("failed to list pod sandboxes: %w", err)
	}
	var failed error
	for _, sb := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			failed = fmt.Errorf("failed to stop pod sandbox %s/%s: %w", sb.Metadata.Namespace, sb.Metadata.Name, err)
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			failed = fmt.Errorf("failed to remove pod sandbox %s/%s: %w", sb.Metadata.Namespace, sb.Metadata.Name, err)
		}
	}
	return failed
}
