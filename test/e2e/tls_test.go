//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

const (
	tlsSample = "config/samples/redis_v1alpha1_rediscluster_tls.yaml"
	tlsKeys   = 100_000
)

// TestTLSClusterScalesAndReloadsCertificate applies the TLS sample (TLS only, a password)
// with a certificate from a CA the test makes, and takes it through every switch with one
// client writing over TLS throughout: the cluster forms over TLS, the plain port is
// closed, 100,000 keys are loaded over TLS; then
//   - scale-out 6 -> 8;
//   - an upgrade (MAXMEMORY, a pod-template change that needs a restart): every pod rolled;
//   - a password rotation: the writer switches to the new password as soon as every pod
//     accepts it (both are valid during the roll); once status.auth says the rotation is
//     done, the old password is refused;
//   - a certificate renewal: every pod serves the new serial, status.tls says so, and no
//     pod was restarted or replaced (same UIDs, same restart counts).
//
// Writes may fail while a switch runs (a master failed over during the upgrade); once each
// switch has completed (for the rotation: once the writer uses the new password) none may fail: the writer's failed count at each completion must
// not grow afterwards. No pre-loaded key and no acknowledged write is lost, Integrity holds
// at the end, and the longest write gap of each stage is logged.
func TestTLSClusterScalesAndReloadsCertificate(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	const ns, name, pw, newPW = "e2e-tls", "demo-tls", "e2e-tls-pw", "e2e-tls-pw-rotated"
	ca, err := redistest.NewCA()
	g.Expect(err).NotTo(HaveOccurred())
	first, err := ca.Issue("demo-tls")
	g.Expect(err).NotTo(HaveOccurred())
	formTLS(ctx, t, ns, first, pw)
	cfg, err := redistest.ClientConfig(first)
	g.Expect(err).NotTo(HaveOccurred())

	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range pods {
		ip := p.Status.PodIP
		_, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "6380"), time.Second)
		g.Expect(err).To(HaveOccurred(), "plain port 6380 open on %s", p.Name)
		plain := framework.NodeClient(ip, pw)
		g.Expect(plain.Ping(ctx).Err()).To(HaveOccurred(), "plain TCP answered on 6379 of %s", p.Name)
		plain.Close()
	}

	router := stack.RouterFor(ns, name, pw)
	defer router.Close()
	router.SetTLS(cfg)
	g.Expect(router.Load(ctx, "tls", tlsKeys)).To(Succeed())
	w, err := router.StartWriter(ctx, "tlsw")
	g.Expect(err).NotTo(HaveOccurred())
	stages := &stageLog{t: t, w: w}
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()

	out := resize(ctx, t, ns, name, 8)
	g.Expect(stack.IntegrityTLS(ctx, ns, name, pw, cfg)).To(Succeed())
	stages.done(fmt.Sprintf("scale-out 6 -> 8 (%.1fs)", out.Seconds()))

	upgradeTLS(ctx, t, ns, name)
	g.Expect(stack.IntegrityTLS(ctx, ns, name, pw, cfg)).To(Succeed())
	stages.done("upgrade (MAXMEMORY, 8 pods rolled)")

	rotatePassword(ctx, t, ns, name, newPW, cfg, func() {
		// From here on the writer uses only the new password: no write may fail again.
		router.SetPassword(newPW)
		stages.done("password rotation, until every pod accepts the new password and the writer switches to it")
	})
	pods, err = stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	old := goredis.NewClient(&goredis.Options{Addr: net.JoinHostPort(pods[0].Status.PodIP, "6379"), Password: pw, TLSConfig: cfg})
	g.Expect(old.Ping(ctx).Err()).To(MatchError(ContainSubstring("WRONGPASS")), "the old password still works")
	old.Close()

	before := podIdentities(ctx, t, ns, name)
	firstSerial := servedSerial(t, first)
	g.Expect(getCluster(ctx, t, ns, name).Status.TLS.Serial).To(Equal(firstSerial))
	second, err := ca.Issue("demo-tls")
	g.Expect(err).NotTo(HaveOccurred())
	sec := &corev1.Secret{}
	g.Expect(kubeClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-tls-cert"}, sec)).To(Succeed())
	sec.Data = second
	start := time.Now()
	g.Expect(kubeClient(t).Update(ctx, sec)).To(Succeed())
	secondSerial := servedSerial(t, second)
	// The operator reads the Secret at least every 30 s; the kubelet refreshes the mounted
	// files at its sync (10 s on the devcluster's nodes).
	g.Eventually(func() string {
		return getCluster(ctx, t, ns, name).Status.TLS.Serial
	}, 2*time.Minute, time.Second).Should(Equal(secondSerial))
	reloaded := time.Since(start)
	newCfg, err := redistest.ClientConfig(second)
	g.Expect(err).NotTo(HaveOccurred())
	pods, err = stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range pods {
		served, err := redis.ServedCertificate(ctx, net.JoinHostPort(p.Status.PodIP, "6379"), newCfg)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(redis.SerialHex(served)).To(Equal(secondSerial), "served by %s", p.Name)
	}
	g.Expect(podIdentities(ctx, t, ns, name)).To(Equal(before), "a pod was restarted or replaced")
	router.SetTLS(newCfg)
	stages.done(fmt.Sprintf("certificate renewal %s -> %s (all 8 pods %.1fs after the Secret changed, no restart)", firstSerial, secondSerial, reloaded.Seconds()))
	time.Sleep(5 * time.Second)
	rep := w.Stop()
	acked := w.Acked()
	w = nil
	stages.end(rep)

	lostPre, err := router.Missing(ctx, keyNames("tls", tlsKeys))
	g.Expect(err).NotTo(HaveOccurred())
	lostAcked, err := router.Missing(ctx, acked)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("TLSFULL pre-loaded keys lost %d/%d, acknowledged writes lost %d/%d; writer: %s", len(lostPre), tlsKeys, len(lostAcked), len(acked), rep)
	g.Expect(lostPre).To(BeEmpty(), "pre-loaded keys lost")
	g.Expect(lostAcked).To(BeEmpty(), "acknowledged writes lost")
	g.Expect(stack.IntegrityTLS(ctx, ns, name, newPW, newCfg)).To(Succeed())
	evs, err := stack.Events(ctx, getCluster(ctx, t, ns, name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(evs).To(ContainElement(WithTransform(func(e corev1.Event) string { return e.Reason + " " + e.Message },
		ContainSubstring("CertificateReloaded Every instance (8) serves certificate serial "+secondSerial))))
	stages.expectNoFailureAfterEachSwitch(g, rep)
}

// stageLog records, at the completion of each switch, the writer's failed count and its
// per-stage longest write gap (from the writer's running longest gap per shard).
type stageLog struct {
	t      *testing.T
	w      *framework.Writer
	start  time.Time
	stages []stage
}

type stage struct {
	name        string
	failedAtEnd int
	longestGap  time.Duration
}

// done closes the stage that ran since the previous one and logs it.
func (s *stageLog) done(name string) {
	s.t.Helper()
	gap := s.w.TakeLongestGap()
	st := stage{name: name, failedAtEnd: s.w.Failed(), longestGap: gap}
	s.stages = append(s.stages, st)
	s.t.Logf("TLSFULL stage %q completed: writer failed so far %d, longest write gap in the stage %v", name, st.failedAtEnd, gap.Round(time.Millisecond))
}

// end logs the gap of the tail after the last switch.
func (s *stageLog) end(rep framework.WriterReport) {
	s.t.Helper()
	s.t.Logf("TLSFULL after the last switch: writer failed %d in all, longest write gap %v", rep.Failed, s.w.TakeLongestGap().Round(time.Millisecond))
}

// expectNoFailureAfterEachSwitch: the failed count at each completion is the final one.
func (s *stageLog) expectNoFailureAfterEachSwitch(g Gomega, rep framework.WriterReport) {
	for _, st := range s.stages {
		s.t.Logf("TLSFULL failed writes after %q completed: %d", st.name, rep.Failed-st.failedAtEnd)
	}
	for _, st := range s.stages {
		g.Expect(rep.Failed-st.failedAtEnd).To(BeZero(), "writes failed after %q completed: %v", st.name, rep.Errors)
	}
}

// upgradeTLS adds MAXMEMORY to the pod template (its --maxmemory argument needs a
// restart) and waits for Upgrading then Running, every pod on the new revision.
func upgradeTLS(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	g := NewWithT(t)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(framework.RedisClusterGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	patch := `[{"op":"add","path":"/spec/pod/0/env","value":[{"name":"MAXMEMORY","value":"256mb"}]}]`
	before := podIdentities(ctx, t, ns, name)
	start := time.Now()
	g.Expect(kubeClient(t).Patch(ctx, u, client.RawPatch(types.JSONPatchType, []byte(patch)))).To(Succeed())
	g.Expect(stack.WaitForPhase(ctx, ns, name, "Upgrading", time.Minute)).To(Succeed())
	if err := stack.WaitForPhase(ctx, ns, name, "Running", 10*time.Minute); err != nil {
		t.Fatalf("%v: %s", err, getCluster(ctx, t, ns, name).Status.Reason)
	}
	after := podIdentities(ctx, t, ns, name)
	g.Expect(after).To(HaveLen(8))
	for pod, id := range before {
		g.Expect(after[pod]).NotTo(Equal(id), "pod %s was not rolled", pod)
	}
	t.Logf("upgrade: Upgrading then Running %.1fs after the patch", time.Since(start).Seconds())
}

// rotatePassword changes the password Secret, calls switchTo once every pod accepts the
// new password (while both are valid), and waits until status.auth says the rotation is
// done (new hash, no previous one).
func rotatePassword(ctx context.Context, t *testing.T, ns, name, newPW string, cfg *tls.Config, switchTo func()) {
	t.Helper()
	g := NewWithT(t)
	first := getCluster(ctx, t, ns, name).Status.Auth
	g.Expect(first).NotTo(BeNil())
	sec := &corev1.Secret{}
	g.Expect(kubeClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: "redis-pw"}, sec)).To(Succeed())
	sec.Data["password"] = []byte(newPW)
	start := time.Now()
	g.Expect(kubeClient(t).Update(ctx, sec)).To(Succeed())
	g.Eventually(func() error { return everyPodAccepts(ctx, ns, name, newPW, cfg) }, 3*time.Minute, 200*time.Millisecond).Should(Succeed())
	t.Logf("every pod accepts the new password %.1fs after the Secret changed", time.Since(start).Seconds())
	switchTo()
	g.Eventually(func() bool {
		a := getCluster(ctx, t, ns, name).Status.Auth
		return a != nil && a.PasswordHash != first.PasswordHash && a.PreviousPasswordHash == ""
	}, 3*time.Minute, 200*time.Millisecond).Should(BeTrue(), "the rotation did not complete")
	t.Logf("password rotation done %.1fs after the Secret changed", time.Since(start).Seconds())
}

// everyPodAccepts is nil once a client with password pw is let in by every pod.
func everyPodAccepts(ctx context.Context, ns, name, pw string, cfg *tls.Config) error {
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	if err != nil {
		return err
	}
	for _, p := range pods {
		c := goredis.NewClient(&goredis.Options{Addr: net.JoinHostPort(p.Status.PodIP, "6379"), Password: pw, TLSConfig: cfg, MaxRetries: -1})
		err := c.Ping(ctx).Err()
		c.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	return nil
}

// formTLS creates namespace ns with the certificate Secret and the password Secret the
// TLS sample names, applies it, and waits until it is Running.
func formTLS(ctx context.Context, t *testing.T, ns string, cert map[string][]byte, pw string) {
	t.Helper()
	formTLSSample(ctx, t, ns, tlsSample, "demo-tls", "demo-tls-cert", cert, pw)
}

// formTLSSample creates namespace ns with the certificate Secret certSecret and the
// password Secret redis-pw, applies sample (RedisCluster name), and waits until it is
// Running.
func formTLSSample(ctx context.Context, t *testing.T, ns, sample, name, certSecret string, cert map[string][]byte, pw string) {
	t.Helper()
	operator(t)
	testNamespace(ctx, t, ns)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: certSecret}, Type: corev1.SecretTypeTLS, Data: cert},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis-pw"}, Data: map[string][]byte{"password": []byte(pw)}},
	} {
		if err := kubeClient(t).Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	applyCluster(ctx, t, sample, ns, nil)
	if err := stack.WaitForPhase(ctx, ns, name, "Running", formTime); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, ns, name).Status.Reason)
	}
}

// podIdentities are the pods' UIDs and restart counts, by name.
func podIdentities(ctx context.Context, t *testing.T, ns, name string) map[string]string {
	t.Helper()
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods {
		restarts := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		out[p.Name] = fmt.Sprintf("%s restarts %d", types.UID(p.UID), restarts)
	}
	return out
}

func servedSerial(t *testing.T, data map[string][]byte) string {
	t.Helper()
	leaf, err := redis.TLSMaterial{Cert: data["tls.crt"], Key: data["tls.key"]}.Leaf()
	if err != nil {
		t.Fatal(err)
	}
	return redis.SerialHex(leaf)
}
