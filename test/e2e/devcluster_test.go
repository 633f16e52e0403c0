//go:build e2e

package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

const handmadeSelector = "app.kubernetes.io/instance=handmade,app.kubernetes.io/name=redis-cluster"

// TestDevclusterRunsRedisStatefulSet is the devcluster's acceptance test: three real nodes
// (kubelet, containerd) answer; a hand-written StatefulSet of 3 Redis pods with an exporter
// sidecar runs as containers of the images built here, on the pod network; its ClusterIP
// Service routes; `kubectl logs` and `kubectl exec` work; a deleted pod comes back on a new
// address with its claim's data; a killed redis-server is restarted in place; and an image
// change is a real image change.
func TestDevclusterRunsRedisStatefulSet(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	cs, err := stack.Clientset()
	g.Expect(err).NotTo(HaveOccurred())
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes.Items).To(HaveLen(3))
	for _, n := range nodes.Items {
		g.Expect(framework.NodeReady(&n)).To(BeTrue(), n.Name)
		g.Expect(n.Status.NodeInfo.ContainerRuntimeVersion).To(HavePrefix("containerd://2."), n.Name)
		g.Expect(n.Status.NodeInfo.KubeletVersion).To(Equal("v1.36.3"), n.Name)
	}

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
		g.Expect(p.Status.PodIP).To(HavePrefix("198.19."), p.Name)
		g.Expect(p.Status.HostIP).To(HavePrefix("198.18.0."), p.Name)
		rc := framework.NodeClient(p.Status.PodIP, "")
		g.Expect(rc.Ping(ctx).Val()).To(Equal("PONG"), "pod %s at %s", p.Name, p.Status.PodIP)
		// redis.conf came from the pod's ConfigMap volume at /etc/redis.
		g.Expect(rc.Info(ctx, "cluster").Val()).To(ContainSubstring("cluster_enabled:1"))
		rc.Close()
		// The exporter sidecar runs and reads its own pod's Redis.
		g.Eventually(func() string { return scrapeExporter(ctx, p.Status.PodIP) }, 30*time.Second, time.Second).Should(MatchRegexp(`(?m)^redis_up 1$`), p.Name)
	}

	p0 := pods[0]
	logs, err := stack.Kubectl("logs", "-n", ns, p0.Name, "-c", "redis")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logs).To(ContainSubstring("Ready to accept connections"))
	out, err := stack.Kubectl("exec", "-n", ns, p0.Name, "-c", "redis", "--", "redis-cli", "-h", p0.Status.PodIP, "ping")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(out)).To(Equal("PONG"))

	// The ClusterIP Service routes from this machine (kube-proxy) to one of the pods.
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "handmade-client", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string {
		rc := framework.NodeClient(svc.Spec.ClusterIP, "")
		defer rc.Close()
		return rc.Ping(ctx).Val()
	}, 30*time.Second, 500*time.Millisecond).Should(Equal("PONG"), "through the Service's cluster IP %s", svc.Spec.ClusterIP)

	// Pod 0 alone owns every slot, so it serves writes; the key goes to its claim's /data.
	oldIP, oldUID, oldNode := p0.Status.PodIP, p0.UID, p0.Spec.NodeName
	rc := framework.NodeClient(oldIP, "")
	g.Expect(rc.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err()).To(Succeed())
	g.Eventually(func() string { return rc.ClusterInfo(ctx).Val() }, 20*time.Second, 200*time.Millisecond).Should(ContainSubstring("cluster_state:ok"))
	g.Expect(rc.Set(ctx, "devcluster-key", "kept", 0).Err()).To(Succeed())
	rc.Close()

	_, err = stack.Kubectl("delete", "pod", "-n", ns, p0.Name)
	g.Expect(err).NotTo(HaveOccurred())
	back := waitRecreated(ctx, g, ns, p0.Name, oldUID)
	g.Expect(back.Status.PodIP).NotTo(Equal(oldIP), "a recreated pod must get a new address")
	g.Expect(back.Spec.NodeName).To(Equal(oldNode), "the claim's volume is on %s", oldNode)
	rc = framework.NodeClient(back.Status.PodIP, "")
	defer rc.Close()
	g.Eventually(func() string { return rc.Get(ctx, "devcluster-key").Val() }, 20*time.Second, 200*time.Millisecond).Should(Equal("kept"))

	// A crashed redis-server is restarted in place (restartPolicy Always): same address, one restart.
	p1 := pods[1]
	g.Expect(stack.KillPodProcess(ns, p1.Name)).To(Succeed())
	g.Eventually(func() int32 {
		p, err := getPod(ctx, ns, p1.Name)
		if err != nil || !framework.PodReady(p) {
			return 0
		}
		return containerStatus(p, "redis").RestartCount
	}, time.Minute, 500*time.Millisecond).Should(BeNumerically("==", 1))
	g.Expect(framework.NodeClient(p1.Status.PodIP, "").Ping(ctx).Val()).To(Equal("PONG"))

	// Another build of the image: the recreated pod runs another image ID.
	p2 := pods[2]
	was := containerStatus(&p2, "redis").ImageID
	_, err = stack.Kubectl("set", "image", "-n", ns, "statefulset/handmade", "redis=library/redis:7.0-b")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = stack.Kubectl("delete", "pod", "-n", ns, p2.Name)
	g.Expect(err).NotTo(HaveOccurred())
	now := waitRecreated(ctx, g, ns, p2.Name, p2.UID)
	g.Expect(containerStatus(now, "redis").Image).To(Equal("docker.io/library/redis:7.0-b"))
	g.Expect(containerStatus(now, "redis").ImageID).NotTo(Equal(was))
}

