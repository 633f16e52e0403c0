//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

const rbacKeys = 10_000

// TestGeneratedRBACIsEnough runs the operator with the token of the ServiceAccount that
// `make deploy` / dist/install.yaml create (config/operator), holding only the RBAC
// generated from the controller's markers and the static roles beside it, and takes a
// password cluster through bootstrap, a scale-out under a writer, and a foreground
// delete. The operator is never refused anything, reads the password Secret with its
// get-only rule, and its metrics answer only a token allowed to GET /metrics.
func TestGeneratedRBACIsEnough(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	g := NewWithT(t)
	const ns, name, password = "e2e-rbac-generated", "demo", "rbac-e2e-password"
	const opNS, sa = "redis-operator-system", "redis-operator-controller-manager"
	operator(t)
	stopOperator()

	// The install's RBAC, as kustomize builds it, without the Deployment the devcluster cannot run.
	rbac := operatorRBAC(t)
	mustTool(t, rbac, "kubectl", "apply", "--server-side", "-f", "-")
	t.Cleanup(func() {
		_, _ = tool(t, rbac, "kubectl", "delete", "--ignore-not-found", "--wait=false", "-f", "-")
		_, _ = tool(t, "", "kubectl", "wait", "--for=delete", "ns/"+opNS, "--timeout=2m")
	})
	as := "--as=system:serviceaccount:" + opNS + ":" + sa
	for _, q := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "secrets", "-n", ns}, "yes"},
		{[]string{"list", "secrets", "-n", ns}, "no"},
		{[]string{"watch", "secrets", "-A"}, "no"},
		{[]string{"create", "poddisruptionbudgets.policy", "-n", ns}, "yes"},
		{[]string{"create", "networkpolicies.networking.k8s.io", "-n", ns}, "yes"},
		{[]string{"create", "tokenreviews.authentication.k8s.io"}, "yes"},
		{[]string{"create", "subjectaccessreviews.authorization.k8s.io"}, "yes"},
		{[]string{"get", "/metrics"}, "no"},
	} {
		out, _ := stack.Kubectl(append(append([]string{"auth", "can-i"}, q.args...), as)...)
		// The answer is the last line; a cluster-scoped resource comes with a warning first.
		lines := strings.Split(strings.TrimSpace(out), "\n")
		g.Expect(lines[len(lines)-1]).To(HavePrefix(q.want), "can-i %v: %s", q.args, out)
	}

	token := strings.TrimSpace(mustTool(t, "", "kubectl", "create", "token", sa, "-n", opNS, "--duration=1h"))
	const metricsAddr = "127.0.0.1:18443"
	op, err := stack.StartOperatorAs(saKubeconfig(t, token), filepath.Join(framework.RepoRoot(), "bin", "manager"),
		"--metrics-bind-address="+metricsAddr, "--health-probe-bind-address=127.0.0.1:0",
		"--leader-elect", "--leader-election-namespace="+opNS, "--leader-elect-lease-duration=4s",
		"--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = op.Stop() })
	t.Logf("operator (as %s) log: %s", sa, op.Logs)

	testNamespace(ctx, t, ns)
	_, err = stack.Kubectl("-n", ns, "create", "secret", "generic", "demo-password", "--from-literal=password="+password)
	g.Expect(err).NotTo(HaveOccurred())
	start := time.Now()
	applyCluster(ctx, t, demoSample, ns, func(u *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedField(u.Object, "demo-password", "spec", "passwordSecret", "name")).To(Succeed())
	})
	g.Expect(stack.WaitForPhase(ctx, ns, name, "Running", formTime)).To(Succeed())
	g.Expect(stack.Integrity(ctx, ns, name, password)).To(Succeed())
	t.Logf("bootstrap as %s: Running in %v", sa, time.Since(start).Round(time.Second))

	r := stack.RouterFor(ns, name, password)
	t.Cleanup(r.Close)
	// Right after Running a replica may still be in its first full sync, and Load's WAIT
	// for it times out; loading again writes the same keys and values.
	g.Eventually(func() error { return r.Load(ctx, "pre", rbacKeys) }, 60*time.Second, 2*time.Second).Should(Succeed())
	w, err := r.StartWriter(ctx, "w")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	took := resize(ctx, t, ns, name, 8)
	rep, acked := w.Stop(), w.Acked()
	w = nil
	pre, err := r.Missing(ctx, keyNames("pre", rbacKeys))
	g.Expect(err).NotTo(HaveOccurred())
	lost, err := r.Missing(ctx, acked)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("scale 6->8 as %s in %v: pre-loaded keys lost %d/%d, acknowledged writes lost %d/%d; writer: %v",
		sa, took.Round(time.Second), len(pre), rbacKeys, len(lost), len(acked), rep)
	g.Expect(pre).To(BeEmpty())
	g.Expect(lost).To(BeEmpty())
	g.Expect(rep.Acked).To(BeNumerically(">", 0))
	g.Expect(stack.Integrity(ctx, ns, name, password)).To(Succeed())
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(8))

	expectMetricsGuarded(t, g, metricsAddr, token)

	// Delete: the foreground finalizer holds the CR until the operator saw the pods go.
	start = time.Now()
	_, err = stack.Kubectl("-n", ns, "delete", "rec", name, "--wait=false")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool {
		_, err := stack.GetRedisCluster(ctx, ns, name)
		return err != nil && strings.Contains(err.Error(), "not found")
	}, 3*time.Minute, time.Second).Should(BeTrue(), "the RedisCluster was not deleted")
	pods, err = stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(BeEmpty())
	t.Logf("foreground delete as %s in %v", sa, time.Since(start).Round(time.Second))

	logs, err := os.ReadFile(op.Logs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rbacRefusals(string(logs))).To(BeEmpty(), "the operator was refused something the generated RBAC should grant")
}

