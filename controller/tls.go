package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// TLS (docs/security.md): the pods mount spec.tls.secretName and serve 6379 with it; the
// operator reads the same Secret (by name, from the API server, never cached) to dial them
// with TLS, presenting tls.crt. When the Secret's content changes (cert-manager renewed
// it), the kubelet refreshes the mounted files and the operator has every instance load
// them with CONFIG SET, with no restart, then records the Secret's hash in status.tls.

// ReasonCertificateReloaded: every instance serves the renewed certificate.
const ReasonCertificateReloaded = "CertificateReloaded"

// requeueCertificate is how soon the operator looks again while instances still serve
// the old certificate because their mounted files have not been refreshed yet.
const requeueCertificate = 5 * time.Second

// Keys of a Secret in the cert-manager layout.
var tlsSecretKeys = []string{"tls.crt", "tls.key", "ca.crt"}

// tlsState is what observeTLS read of spec.tls.secretName.
type tlsState struct {
	// hash identifies the Secret's three files (redis.TLSMaterial.Hash).
	hash string
	// leaf is tls.crt's certificate, the one every instance should serve.
	leaf *x509.Certificate
	// config is what the operator dials the instances with.
	config *tls.Config
}

// observeTLS reads spec.tls.secretName. A missing or unusable Secret is a refusal naming
// the field: nothing is rendered, and the operator keeps dialing with the certificate it
// last had, so the cluster keeps serving and is still observed.
func (r *Reconciler) observeTLS(ctx context.Context, s *scope) error {
	spec := s.cluster.Spec.TLS
	if spec == nil {
		return nil
	}
	if s.original.TLS != nil {
		s.tlsApplied = s.original.TLS.DeepCopy()
	}
	t, why, err := r.readTLSSecret(ctx, s.cluster.Namespace, spec.SecretName)
	if err != nil {
		return err
	}
	if why != "" {
		if s.specErr == nil {
			s.specErr = fmt.Errorf("spec.tls.secretName: %s; the operator keeps the certificate it has and changes nothing until the Secret is fixed; the cluster keeps serving", why)
		}
		hash, cfg := r.redis.lastTLS(client.ObjectKeyFromObject(s.cluster))
		s.creds.tlsHash, s.creds.tlsConfig = hash, cfg
		return nil
	}
	s.tls = t
	s.creds.tlsHash, s.creds.tlsConfig = t.hash, t.config
	return nil
}

// readTLSSecret reads and checks the Secret; what is wrong with it is said in why.
func (r *Reconciler) readTLSSecret(ctx context.Context, ns, name string) (t *tlsState, why string, err error) {
	sec := &corev1.Secret{}
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec)
	switch {
	case client.IgnoreNotFound(err) != nil:
		return nil, "", fmt.Errorf("failed to get Secret %s: %w", name, err)
	case err != nil:
		return nil, fmt.Sprintf("Secret %q not found in namespace %s", name, ns), nil
	}
	var missing []string
	for _, k := range tlsSecretKeys {
		if len(sec.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Sprintf("Secret %q has no %s (the cert-manager layout: tls.crt, tls.key, ca.crt)", name, strings.Join(missing, ", ")), nil
	}
	m := redis.TLSMaterial{Cert: sec.Data["tls.crt"], Key: sec.Data["tls.key"], CA: sec.Data["ca.crt"]}
	cfg, err := redis.ClientTLSConfig(m)
	if err != nil {
		return nil, fmt.Sprintf("Secret %q: %v", name, err), nil
	}
	leaf, err := m.Leaf()
	if err != nil {
		return nil, fmt.Sprintf("Secret %q: tls.crt: %v", name, err), nil
	}
	return &tlsState{hash: m.Hash(), leaf: leaf, config: cfg}, "", nil
}

// reconcileTLS has every member of a whole cluster serve the Secret's certificate once
// its content changed since status.tls.secretHash: a member still serving another one is
// asked to reload its files (redis.ReloadCertificates). Members whose mounted files are
// not refreshed yet are looked at again in a few seconds (wait true); nothing is
// recorded until every member serves the new certificate.
func (r *Reconciler) reconcileTLS(ctx context.Context, s *scope) (wait bool, err error) {
	t := s.tls
	if t == nil || len(s.members) == 0 || (s.tlsApplied != nil && s.tlsApplied.SecretHash == t.hash) {
		return false, nil
	}
	stale, err := redis.ReloadCertificates(ctx, r.factoryFor(s), t.config, memberAddrs(s), t.leaf)
	if err != nil {
		return false, fmt.Errorf("failed to reload the certificate: %w", err)
	}
	if len(stale) > 0 {
		log.FromContext(ctx).Info("Waiting for the renewed certificate files", "serial", redis.SerialHex(t.leaf), "stale", stale)
		return true, nil
	}
	renewed := s.tlsApplied != nil
	s.tlsApplied = &redisv1alpha1.TLSStatus{SecretHash: t.hash, Serial: redis.SerialHex(t.leaf), NotAfter: &metav1.Time{Time: t.leaf.NotAfter}}
	if renewed {
		r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonCertificateReloaded, "Every instance (%d) serves certificate serial %s (expires %s), loaded with no restart", len(s.members), s.tlsApplied.Serial, t.leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return false, nil
}
