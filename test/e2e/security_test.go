//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// The security suite: the password reaches Redis only through the file of Secret
// NAME-auth, and rotating it keeps every write and every replication link.

// formWithPassword creates namespace ns with Secret "redis-pw" holding password and the
// demo cluster using it, and waits until every node answers cluster_state:ok with it.
func formWithPassword(ctx context.Context, t *testing.T, ns, password string) {
	t.Helper()
	operator(t)
	testNamespace(ctx, t, ns)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis-pw"},
		Data: map[string][]byte{"password": []byte(password)}}
	if err := kubeClient(t).Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	applyCluster(ctx, t, demoSample, ns, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, map[string]any{"name": "redis-pw"}, "spec", "passwordSecret")
	})
	if err := stack.WaitForPhase(ctx, ns, "demo", "Running", formTime); err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func(g Gomega) {
		pods, err := stack.Pods(ctx, ns, selectorOf("demo"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(HaveLen(6))
		for _, p := range pods {
			c := framework.NodeClient(p.Status.PodIP, password)
			info, err := topology.ParseClusterInfo(c.ClusterInfo(ctx).Val())
			c.Close()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(info.OK()).To(BeTrue(), "cluster_state on %s", p.Name)
		}
	}, 60*time.Second, time.Second).Should(Succeed())
}