// operatorRBAC is config/operator as kustomize builds it, keeping the Namespace, the
// ServiceAccount and the RBAC objects.
func operatorRBAC(t *testing.T) string {
	t.Helper()
	out := mustTool(t, "", "kubectl", "kustomize", "config/operator")
	var kept []string
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			kept = append(kept, doc)
		}
	}
	if len(kept) < 6 {
		t.Fatalf("config/operator has %d RBAC objects:\n%s", len(kept), out)
	}
	return strings.Join(kept, "\n---\n")
}

// expectMetricsGuarded: the metrics endpoint refuses a request without a token (401) and
// one whose ServiceAccount may not GET /metrics (403, the operator's own), and serves a
// ServiceAccount bound to ClusterRole metrics-reader.
func expectMetricsGuarded(t *testing.T, g Gomega, addr, unprivileged string) {
	t.Helper()
	const scraper = "e2e-scraper"
	mustTool(t, "", "kubectl", "-n", "default", "create", "serviceaccount", scraper)
	mustTool(t, "", "kubectl", "create", "clusterrolebinding", scraper, "--clusterrole=redis-operator-metrics-reader",
		"--serviceaccount=default:"+scraper)
	t.Cleanup(func() {
		_, _ = tool(t, "", "kubectl", "delete", "clusterrolebinding", scraper, "--ignore-not-found")
		_, _ = tool(t, "", "kubectl", "-n", "default", "delete", "serviceaccount", scraper, "--ignore-not-found")
	})
	allowed := strings.TrimSpace(mustTool(t, "", "kubectl", "-n", "default", "create", "token", scraper, "--duration=1h"))
	hc := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the operator's self-signed certificate
	get := func(token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		g.Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	code, _ := get("")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "no token")
	code, _ = get(unprivileged)
	g.Expect(code).To(Equal(http.StatusForbidden), "the operator's own token may not GET /metrics")
	code, body := get(allowed)
	g.Expect(code).To(Equal(http.StatusOK), "a metrics-reader token")
	g.Expect(body).To(ContainSubstring("controller_runtime_reconcile_total"))
	t.Logf("metrics: 401 without a token, 403 for the operator's own, 200 for a metrics-reader")
}

// rbacRefusals are the log lines where the API server refused the operator's own
// ServiceAccount (`forbidden: User "system:serviceaccount:…" cannot …`). Other 403s are not
// about RBAC: a namespace another test is deleting refuses new objects ("forbidden: unable
// to create new content in namespace … because it is being terminated").
func rbacRefusals(logs string) []string {
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "forbidden") && strings.Contains(line, "cannot") && strings.Contains(line, "system:serviceaccount:") {
			out = append(out, line)
		}
	}
	return out
}
