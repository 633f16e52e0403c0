//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

const handmadeSelector = "app.kubernetes.io/instance=handmade,app.kubernetes.io/name=redis-cluster"

// TestDevclusterRunsRedisStatefulSet is the devcluster's acceptance test: nodes answer, a
// hand-written StatefulSet of 3 Redis pods runs 3 real redis-servers, and a deleted pod comes
// back on a new address with its data.
func TestDevclusterRunsRedisStatefulSet(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	out, err := stack.Kubectl("get", "nodes", "--no-headers")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Count(out, " Ready ")).To(Equal(3), out)

	ns := "devcluster-e2e"
	testNamespace(ctx, t, ns)
	_, err = stack.ApplyYAML(ctx, ns, filepath.Join(framework.RepoRoot(), "test", "e2e", "testdata", "redis-statefulset.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stack.WaitForPodsReady(ctx, ns, handmadeSelector, 3, 2*time.Minute)).To(Succeed())

	pods, err := stack.Pods(ctx, ns, handmadeSelector)
	g.Expect(err).NotTo(HaveOccurred())
	seen := map[string]bool{}
	for _, p := range pods {
		g.Expect(seen[p.Status.PodIP]).To(BeFalse(), "address %s handed out twice", p.Status.PodIP)
		seen[p.Status.PodIP] = true
		rc := framework.NodeClient(p.Status.PodIP, "")
		g.Expect(rc.Ping(ctx).Val()).To(Equal("PONG"), "pod %s at %s", p.Name, p.Status.PodIP)
		// redis.conf came from the pod's ConfigMap volume at /etc/redis.
		g.Expect(rc.Info(ctx, "cluster").Val()).To(ContainSubstring("cluster_enabled:1"))
		rc.Close()
		g.Expect(p.Status.HostIP).To(HavePrefix("127.1.0."))
	}

	// The exporter sidecar is reported as not emulated, never as running.
	p0 := pods[0]
	var exporter *corev1.ContainerStatus
	for i := range p0.Status.ContainerStatuses {
		if p0.Status.ContainerStatuses[i].Name == "exporter" {
			exporter = &p0.Status.ContainerStatuses[i]
		}
	}
	g.Expect(exporter).NotTo(BeNil())
	g.Expect(exporter.State.Waiting).NotTo(BeNil())
	g.Expect(exporter.State.Waiting.Reason).To(Equal("NotEmulated"))
	g.Eventually(func() []string {
		evs, _ := stack.Events(ctx, &p0)
		var reasons []string
		for _, e := range evs {
			reasons = append(reasons, e.Reason)
		}
		return reasons
	}, 10*time.Second, 500*time.Millisecond).Should(ContainElement("NotEmulated"))

	// Pod 0 alone owns every slot, so it serves writes; the key goes to its claim's /data.
	oldIP, oldUID := p0.Status.PodIP, p0.UID
	rc := framework.NodeClient(oldIP, "")
	g.Expect(rc.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err()).To(Succeed())
	g.Eventually(func() string { return rc.ClusterInfo(ctx).Val() }, 20*time.Second, 200*time.Millisecond).Should(ContainSubstring("cluster_state:ok"))
	g.Expect(rc.Set(ctx, "devcluster-key", "kept", 0).Err()).To(Succeed())
	rc.Close()

	_, err = stack.Kubectl("delete", "pod", "-n", ns, p0.Name)
	g.Expect(err).NotTo(HaveOccurred())
	var back corev1.Pod
	g.Eventually(func() bool {
		pods, _ := stack.Pods(ctx, ns, handmadeSelector)
		for _, p := range pods {
			if p.Name == p0.Name && p.UID != oldUID && framework.PodReady(&p) {
				back = p
				return true
			}
		}
		return false
	}, 2*time.Minute, 500*time.Millisecond).Should(BeTrue(), "pod %s did not come back ready", p0.Name)
	g.Expect(back.Status.PodIP).NotTo(Equal(oldIP), "a recreated pod must get a new address")
	rc = framework.NodeClient(back.Status.PodIP, "")
	defer rc.Close()
	g.Eventually(func() string { return rc.Get(ctx, "devcluster-key").Val() }, 20*time.Second, 200*time.Millisecond).Should(Equal("kept"))

	// A crashed redis-server is restarted in place (restartPolicy Always): same address, one restart.
	p1 := pods[1]
	g.Expect(stack.KillPodProcess(ns, p1.Name)).To(Succeed())
	g.Eventually(func() int32 {
		p, err := getPod(ctx, ns, p1.Name)
		if err != nil || len(p.Status.ContainerStatuses) == 0 || !framework.PodReady(p) {
			return 0
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == "redis" {
				return c.RestartCount
			}
		}
		return 0
	}, time.Minute, 500*time.Millisecond).Should(BeNumerically("==", 1))
	g.Expect(framework.NodeClient(p1.Status.PodIP, "").Ping(ctx).Val()).To(Equal("PONG"))
}

// TestUnschedulablePodStaysPending: a nodeSelector no node satisfies leaves the pod Pending
// with PodScheduled=False, as the default scheduler would.
func TestUnschedulablePodStaysPending(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := "devcluster-unsched"
	testNamespace(ctx, t, ns)
	_, err := stack.ApplyYAML(ctx, ns, `apiVersion: v1
kind: Pod
metadata:
  name: nowhere
spec:
  nodeSelector: {disk: ssd}
  containers:
  - name: redis
    image: redis
    command: [redis-server]
`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string {
		p, err := getPod(ctx, ns, "nowhere")
		if err != nil {
			return ""
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return c.Reason
			}
		}
		return ""
	}, 20*time.Second, 500*time.Millisecond).Should(Equal("Unschedulable"))
	p, err := getPod(ctx, ns, "nowhere")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Spec.NodeName).To(BeEmpty())
	g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
}

// TestOperatorHelper checks StartOperator/Kill/Restart once the operator's main.go exists.
func TestOperatorHelper(t *testing.T) {
	if _, err := os.Stat(filepath.Join(framework.RepoRoot(), "main.go")); err != nil {
		t.Skip("main.go does not exist yet: the operator helper is tested once it does")
	}
	g := NewWithT(t)
	op, err := stack.StartOperator("--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer op.Stop()
	g.Consistently(op.Running, 3*time.Second, 500*time.Millisecond).Should(BeTrue(), "operator exited; see %s", op.Logs)
	first := op.PID()
	g.Expect(op.Restart()).To(Succeed())
	g.Expect(op.PID()).NotTo(Equal(first))
	g.Expect(op.Running()).To(BeTrue())
	g.Expect(op.Kill()).To(Succeed())
	g.Expect(op.Running()).To(BeFalse())
}

func getPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	cs, err := stack.Clientset()
	if err != nil {
		return nil, err
	}
	return cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
}
