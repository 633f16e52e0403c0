//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// operatorImage is the operator's image, built here from the Dockerfile's recipe
// (hack/devcluster/images.sh) and imported into every node.
const operatorImage = "docker.io/library/redis-cluster-operator:dev"

// TestOperatorRunsInCluster installs the operator as a pod with the Helm chart (its own
// ServiceAccount, RBAC, restricted security context, probes and authenticated metrics) and
// has it form a cluster; then upgrades the release to two replicas with leader election and
// has the new leader heal a deleted master pod; then replaces it with the one-file installer,
// whose pod must come up Available too.
func TestOperatorRunsInCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g := NewWithT(t)
	const opNS, ns, name, release = "e2e-incluster-system", "e2e-incluster", "demo", "rco"
	const deploy = "deploy/rco-redis-cluster-operator"
	// operator() installs the CRD; the operator on this machine stops so the pod is the only one.
	operator(t)
	stopOperator()
	for _, n := range []string{opNS, ns} {
		testNamespace(ctx, t, n)
	}
	image := []string{"--set", "image.repository=" + strings.Split(operatorImage, ":")[0], "--set", "image.tag=dev"}
	t.Log(mustTool(t, "", "helm", append([]string{"install", release, chartPath, "-n", opNS, "--wait", "--timeout=3m"}, image...)...))
	t.Cleanup(func() { _, _ = tool(t, "", "helm", "uninstall", release, "-n", opNS, "--wait") })
	pod := operatorPod(ctx, t, opNS)
	g.Expect(pod.Spec.ServiceAccountName).To(Equal("rco-redis-cluster-operator"))
	g.Expect(pod.Status.ContainerStatuses[0].Image).To(Equal(operatorImage))

	applyCluster(ctx, t, demoSample, ns, func(u *unstructured.Unstructured) {
		unstructured.RemoveNestedField(u.Object, "spec", "finalizers")
	})
	g.Expect(stack.WaitForPhase(ctx, ns, name, "Running", formTime)).To(Succeed(), "operator log:\n%s", operatorPodLog(t, opNS))
	eventuallyFormed(ctx, t, ns, name)

	// The metrics endpoint authenticates: no token is refused, the chart's metrics-reader may read.
	g.Expect(scrapeOperatorPod(ctx, pod.Status.PodIP, "")).To(HavePrefix("401"))
	mustTool(t, "", "kubectl", "create", "serviceaccount", "-n", opNS, "scraper")
	mustTool(t, "", "kubectl", "create", "clusterrolebinding", "e2e-incluster-scraper", "--clusterrole=rco-redis-cluster-operator-metrics-reader", "--serviceaccount="+opNS+":scraper")
	t.Cleanup(func() { _, _ = stack.Kubectl("delete", "clusterrolebinding", "e2e-incluster-scraper") })
	token := strings.TrimSpace(mustTool(t, "", "kubectl", "create", "token", "scraper", "-n", opNS))
	g.Eventually(func() string { return scrapeOperatorPod(ctx, pod.Status.PodIP, token) }, time.Minute, time.Second).
		Should(ContainSubstring(`redis_operator_cluster_phase{`))

	// Upgrade the release: two pods, one leader; the leader heals a deleted master pod.
	t.Log(mustTool(t, "", "helm", append([]string{"upgrade", release, chartPath, "-n", opNS, "--wait", "--timeout=3m",
		"--set", "replicaCount=2", "--set", "leaderElection.enabled=true"}, image...)...))
	mustTool(t, "", "kubectl", "rollout", "status", "-n", opNS, deploy, "--timeout=2m")
	master := pickPod(ctx, t, ns, name, topology.RoleMaster)
	old := map[string]string{master: podIPs(ctx, t, ns, name)[master]}
	start := time.Now()
	g.Expect(stack.DeletePod(ctx, ns, master)).To(Succeed())
	took := healed(ctx, t, ns, name, old, start, 2*time.Minute)
	t.Logf("after the upgrade, master %s deleted: Running and formed again %.1fs later", master, took.Seconds())

	// The one-file installer in place of the chart: its pod is Available with the same image.
	mustTool(t, "", "helm", "uninstall", release, "-n", opNS, "--wait")
	installer := t.TempDir() + "/install.yaml"
	mustTool(t, "", "make", "--no-print-directory", "build-installer", "IMG="+operatorImage, "INSTALLER="+installer)
	// Waited for: the next test installs the operator into the same namespace.
	t.Cleanup(func() {
		_, _ = tool(t, "", "kubectl", "delete", "--ignore-not-found", "--timeout=3m", "-k", "config/operator")
	})
	mustTool(t, "", "kubectl", "apply", "--server-side", "--force-conflicts", "-f", installer)
	mustTool(t, "", "kubectl", "wait", "-n", "redis-operator-system", "--for=condition=Available", "deploy/redis-operator-controller-manager", "--timeout=2m")
	out := mustTool(t, "", "kubectl", "get", "pods", "-n", "redis-operator-system", "-o", "jsonpath={.items[0].status.containerStatuses[0].image}")
	g.Expect(out).To(Equal(operatorImage))
}

// operatorPod waits for the release's operator pod to be ready and returns it.
func operatorPod(ctx context.Context, t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	cs, err := stack.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	NewWithT(t).Eventually(func() bool {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=redis-cluster-operator"})
		if err != nil || len(list.Items) == 0 || !framework.PodReady(&list.Items[0]) {
			return false
		}
		pod = &list.Items[0]
		return true
	}, 2*time.Minute, time.Second).Should(BeTrue(), "the operator pod in %s is not ready", ns)
	return pod
}

// operatorPodLog is the end of the operator pods' logs, for a failure message.
func operatorPodLog(t *testing.T, ns string) string {
	out, _ := stack.Kubectl("logs", "-n", ns, "-l", "app.kubernetes.io/name=redis-cluster-operator", "--tail=40")
	return out
}

// scrapeOperatorPod GETs the operator pod's metrics (https on 8443, its self-signed
// certificate) with token, or none; it returns "STATUS BODY".
func scrapeOperatorPod(ctx context.Context, ip, token string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(ip, "8443")+"/metrics", nil)
	if err != nil {
		return err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	b.WriteString(resp.Status + " ")
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}