// waitRecreated waits for pod name to be back, ready, under another UID than old.
func waitRecreated(ctx context.Context, g Gomega, ns, name string, old types.UID) *corev1.Pod {
	var back *corev1.Pod
	g.Eventually(func() bool {
		p, err := getPod(ctx, ns, name)
		if err != nil || p.UID == old || !framework.PodReady(p) {
			return false
		}
		back = p
		return true
	}, 2*time.Minute, 500*time.Millisecond).Should(BeTrue(), "pod %s did not come back ready", name)
	return back
}

func containerStatus(p *corev1.Pod, name string) corev1.ContainerStatus {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == name {
			return c
		}
	}
	return corev1.ContainerStatus{}
}

// scrapeExporter is the exporter's /metrics at ip:9121, or "" when it does not answer.
func scrapeExporter(ctx context.Context, ip string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, "9121")+"/metrics", nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
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

// TestDevclusterHairpin: a pod on each node reaches itself through its own Service's
// cluster IP, which kube-proxy sends back to the pod. The bed's one kube-proxy serves all
// three nodes but masquerades such hairpin connections only for the endpoints it thinks
// local (devnode-1's); without the bed's own hairpin rule (hack/devcluster/nodes.sh,
// net_up) the pods of devnode-2 and devnode-3 see their own address as the SYN's source,
// drop it, and redis-cli hangs.
func TestDevclusterHairpin(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs, err := stack.Clientset()
	g.Expect(err).NotTo(HaveOccurred())
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	ns := "devcluster-hairpin"
	testNamespace(ctx, t, ns)
	for _, n := range nodes.Items {
		labels := map[string]string{"hairpin": n.Name}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "redis", Image: "docker.io/library/redis:7.0",
				ImagePullPolicy: corev1.PullNever, Args: []string{"redis-server", "--protected-mode", "no"}}}},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name},
			Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 6379}}},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(stack.WaitForPodsReady(ctx, ns, "hairpin", len(nodes.Items), 2*time.Minute)).To(Succeed())
	for _, n := range nodes.Items {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, n.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		// A few tries: kube-proxy programs a new Service within a second or two. A hairpin
		// connection that is dropped hangs, so each try is bounded.
		g.Eventually(func() string {
			tryCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			out, _ := exec.CommandContext(tryCtx, filepath.Join(stack.Root, "bin", "kubectl"), "--kubeconfig", stack.Kubeconfig,
				"exec", "-n", ns, n.Name, "--", "redis-cli", "-h", svc.Spec.ClusterIP, "ping").CombinedOutput()
			return strings.TrimSpace(string(out))
		}, 30*time.Second, time.Second).Should(Equal("PONG"), "pod %s on %s through its own Service's cluster IP %s", n.Name, n.Name, svc.Spec.ClusterIP)
	}
}
