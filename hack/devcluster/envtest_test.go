// Package devcluster holds the smoke test proving controller-runtime's envtest runs on the
// control plane built by build.sh, with no download.
package devcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

func TestEnvtestStartsOnLocalBinaries(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets, _ = filepath.Abs("../../bin")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		t.Fatalf("kube-apiserver not built in %s: run hack/devcluster/build.sh", assets)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, DownloadBinaryAssets: false}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("failed to start envtest on %s: %v", assets, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("failed to stop envtest: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("failed to create client: %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "smoke"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("failed to create namespace: %v", err)
	}
	var got corev1.Namespace
	if err := c.Get(context.Background(), client.ObjectKey{Name: "smoke"}, &got); err != nil || got.UID == "" {
		t.Fatalf("namespace not stored: %v", err)
	}
}