// leaks lists every place outside Secrets where one of the passwords shows: the command
// line of every process on the machine (every container's redis-server among them), the environment of this cluster's redis-servers, every object in the namespace
// but Secrets (pods, StatefulSet, ConfigMaps, Services, events, the RedisCluster and its
// status), the operator's log and the pods' Redis logs.
func leaks(ctx context.Context, t *testing.T, ns string, passwords ...string) []string {
	t.Helper()
	var out []string
	check := func(where, text string) {
		for _, pw := range passwords {
			if strings.Contains(text, pw) {
				out = append(out, where)
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err == nil {
			check(f, string(b))
		}
	}
	pods, err := stack.Pods(ctx, ns, selectorOf("demo"))
	if err != nil {
		t.Fatal(err)
	}
	servers := 0
	for _, p := range pods {
		pid, err := stack.PodPID(ns, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		servers++
		// The redis container's process, as the host sees it: its arguments and env.
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
			if err != nil {
				t.Fatalf("pod %s pid %d: %v", p.Name, pid, err)
			}
			check(fmt.Sprintf("pod %s process %d %s", p.Name, pid, f), string(b))
		}
		check("Redis log of "+p.Name, stack.RedisLog(ctx, ns, p.Name))
	}
	if servers != 6 {
		t.Fatalf("found %d redis-servers, want 6", servers)
	}
	c := kubeClient(t)
	lists := map[string]client.ObjectList{
		"pods": &corev1.PodList{}, "configmaps": &corev1.ConfigMapList{}, "services": &corev1.ServiceList{},
		"events": &corev1.EventList{}, "statefulsets": &appsv1.StatefulSetList{},
	}
	for kind, l := range lists {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(l)
		check(kind, string(b))
	}
	rc, err := stack.GetRedisCluster(ctx, ns, "demo")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rc.Object)
	check("RedisCluster (spec and status)", string(b))
	logs, err := os.ReadFile(operatorProc.Logs)
	if err != nil {
		t.Fatal(err)
	}
	check("operator log", string(logs))
	return out
}

// replicaLinks reads master_link_status of every replica with password.
func replicaLinks(ctx context.Context, t *testing.T, ns, password string) map[string]bool {
	t.Helper()
	pods, err := stack.Pods(ctx, ns, selectorOf("demo"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods {
		c := framework.NodeClient(p.Status.PodIP, password)
		text, err := c.Info(ctx, "replication").Result()
		c.Close()
		if err != nil {
			t.Fatalf("INFO replication of %s: %v", p.Name, err)
		}
		r, err := topology.ParseReplication(text)
		if err != nil {
			t.Fatal(err)
		}
		if r.Role == "slave" {
			out[p.Name] = r.LinkUp
		}
	}
	return out
}

// TestPasswordNowhereButSecretsAndRotation forms the demo cluster with a password, finds
// it nowhere but in Secrets, then rotates it with a writer running: the writer keeps the
// old password until the operator says the rotation is done (status.auth), then switches;
// no write fails after the switch, no acknowledged key is lost, every replication link
// stays up, and the old password is refused. A deleted Secret is a Warning and a status
// reason while the cluster keeps serving on the last password.
func TestPasswordNowhereButSecretsAndRotation(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "e2e-security"
	oldPW := fmt.Sprintf("e2e-old-%d-pw", time.Now().UnixNano())
	newPW := fmt.Sprintf("e2e-new-%d-pw", time.Now().UnixNano())
	formWithPassword(ctx, t, ns, oldPW)
	g.Expect(leaks(ctx, t, ns, oldPW)).To(BeEmpty(), "the password leaked")
	first := getCluster(ctx, t, ns, "demo").Status.Auth
	g.Expect(first).NotTo(BeNil())

	router := stack.RouterFor(ns, "demo", oldPW)
	defer router.Close()
	w, err := router.StartWriter(ctx, "rot")
	g.Expect(err).NotTo(HaveOccurred())
	time.Sleep(2 * time.Second)

	start := time.Now()
	sec := &corev1.Secret{}
	g.Expect(kubeClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: "redis-pw"}, sec)).To(Succeed())
	sec.Data["password"] = []byte(newPW)
	g.Expect(kubeClient(t).Update(ctx, sec)).To(Succeed())
	// The operator reads the Secret at least every 30 s (requeueRunning).
	g.Eventually(func() bool {
		a := getCluster(ctx, t, ns, "demo").Status.Auth
		return a != nil && a.PasswordHash != first.PasswordHash && a.PreviousPasswordHash == ""
	}, 90*time.Second, 200*time.Millisecond).Should(BeTrue(), "the rotation did not complete")
	rotated := time.Since(start)
	failedBefore := w.Failed()
	router.SetPassword(newPW)
	time.Sleep(5 * time.Second)
	rep := w.Stop()
	t.Logf("rotation done %v after the Secret changed; writer: %s; failed after the switch: %d", rotated.Round(time.Millisecond), rep, rep.Failed-failedBefore)
	g.Expect(rep.Failed-failedBefore).To(BeZero(), "writes failed after the switch")
	g.Expect(rep.Failed).To(BeZero(), "writes failed during the rotation: %v", rep.Errors)
	missing, err := router.Missing(ctx, w.Acked())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(missing).To(BeEmpty(), "acknowledged keys lost")
	t.Logf("%d acknowledged keys read back, 0 lost", len(w.Acked()))
	links := replicaLinks(ctx, t, ns, newPW)
	g.Expect(links).To(HaveLen(3))
	for pod, up := range links {
		g.Expect(up).To(BeTrue(), "replication link of %s", pod)
	}
	pods, err := stack.Pods(ctx, ns, selectorOf("demo"))
	g.Expect(err).NotTo(HaveOccurred())
	old := framework.NodeClient(pods[0].Status.PodIP, oldPW)
	g.Expect(old.Ping(ctx).Err()).To(MatchError(ContainSubstring("WRONGPASS")))
	old.Close()
	var rotations []string
	evs, err := stack.Events(ctx, getCluster(ctx, t, ns, "demo"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range evs {
		if e.Reason == "PasswordRotation" {
			rotations = append(rotations, e.Message)
		}
	}
	g.Expect(rotations).To(ContainElement(ContainSubstring("old password removed")))
	g.Expect(leaks(ctx, t, ns, oldPW, newPW)).To(BeEmpty(), "a password leaked")

	// The Secret deleted: a Warning and the reason; the cluster keeps serving on newPW.
	g.Expect(kubeClient(t).Delete(ctx, sec)).To(Succeed())
	g.Eventually(func() string {
		return getCluster(ctx, t, ns, "demo").Status.Reason
	}, 60*time.Second, time.Second).Should(ContainSubstring(`spec.passwordSecret.name: Secret "redis-pw" not found`))
	g.Expect(router.Do(ctx, "after-delete", "set", "after-delete", "1").Err()).To(Succeed())
	evs, err = stack.Events(ctx, getCluster(ctx, t, ns, "demo"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(evs).To(ContainElement(WithTransform(func(e corev1.Event) string { return e.Type + " " + e.Message },
		ContainSubstring("Warning spec.passwordSecret.name"))))
	g.Expect(leaks(ctx, t, ns, oldPW, newPW)).To(BeEmpty(), "a password leaked")
}
