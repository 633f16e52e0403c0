//go:build e2e

package e2e

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// exporterImage is redis_exporter as built here (hack/devcluster/images.sh).
const exporterImage = "oliver006/redis_exporter:v1.88.0"

func withExporter(u *unstructured.Unstructured) {
	pods, _, _ := unstructured.NestedSlice(u.Object, "spec", "pod")
	pods[0].(map[string]any)["monitorImage"] = exporterImage
	_ = unstructured.SetNestedSlice(u.Object, pods, "spec", "pod")
}

// TestExporterSidecarServesMetrics runs the rendered exporter sidecar as a container next to
// every Redis node, without a password, with one (as the operator's metrics-only user) and with
// TLS, and scrapes each: redis_up 1 and the cluster's own metrics. Its /scrape endpoint, which
// would dial any target with the exporter's credentials, is off.
func TestExporterSidecarServesMetrics(t *testing.T) {
	t.Parallel()
	t.Run("no password", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		formDemo(ctx, t, "e2e-exporter", noPassword(withExporter))
		expectExporters(ctx, t, "e2e-exporter", "demo")
	})
	t.Run("generated password", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		formDemo(ctx, t, "e2e-exporter-gen", withExporter)
		expectExporters(ctx, t, "e2e-exporter-gen", "demo")
	})
	t.Run("password", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		const ns = "e2e-exporter-pw"
		operator(t)
		testNamespace(ctx, t, ns)
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis-pw"},
			Data: map[string][]byte{"password": []byte("e2e-exporter-pw")}}
		if err := kubeClient(t).Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
		applyCluster(ctx, t, demoSample, ns, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, map[string]any{"name": "redis-pw"}, "spec", "passwordSecret")
			withExporter(u)
		})
		NewWithT(t).Expect(stack.WaitForPhase(ctx, ns, "demo", "Running", formTime)).To(Succeed())
		pods, err := stack.Pods(ctx, ns, selectorOf("demo"))
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		for _, c := range pods[0].Spec.Containers {
			if c.Name != "exporter" {
				continue
			}
			for _, e := range c.Env {
				if e.Name == "REDIS_USER" {
					NewWithT(t).Expect(e.Value).To(Equal("operator-exporter"))
				}
			}
		}
		expectExporters(ctx, t, ns, "demo")
	})
	t.Run("TLS", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		const ns = "e2e-exporter-tls"
		ca, err := redistest.NewCA()
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		cert, err := ca.Issue("demo-tls")
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		operator(t)
		testNamespace(ctx, t, ns)
		for _, s := range []*corev1.Secret{
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-tls-cert"}, Type: corev1.SecretTypeTLS, Data: cert},
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis-pw"}, Data: map[string][]byte{"password": []byte("e2e-exporter-tls")}},
		} {
			if err := kubeClient(t).Create(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		applyCluster(ctx, t, tlsSample, ns, withExporter)
		NewWithT(t).Expect(stack.WaitForPhase(ctx, ns, "demo-tls", "Running", formTime)).To(Succeed())
		expectExporters(ctx, t, ns, "demo-tls")
	})
}

// expectExporters scrapes every pod's exporter until it reports its Redis up and in a formed
// cluster, and checks that /scrape is refused.
func expectExporters(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	g := NewWithT(t)
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).NotTo(BeEmpty())
	for _, p := range pods {
		g.Expect(containerStatus(&p, "exporter").Image).To(Equal("docker.io/" + exporterImage))
		g.Eventually(func() string { return scrapeExporter(ctx, p.Status.PodIP) }, time.Minute, time.Second).Should(And(
			MatchRegexp(`(?m)^redis_up 1$`),
			MatchRegexp(`(?m)^redis_cluster_state 1$`),
			MatchRegexp(`(?m)^redis_cluster_known_nodes [1-9]`),
		), "exporter of %s", p.Name)
		resp, err := http.Get("http://" + net.JoinHostPort(p.Status.PodIP, "9121") + "/scrape?target=redis://198.18.0.1:6443")
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).NotTo(Equal(http.StatusOK), "/scrape answers on %s", p.Name)
	}
}
