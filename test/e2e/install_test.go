//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// The install paths (the Helm chart, the one-file installer, make deploy/undeploy) against
// the devcluster's API server. TestOperatorRunsInCluster (incluster_test.go) runs the
// operator's pod itself.

const (
	chartPath = "charts/redis-cluster-operator"
	crdName   = "crd/redisclusters.redis.middleware.hc.cn"
)

// tool runs bin/NAME (helm, make's kubectl) against the devcluster from the repository root.
func tool(t *testing.T, stdin string, name string, args ...string) (string, error) {
	t.Helper()
	bin := name
	if name != "make" {
		bin = filepath.Join(framework.RepoRoot(), "bin", name)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = framework.RepoRoot()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+stack.Kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustTool(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	out, err := tool(t, stdin, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// TestChartServerSideDryRun renders the chart with its main value combinations and has the
// API server validate every object (server-side apply, dry run): schemas, RBAC rules that
// the API server accepts, names, namespaces.
func TestChartServerSideDryRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Dry runs create nothing, so the namespaces they write into must exist.
	for _, ns := range []string{"e2e-chart-system", "e2e-team-a", "e2e-team-b"} {
		testNamespace(ctx, t, ns)
	}
	combos := map[string][]string{
		"defaults":                {},
		"namespaced RBAC, two ns": {"--set", "rbac.scope=namespaced", "--set", "watchNamespaces={e2e-team-a,e2e-team-b}"},
		"leader election, 2 pods": {"--set", "leaderElection.enabled=true", "--set", "replicaCount=2"},
	}
	for name, set := range combos {
		t.Run(name, func(t *testing.T) {
			manifests := mustTool(t, "", "helm", append([]string{"template", "rco", chartPath, "-n", "e2e-chart-system", "--include-crds"}, set...)...)
			out := mustTool(t, manifests, "kubectl", "apply", "--server-side", "--dry-run=server", "--field-manager=e2e-dry-run", "--force-conflicts", "-f", "-")
			t.Logf("%s", out)
			g := NewWithT(t)
			g.Expect(out).To(ContainSubstring("deployment.apps/rco-redis-cluster-operator serverside-applied (server dry run)"))
			g.Expect(out).To(ContainSubstring("customresourcedefinition.apiextensions.k8s.io/redisclusters.redis.middleware.hc.cn serverside-applied (server dry run)"))
			if name == "namespaced RBAC, two ns" {
				g.Expect(out).To(ContainSubstring("role.rbac.authorization.k8s.io/rco-redis-cluster-operator-manager serverside-applied (server dry run)"))
				// Only the metrics authentication is cluster-wide (TokenReviews and
				// SubjectAccessReviews are cluster-scoped): the controller's rules are not.
				g.Expect(out).NotTo(ContainSubstring("clusterrole.rbac.authorization.k8s.io/rco-redis-cluster-operator-manager"))
				g.Expect(out).NotTo(ContainSubstring("clusterrolebinding.rbac.authorization.k8s.io/rco-redis-cluster-operator-manager"))
			}
		})
	}
}

// TestUninstallKeepsTheCRDAndClusters installs the operator both ways (the one-file
// installer, then the Helm chart), removes it both ways (make undeploy, helm uninstall), and
// checks that the CRD and a RedisCluster outlive both, and that make uninstall-crd refuses
// to delete the CRD while a RedisCluster exists.
func TestUninstallKeepsTheCRDAndClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g := NewWithT(t)
	operator(t) // installs the CRD
	const ns, helmNS = "e2e-uninstall", "e2e-helm-operator"
	for _, n := range []string{ns, helmNS} {
		testNamespace(ctx, t, n)
	}
	// Paused: the operator leaves it alone, so it stands for any cluster without costing pods.
	applyCluster(ctx, t, demoSample, ns, func(u *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedField(u.Object, true, "spec", "pause")).To(Succeed())
		unstructured.RemoveNestedField(u.Object, "spec", "finalizers")
	})
	stillThere := func(after string) {
		t.Helper()
		_, err := stack.Kubectl("get", crdName)
		g.Expect(err).NotTo(HaveOccurred(), "the CRD is gone after "+after)
		_, err = stack.Kubectl("get", "rec", "-n", ns, "demo")
		g.Expect(err).NotTo(HaveOccurred(), "the RedisCluster is gone after "+after)
	}

	// The one-file installer, then make undeploy.
	installer := filepath.Join(t.TempDir(), "install.yaml")
	mustTool(t, "", "make", "--no-print-directory", "build-installer", "IMG=redis-cluster-operator:e2e", "INSTALLER="+installer)
	t.Cleanup(func() { _, _ = stack.Kubectl("delete", "--ignore-not-found", "--wait=false", "-k", "config/operator") })
	// Removed twice: by the installer's label (no clone needed), then by make undeploy.
	for _, remove := range [][]string{
		{"kubectl", "delete", "-f", installer, "-l", "app.kubernetes.io/name=redis-cluster-operator"},
		{"make", "--no-print-directory", "undeploy"},
	} {
		t.Log(mustTool(t, "", "kubectl", "apply", "--server-side", "--force-conflicts", "-f", installer))
		_, err := stack.Kubectl("get", "-n", "redis-operator-system", "deploy/redis-operator-controller-manager", "clusterrole/redis-operator-manager-role")
		g.Expect(err).NotTo(HaveOccurred())
		how := strings.Join(remove, " ")
		t.Log(mustTool(t, "", remove[0], remove[1:]...))
		_, err = stack.Kubectl("get", "clusterrole/redis-operator-manager-role")
		g.Expect(err).To(HaveOccurred(), how+" left the operator's ClusterRole")
		_, err = stack.Kubectl("get", "namespace/redis-operator-system")
		g.Expect(err).To(HaveOccurred(), how+" left the operator's namespace")
		stillThere(how)
	}

	out, err := tool(t, "", "make", "--no-print-directory", "uninstall-crd")
	t.Log(out)
	g.Expect(err).To(HaveOccurred(), "make uninstall-crd deleted the CRD while a RedisCluster exists")
	g.Expect(out).To(ContainSubstring("Refused"))
	g.Expect(out).To(ContainSubstring(ns))
	stillThere("make uninstall-crd without CONFIRM=yes")

	// The Helm chart, watching the cluster's namespace only, then helm uninstall.
	t.Log(mustTool(t, "", "helm", "install", "rco", chartPath, "-n", helmNS,
		"--set", "rbac.scope=namespaced", "--set", "watchNamespaces={"+ns+"}"))
	t.Cleanup(func() { _, _ = tool(t, "", "helm", "uninstall", "rco", "-n", helmNS) })
	_, err = stack.Kubectl("get", "-n", ns, "role/rco-redis-cluster-operator-manager", "rolebinding/rco-redis-cluster-operator-manager")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = stack.Kubectl("get", "-n", helmNS, "deploy/rco-redis-cluster-operator")
	g.Expect(err).NotTo(HaveOccurred())
	t.Log(mustTool(t, "", "helm", "uninstall", "rco", "-n", helmNS, "--wait"))
	_, err = stack.Kubectl("get", "-n", ns, "role/rco-redis-cluster-operator-manager")
	g.Expect(err).To(HaveOccurred(), "helm uninstall left the operator's Role")
	stillThere("helm uninstall")
}

// TestChartNamespacedRBACIsEnough installs the chart with rbac.scope=namespaced for one
// namespace and runs the operator as the chart's ServiceAccount (its token, not the admin's):
// it must form a cluster there with nothing but the Role the chart grants, and be refused
// everywhere else.
func TestChartNamespacedRBACIsEnough(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	g := NewWithT(t)
	const ns, opNS, name = "e2e-rbac-watched", "e2e-rbac-operator", "demo"
	const sa = "rco-redis-cluster-operator"
	// operator() installs the CRD and builds bin/manager; its own operator watches every
	// namespace with the admin's rights, so it stops while this test runs.
	operator(t)
	stopOperator()
	for _, n := range []string{ns, opNS} {
		testNamespace(ctx, t, n)
	}
	mustTool(t, "", "helm", "install", "rco", chartPath, "-n", opNS,
		"--set", "rbac.scope=namespaced", "--set", "watchNamespaces={"+ns+"}")
	t.Cleanup(func() { _, _ = tool(t, "", "helm", "uninstall", "rco", "-n", opNS) })

	as := "--as=system:serviceaccount:" + opNS + ":" + sa
	for _, q := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "statefulsets", "-n", ns}, "yes"},
		{[]string{"list", "pods", "-n", ns}, "yes"},
		{[]string{"create", "leases", "-n", opNS}, "yes"},
		{[]string{"list", "pods", "-n", "default"}, "no"},
		{[]string{"list", "redisclusters.redis.middleware.hc.cn", "-A"}, "no"},
		{[]string{"get", "secrets", "-n", "kube-system"}, "no"},
	} {
		out, _ := stack.Kubectl(append(append([]string{"auth", "can-i"}, q.args...), as)...)
		g.Expect(strings.TrimSpace(out)).To(HavePrefix(q.want), "can-i %v", q.args)
	}

	token := strings.TrimSpace(mustTool(t, "", "kubectl", "create", "token", sa, "-n", opNS, "--duration=1h"))
	kubeconfig := saKubeconfig(t, token)
	op, err := stack.StartOperatorAs(kubeconfig, filepath.Join(framework.RepoRoot(), "bin", "manager"),
		"--namespaces="+ns, "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0",
		"--leader-elect", "--leader-election-namespace="+opNS, "--leader-elect-lease-duration=4s",
		"--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = op.Stop() })
	t.Logf("operator (as %s) log: %s", sa, op.Logs)

	applyCluster(ctx, t, demoSample, ns, func(u *unstructured.Unstructured) {
		unstructured.RemoveNestedField(u.Object, "spec", "finalizers")
	})
	g.Expect(stack.WaitForPhase(ctx, ns, name, "Running", formTime)).To(Succeed())
	eventuallyFormed(ctx, t, ns, name)
	logs, err := os.ReadFile(op.Logs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rbacRefusals(string(logs))).To(BeEmpty(), "the operator was refused something the chart's Role should grant")
}

// saKubeconfig writes a kubeconfig for the devcluster that authenticates with token.
func saKubeconfig(t *testing.T, token string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(stack.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctxName := cfg.CurrentContext
	user := cfg.Contexts[ctxName].AuthInfo
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{user: {Token: token}}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
