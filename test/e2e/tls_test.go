//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// with a certificate from a CA the test makes: the cluster forms over TLS, the plain port
// is closed, 100,000 keys are loaded over TLS and a client writes over TLS while the
// cluster grows from 6 to 8 pods; no key is lost. Then the certificate is renewed in the
// Secret: every pod serves the new serial, status.tls says so, and no pod was restarted
// or replaced (same UIDs, same restart counts), the writer still running.
func TestTLSClusterScalesAndReloadsCertificate(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const ns, name, pw = "e2e-tls", "demo-tls", "e2e-tls-pw"
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
	out := resize(ctx, t, ns, name, 8)
	g.Expect(stack.IntegrityTLS(ctx, ns, name, pw, cfg)).To(Succeed())
	t.Logf("scaled 6 -> 8 over TLS in %.1fs", out.Seconds())

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
	// The operator reads the Secret at least every 30 s; the node agent refreshes the
	// mounted files every 10 s.
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
	time.Sleep(3 * time.Second)
	rep := w.Stop()
	t.Logf("certificate %s -> %s served by all 8 pods %.1fs after the Secret changed, no restart; writer: %s", firstSerial, secondSerial, reloaded.Seconds(), rep)
	g.Expect(rep.Failed).To(BeZero(), "writes failed: %v", rep.Errors)
	missing, err := router.Missing(ctx, append(keyNames("tls", tlsKeys), w.Acked()...))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(missing).To(BeEmpty(), "keys lost")
	t.Logf("%d loaded and %d acknowledged keys read back over TLS, 0 lost", tlsKeys, len(w.Acked()))
	g.Expect(stack.IntegrityTLS(ctx, ns, name, pw, newCfg)).To(Succeed())
	evs, err := stack.Events(ctx, getCluster(ctx, t, ns, name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(evs).To(ContainElement(WithTransform(func(e corev1.Event) string { return e.Reason + " " + e.Message },
		ContainSubstring("CertificateReloaded Every instance (8) serves certificate serial "+secondSerial))))
}

// formTLS creates namespace ns with the certificate Secret and the password Secret the
// TLS sample names, applies it, and waits until it is Running.
func formTLS(ctx context.Context, t *testing.T, ns string, cert map[string][]byte, pw string) {
	t.Helper()
	operator(t)
	cleanup, err := stack.CreateNamespace(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-tls-cert"}, Type: corev1.SecretTypeTLS, Data: cert},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis-pw"}, Data: map[string][]byte{"password": []byte(pw)}},
	} {
		if err := kubeClient(t).Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	applyCluster(ctx, t, tlsSample, ns, nil)
	if err := stack.WaitForPhase(ctx, ns, "demo-tls", "Running", formTime); err != nil {
		t.Fatalf("%v; reason: %s", err, getCluster(ctx, t, ns, "demo-tls").Status.Reason)
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
