//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// servers are the servers besides the default Redis 7.0 that the operator supports, each an
// image hack/devcluster/images.sh builds from Debian's packages (docs/servers.md).
var servers = []struct {
	repository, version string
	// server is what every instance must report (INFO server, status.conditions[].server).
	server string
}{
	{"library/redis", "8.0", "redis 8.0.2"},
	{"valkey/valkey", "8.1", "valkey 8.1.1"},
	{"valkey/valkey", "9.1", "valkey 9.1.2"},
}

// withServer sets spec.repository and spec.version.
func withServer(repository, version string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, repository, "spec", "repository")
		_ = unstructured.SetNestedField(u.Object, version, "spec", "version")
	}
}

// matrixServerEnv names the server the demo sample runs in this run, as
// REPOSITORY:VERSION (valkey/valkey:9.1): `make test-matrix` runs part of the suite once
// per server with it. Unset, the sample's own server runs (Redis 7.0). A test that asks for
// a server itself (TestServers, TestServerUpgrades) sets it over this.
const matrixServerEnv = "E2E_SERVER"

// withMatrixServer sets spec.repository and spec.version to E2E_SERVER's, if set.
func withMatrixServer(u *unstructured.Unstructured) error {
	v := os.Getenv(matrixServerEnv)
	if v == "" {
		return nil
	}
	i := strings.LastIndex(v, ":")
	if i <= 0 || i == len(v)-1 || strings.Contains(v[i:], "/") {
		return fmt.Errorf("%s=%q: want REPOSITORY:VERSION, e.g. valkey/valkey:9.1", matrixServerEnv, v)
	}
	withServer(v[:i], v[i+1:])(u)
	return nil
}

// TestServers is the matrix smoke test: on each server, the demo cluster (6 pods, 3 masters)
// with the exporter sidecar forms, takes faultKeys keys and the writer, and scales out to 8
// pods (4 masters) with MIGRATE; no key and no acknowledged write may be lost. Every instance
// says it runs that server, in INFO server and in the status, and every exporter reports
// redis_up 1.
//
// Serial: under the load of the parallel tests, Valkey 8.1's scale-out once left the new
// master's replica with three slots marked importing that its master no longer had (its
// replicated SETSLOT ... STABLE did not reach it), and the cluster stayed Scaling in
// FinishingOpenSlots (docs/servers.md, "Known defects").
func TestServers(t *testing.T) {
	for _, s := range servers {
		t.Run(strings.ReplaceAll(s.server, " ", "-"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			ns := "servers-" + strings.NewReplacer(" ", "-", ".", "-").Replace(s.server)
			start := time.Now()
			f := startFault(ctx, t, ns, func(u *unstructured.Unstructured) {
				withServer(s.repository, s.version)(u)
				withExporter(u)
			})
			expectServer(ctx, t, ns, "demo", s.server)
			expectExporters(ctx, t, ns, "demo")
			took := resize(ctx, t, ns, "demo", 8)
			expectShape(ctx, t, ns, "demo", 8, 4, 4096)
			rep := f.finish("scale-out 6->8 on "+s.server, 0, took)
			expectServer(ctx, t, ns, "demo", s.server)
			t.Logf("SERVER %s: scale-out 6->8 with %d keys in %.1fs, longest write gap %v, whole case %.1fs",
				s.server, faultKeys, took.Seconds(), rep.LongestGap, time.Since(start).Seconds())
		})
	}
}

// expectServer checks that every pod's instance runs server ("redis 8.0.2"): as it says in
// INFO server, and as the operator reports it in status.conditions[].server.
func expectServer(ctx context.Context, t *testing.T, ns, name, server string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		ips := podIPs(ctx, t, ns, name)
		for pod, ip := range ips {
			c := framework.NodeClient(ip, "")
			text, err := c.Info(ctx, "server").Result()
			c.Close()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(topology.ParseServer(text).String()).To(Equal(server), "INFO server on %s", pod)
		}
		rc := getCluster(ctx, t, ns, name)
		g.Expect(rc.Status.Conditions).To(HaveLen(len(ips)))
		for _, c := range rc.Status.Conditions {
			g.Expect(c.Server).To(Equal(server), "status.conditions[].server of %s", c.Name)
		}
	}, time.Minute, time.Second).Should(Succeed())
}
