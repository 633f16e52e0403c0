//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

const securityKeys = 20_000

// TestRestrictedNamespaceAndDisruptionBudget applies the demo cluster (with an emptyDir:
// hostPath volumes are refused by every Pod Security level but privileged) in a namespace
// that enforces the `restricted` Pod Security Standard. The API server admits every pod
// and the cluster forms. Then, with keys loaded and a client writing throughout, a pod is
// evicted through the Eviction API (as kubectl drain does): the eviction of a second pod
// is refused while the first is away, and allowed again once the cluster is whole. No
// acknowledged write is lost.
func TestRestrictedNamespaceAndDisruptionBudget(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g := NewWithT(t)
	const ns, name = "e2e-restricted", "demo"
	operator(t)
	cs, err := stack.Clientset()
	g.Expect(err).NotTo(HaveOccurred())
	testNamespace(ctx, t, ns)
	_, err = stack.Kubectl("label", "ns", ns, "pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/warn=restricted")
	g.Expect(err).NotTo(HaveOccurred())

	// The admission plugin is on: a pod that runs as root with its default capabilities is refused.
	root := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "redis", Command: []string{"redis-server"}}}}}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, root, metav1.CreateOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a pod violating restricted was not refused: %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`violates PodSecurity "restricted:`))

	start := time.Now()
	applyCluster(ctx, t, demoSample, ns, func(u *unstructured.Unstructured) {
		pod, _, _ := unstructured.NestedSlice(u.Object, "spec", "pod")
		g.Expect(pod).To(HaveLen(1))
		g.Expect(unstructured.SetNestedField(pod[0].(map[string]any), "emptyDir", "volumes", "type")).To(Succeed())
		g.Expect(unstructured.SetNestedSlice(u.Object, pod, "spec", "pod")).To(Succeed())
	})
	g.Expect(stack.WaitForPhase(ctx, ns, name, "Running", formTime)).To(Succeed(), "events: %s", stsEvents(ctx, cs, ns))
	eventuallyFormed(ctx, t, ns, name)
	t.Logf("formed in a restricted namespace in %v", time.Since(start).Round(time.Second))
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(6))
	for _, p := range pods {
		sc := p.Spec.SecurityContext
		g.Expect(sc.RunAsNonRoot).To(HaveValue(BeTrue()), p.Name)
		g.Expect(sc.RunAsUser).To(HaveValue(BeEquivalentTo(999)), p.Name)
	}
	g.Expect(stsEvents(ctx, cs, ns)).NotTo(ContainSubstring("FailedCreate"))

	// Asked in the running container itself: not root, no capability, a read-only root
	// filesystem, and /data and /tmp writable.
	out, err := stack.Kubectl("exec", "-n", ns, pods[0].Name, "-c", "redis", "--", "sh", "-c",
		`id -u; id -g; touch /probe 2>&1; touch /data/probe /tmp/probe && echo writable; cat /proc/self/status`)
	g.Expect(err).NotTo(HaveOccurred(), out)
	lines := strings.Split(out, "\n")
	g.Expect(len(lines)).To(BeNumerically(">", 4), out)
	t.Logf("in %s: %s", pods[0].Name, strings.Join(lines[:4], "; "))
	g.Expect(lines[0]).To(Equal("999"), "uid")
	g.Expect(lines[1]).To(Equal("999"), "gid")
	g.Expect(lines[2]).To(ContainSubstring("Read-only file system"))
	g.Expect(lines[3]).To(Equal("writable"))
	g.Expect(out).To(MatchRegexp(`(?m)^CapEff:\s+0+$`), "effective capabilities")
	g.Expect(out).To(MatchRegexp(`(?m)^Seccomp:\s+2$`), "seccomp filter (RuntimeDefault)")
	g.Expect(out).To(MatchRegexp(`(?m)^NoNewPrivs:\s+1$`), "allowPrivilegeEscalation: false")

	// `kubectl exec POD -- redis-cli` reaches the pod's own Redis on loopback, as with the
	// official image; the generated password goes in on stdin, never in an argument.
	pw, err := stack.Password(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	out, err = stack.KubectlIn(pw+"\n", "exec", "-i", "-n", ns, pods[0].Name, "-c", "redis", "--", "sh", "-c",
		`read -r p; REDISCLI_AUTH="$p" redis-cli cluster info`)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("cluster_state:ok"), "redis-cli in the pod, on loopback")

	// The budget: one pod of the cluster at a time.
	pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(metav1.FormatLabelSelector(pdb.Spec.Selector)).To(Equal(selectorOf(name)))
	g.Expect(pdb.OwnerReferences).To(HaveLen(1))
	g.Expect(pdb.OwnerReferences[0].Kind).To(Equal("RedisCluster"))
	waitAllowed := func(want int32) {
		t.Helper()
		g.Eventually(func() int32 {
			p, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return -1
			}
			return p.Status.DisruptionsAllowed
		}, 2*time.Minute, time.Second).Should(Equal(want))
	}
	waitAllowed(1)

	r := stack.RouterFor(ns, name, "")
	t.Cleanup(r.Close)
	g.Expect(r.Load(ctx, "pre", securityKeys)).To(Succeed())
	w, err := r.StartWriter(ctx, "w")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	time.Sleep(time.Second)

	// A replica first, then any other pod while the first is away.
	rc := getCluster(ctx, t, ns, name)
	var first string
	for _, c := range rc.Status.Conditions {
		if c.Type == topology.RoleSlave {
			first = c.Name
			break
		}
	}
	g.Expect(first).NotTo(BeEmpty())
	oldUID := uidOf(pods, first)
	g.Expect(evict(ctx, cs, ns, first)).To(Succeed())
	evictedAt := time.Now()
	for _, p := range pods {
		if p.Name == first {
			continue
		}
		err := evict(ctx, cs, ns, p.Name)
		g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "evicting %s while %s is away: %v", p.Name, first, err)
		g.Expect(err.Error()).To(ContainSubstring("disruption budget"))
	}
	t.Logf("evicted %s; the 5 other evictions were refused while it was away", first)

	// Back: a new pod, the cluster whole, the budget free again.
	g.Eventually(func() bool {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, first, metav1.GetOptions{})
		return err == nil && string(p.UID) != oldUID
	}, time.Minute, time.Second).Should(BeTrue())
	g.Expect(stack.WaitForPodsReady(ctx, ns, selectorOf(name), 6, 2*time.Minute)).To(Succeed())
	g.Expect(stack.WaitForPhase(ctx, ns, name, "Running", 2*time.Minute)).To(Succeed())
	eventuallyFormed(ctx, t, ns, name)
	waitAllowed(1)
	t.Logf("%s back and the budget free again %v after the eviction", first, time.Since(evictedAt).Round(time.Second))

	rep, acked := w.Stop(), w.Acked()
	w = nil
	pre, err := r.Missing(ctx, keyNames("pre", securityKeys))
	g.Expect(err).NotTo(HaveOccurred())
	lost, err := r.Missing(ctx, acked)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("EVICTION: pre-loaded keys lost %d/%d, acknowledged writes lost %d/%d; writer: %v", len(pre), securityKeys, len(lost), len(acked), rep)
	g.Expect(pre).To(BeEmpty())
	g.Expect(lost).To(BeEmpty())
	g.Expect(rep.Acked).To(BeNumerically(">", 0))
	g.Expect(stack.Integrity(ctx, ns, name, "")).To(Succeed())
}

// evict asks the API server to evict a pod, as kubectl drain does.
func evict(ctx context.Context, cs kubernetes.Interface, ns, pod string) error {
	return cs.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}})
}

func uidOf(pods []corev1.Pod, name string) string {
	for _, p := range pods {
		if p.Name == name {
			return string(p.UID)
		}
	}
	return ""
}

// stsEvents lists the namespace's StatefulSet events (a pod the API server refused is a
// FailedCreate there), for a failure message.
func stsEvents(ctx context.Context, cs kubernetes.Interface, ns string) string {
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=StatefulSet"})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range evs.Items {
		b.WriteString(e.Reason + ": " + e.Message + "\n")
	}
	return b.String()
}
