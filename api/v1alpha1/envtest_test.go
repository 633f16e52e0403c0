/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// The validation tests send CRs to a real kube-apiserver (envtest) with the generated CRD
// installed, so what they check is what `kubectl apply` gets.
var (
	testEnv *envtest.Environment
	// k8sClient is nil when the API server binaries are absent; envtest tests skip then.
	k8sClient client.Client
)

// repoRoot is the repository root, relative to this package.
const repoRoot = "../.."

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(repoRoot, "bin")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		fmt.Fprintf(os.Stderr, "kube-apiserver not found in %s: envtest tests will be skipped\n", assets)
		return m.Run()
	}
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := testEnv.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to start envtest: %v\n", err)
		return 1
	}
	defer func() {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "failed to stop envtest: %v\n", err)
		}
	}()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, autoscalingv1.AddToScheme, redisv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			fmt.Fprintf(os.Stderr, "failed to register types: %v\n", err)
			return 1
		}
	}
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to create client: %v\n", err)
		return 1
	}
	return m.Run()
}

// needAPIServer skips the test when the API server binaries are absent.
func needAPIServer(t *testing.T) {
	t.Helper()
	if k8sClient == nil {
		t.Skip("kube-apiserver and etcd not found (set KUBEBUILDER_ASSETS or build bin/ with make devcluster-bins)")
	}
}
