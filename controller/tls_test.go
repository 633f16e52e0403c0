package controller

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// A RedisCluster with spec.tls on TLS-only servers (the pods' redis.conf with
// disablePlainPort) is formed by the operator over TLS and records the certificate in
// status.tls. The Secret is renewed: while the instances' files are the old ones the
// operator waits and records nothing; once they are new, every instance serves the new
// certificate with no restart, status.tls shows its serial and one CertificateReloaded
// event says so. A deleted Secret is a refusal naming spec.tls.secretName while the
// cluster keeps serving.
func TestTLSClusterReloadsRenewedCertificate(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	ca, err := redistest.NewCA()
	g.Expect(err).NotTo(HaveOccurred())
	first, err := ca.Issue("redis")
	g.Expect(err).NotTo(HaveOccurred())
	dir := filepath.Join(t.TempDir(), "tls")
	g.Expect(redistest.WriteTLSDir(dir, first)).To(Succeed())
	clientCfg, err := redistest.ClientConfig(first)
	g.Expect(err).NotTo(HaveOccurred())
	var secret *corev1.Secret
	rc, servers := formClusterOn(t, h, redistest.Config{TLSDir: dir, TLSClient: clientCfg}, func(rc *redisv1alpha1.RedisCluster) {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: "redis-tls"}, Data: first}
		g.Expect(apiClient.Create(ctx, secret)).To(Succeed())
		rc.Spec.TLS = &redisv1alpha1.TLSSpec{SecretName: "redis-tls", DisablePlainPort: true}
	})
	conf := &corev1.ConfigMap{}
	g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: rc.Name + "-config"}, conf)).To(Succeed())
	for _, line := range []string{"port 0", "tls-port 6379", "tls-cluster yes", "tls-replication yes", "tls-auth-clients yes", "tls-cert-file /etc/redis-tls/tls.crt"} {
		g.Expect(strings.Split(conf.Data["redis.conf"], "\n")).To(ContainElement(line))
	}
	firstLeaf, err := redis.TLSMaterial{Cert: first["tls.crt"], Key: first["tls.key"]}.Leaf()
	g.Expect(err).NotTo(HaveOccurred())
	st := get(t, rc).Status.TLS
	g.Expect(st).NotTo(BeNil())
	g.Expect(st.Serial).To(Equal(redis.SerialHex(firstLeaf)))
	firstHash := st.SecretHash

	second, err := ca.Issue("redis")
	g.Expect(err).NotTo(HaveOccurred())
	secret.Data = second
	g.Expect(apiClient.Update(ctx, secret)).To(Succeed())
	res := h.reconcile(rc)
	g.Expect(res.RequeueAfter).To(Equal(requeueCertificate), "the files are still the old ones: look again soon")
	g.Expect(get(t, rc).Status.TLS.SecretHash).To(Equal(firstHash))

	pids := make([]int, len(servers))
	for i, s := range servers {
		pids[i] = s.PID()
	}
	g.Expect(redistest.WriteTLSDir(dir, second)).To(Succeed())
	h.reconcile(rc)
	secondLeaf, err := redis.TLSMaterial{Cert: second["tls.crt"], Key: second["tls.key"]}.Leaf()
	g.Expect(err).NotTo(HaveOccurred())
	st = get(t, rc).Status.TLS
	g.Expect(st.Serial).To(Equal(redis.SerialHex(secondLeaf)))
	g.Expect(st.SecretHash).NotTo(Equal(firstHash))
	g.Expect(st.NotAfter.Time.Unix()).To(Equal(secondLeaf.NotAfter.Unix()))
	cfg, err := redistest.ClientConfig(second)
	g.Expect(err).NotTo(HaveOccurred())
	for i, s := range servers {
		served, err := redis.ServedCertificate(ctx, s.Addr, cfg)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(redis.SerialHex(served)).To(Equal(redis.SerialHex(secondLeaf)), "served by %s", s.Addr)
		g.Expect(s.PID()).To(Equal(pids[i]), "%s restarted", s.Addr)
	}
	g.Expect(h.events()).To(ContainElement(ContainSubstring(ReasonCertificateReloaded + " Every instance (6) serves certificate serial " + redis.SerialHex(secondLeaf))))
	// Nothing more to do: no Redis write on the next reconcile.
	h.redis.Reset()
	h.reconcile(rc)
	g.Expect(h.redis.WriteNames()).To(BeEmpty())

	g.Expect(apiClient.Delete(ctx, secret)).To(Succeed())
	h.reconcile(rc)
	got := get(t, rc)
	g.Expect(got.Status.Reason).To(ContainSubstring(`spec.tls.secretName: Secret "redis-tls" not found`))
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	g.Expect(warnings(h.events(), ReasonInvalidSpec)).To(ContainElement(ContainSubstring("spec.tls.secretName")))
}
