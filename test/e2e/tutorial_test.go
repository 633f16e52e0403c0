//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// TestTutorialAnyKubernetes runs docs/tutorials/any-kubernetes.md with hack/tutorial.sh,
// the devcluster standing in for "any Kubernetes": the image the tutorial builds (make
// images) is the one the bed imported into every node when it started. The tutorial installs
// the operator with the Helm chart, forms cluster "try" from the emptyDir sample, writes and
// reads a key through the client Service with redis-cli -c, scales to 4 masters, checks the
// key and the slots again, and removes the cluster, the operator and the CRDs, which this
// test puts back for the tests after it.
func TestTutorialAnyKubernetes(t *testing.T) {
	// operator() installs the CRD; the operator on this machine stops, so the tutorial's pod
	// is the only one.
	operator(t)
	stopOperator()
	root := framework.RepoRoot()
	t.Cleanup(func() {
		// After a failure, what the tutorial left; after a success, nothing (ignored).
		_, _ = tool(t, "", "kubectl", "delete", "--ignore-not-found", "--timeout=3m", "rec", "try", "-n", "default")
		_, _ = tool(t, "", "helm", "uninstall", "redis-operator", "-n", "redis-operator-system", "--wait")
		_, _ = tool(t, "", "kubectl", "delete", "--ignore-not-found", "--timeout=3m", "namespace", "redis-operator-system")
		out, err := tool(t, "", "kubectl", "apply", "--server-side", "-f", filepath.Join(root, "config", "crd", "bases"))
		if err != nil {
			t.Errorf("putting the CRDs back: %v\n%s", err, out)
			return
		}
		// Retried: right after creation a CRD has no conditions for kubectl wait to read.
		for i := 0; ; i++ {
			out, err := tool(t, "", "kubectl", "wait", "--for=condition=established", "--timeout=5s",
				"crd/redisclusters.redis.middleware.hc.cn", "crd/redisclusterbackups.redis.middleware.hc.cn")
			if err == nil {
				break
			}
			if i == 60 {
				t.Errorf("the CRDs put back are not established: %v\n%s", err, out)
				break
			}
			time.Sleep(time.Second)
		}
	})
	start := time.Now()
	cmd := exec.Command(filepath.Join(root, "hack", "tutorial.sh"), "docs/tutorials/any-kubernetes.md")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+stack.Kubeconfig, "PATH="+filepath.Join(root, "bin")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("docs/tutorials/any-kubernetes.md: %v (operator log below)\n%s", err, operatorPodLog(t, "redis-operator-system"))
	}
	t.Logf("docs/tutorials/any-kubernetes.md ran in %.0fs", time.Since(start).Seconds())
}
