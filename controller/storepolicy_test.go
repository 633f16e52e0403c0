package controller

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
	"github.com/hc-middleware/redis-cluster-operator/render"
)

// TestStorePodGetsANetworkPolicyWithTheClusters: with the cluster's NetworkPolicy
// enabled, a backup's store pod gets a NetworkPolicy of its own, made before the pod and
// owned by the backup, that selects that pod only and admits to its port exactly the
// operator peer the cluster's NetworkPolicy admits (the operator's namespace by the label
// the API server sets); it goes when the cluster's is disabled and with the pod
// (releaseStore). A restore's store pod gets one owned by the cluster; a NetworkPolicy of
// that name the operator did not make is refused and left alone.
func TestStorePodGetsANetworkPolicyWithTheClusters(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	var err error
	h.r.Renderer, err = render.New(render.OperatorNamespace("redis-operator-system"))
	g.Expect(err).NotTo(HaveOccurred())
	h.r.Options.StoreImage = "operator:dev"
	ns := newNamespace(t)
	newClaim(t, ns)
	rc := newCluster(ns, 6)
	shop := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}
	rc.Spec.NetworkPolicy = &redisv1alpha1.NetworkPolicySpec{Enabled: true, Clients: []networkingv1.NetworkPolicyPeer{shop}}
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	h.reconcile(rc) // the finalizer
	h.reconcile(rc) // the objects, the NetworkPolicy among them
	b := newPVCBackup(t, ns, "nightly", rc.Name)
	name := backupStorePod(b)
	open := func(owner client.Object, name string) (string, string) {
		_, reason, msg, err := h.r.storePod(ctx, owner, name, destinationOf(b, ""))
		g.Expect(err).NotTo(HaveOccurred())
		return reason, msg
	}
	reasonOf := func(owner client.Object, name string) string {
		reason, _ := open(owner, name)
		return reason
	}
	policy := func(name string) (*networkingv1.NetworkPolicy, error) {
		np := &networkingv1.NetworkPolicy{}
		return np, apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, np)
	}

	h.writes()
	g.Expect(reasonOf(b, name)).To(Equal(ReasonStoreStarting))
	g.Expect(h.writes()).To(Equal([]string{"create *v1.NetworkPolicy " + name, "create *v1.Secret " + storeSecret(name), "create *v1.Pod " + name}), "the policy first, the key pair before the pod")
	np, err := policy(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(metav1.GetControllerOf(np).UID).To(Equal(b.UID))
	pod := &corev1.Pod{}
	g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
	selects := func(pod *corev1.Pod) bool {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		g.Expect(err).NotTo(HaveOccurred())
		return sel.Matches(labels.Set(pod.Labels))
	}
	g.Expect(selects(pod)).To(BeTrue())
	other := storePodSpec(ns, "other-backup-store", "backups", "img", backup.StoreIdentity{})
	g.Expect(selects(other)).To(BeFalse(), "another store pod is not this policy's")
	g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
	g.Expect(np.Spec.Ingress).To(HaveLen(1))
	g.Expect(np.Spec.Ingress[0].Ports).To(HaveLen(1))
	g.Expect(np.Spec.Ingress[0].Ports[0].Port.IntValue()).To(Equal(backup.StorePort))
	g.Expect(*np.Spec.Ingress[0].Ports[0].Protocol).To(Equal(corev1.ProtocolTCP))
	// The operator peer is the cluster's own NetworkPolicy's: one peer, not the clients.
	clusterNP, err := policy(rc.Name)
	g.Expect(err).NotTo(HaveOccurred())
	var operator []networkingv1.NetworkPolicyPeer
	for _, rule := range clusterNP.Spec.Ingress {
		for _, p := range rule.From {
			if p.PodSelector != nil && p.PodSelector.MatchLabels[redisv1alpha1.LabelName] == operatorPodName {
				operator = append(operator, p)
			}
		}
	}
	g.Expect(operator).To(HaveLen(1))
	g.Expect(np.Spec.Ingress[0].From).To(Equal(operator))
	g.Expect(operator[0].NamespaceSelector.MatchLabels).To(Equal(map[string]string{"kubernetes.io/metadata.name": "redis-operator-system"}))

	// Again: nothing written. The cluster's disabled: the policy goes.
	h.writes()
	open(b, name)
	g.Expect(h.writes()).To(BeEmpty())
	latest := get(t, rc)
	latest.Spec.NetworkPolicy.Enabled = false
	g.Expect(apiClient.Update(ctx, latest)).To(Succeed())
	open(b, name)
	_, err = policy(name)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the store pod's NetworkPolicy outlived the cluster's: %v", err)
	latest = get(t, rc)
	latest.Spec.NetworkPolicy.Enabled = true
	g.Expect(apiClient.Update(ctx, latest)).To(Succeed())
	open(b, name)
	_, err = policy(name)
	g.Expect(err).NotTo(HaveOccurred())

	// Released with the pod.
	g.Expect(h.r.releaseStore(ctx, ns, name)).To(Succeed())
	_, err = policy(name)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "released: %v", err)
	g.Expect(apierrors.IsNotFound(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{}))).To(BeTrue())

	// A restore's store pod: owned by the cluster.
	restore := restoreStorePod(rc.Name)
	g.Expect(reasonOf(get(t, rc), restore)).To(Equal(ReasonStoreStarting))
	np, err = policy(restore)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(metav1.GetControllerOf(np).UID).To(Equal(rc.UID))

	// A NetworkPolicy of the name that is not the operator's: refused, left alone.
	mine := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weekly-backup-store"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	g.Expect(apiClient.Create(ctx, mine)).To(Succeed())
	weekly := newPVCBackup(t, ns, "weekly", rc.Name)
	reason, msg := open(weekly, backupStorePod(weekly))
	g.Expect(reason).To(Equal(ReasonStorePodRefused))
	g.Expect(msg).To(ContainSubstring("spec.pvc.claimName: a NetworkPolicy named weekly-backup-store exists"))
	g.Expect(apierrors.IsNotFound(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "weekly-backup-store"}, &corev1.Pod{}))).To(BeTrue(), "no pod without its policy")
	g.Expect(h.r.releaseStore(ctx, ns, "weekly-backup-store")).To(Succeed())
	np, err = policy("weekly-backup-store")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(np.UID).To(Equal(mine.UID))
}

// TestStorePodHasNoNetworkPolicyWithoutTheClusters: a cluster without spec.networkPolicy
// (or a backup whose cluster is gone) gets none: see storepolicy.go for why.
func TestStorePodHasNoNetworkPolicyWithoutTheClusters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h, ns, rc := storeTest(t)
	for _, cluster := range []string{rc.Name, "gone"} {
		b := newPVCBackup(t, ns, "of-"+cluster, cluster)
		_, reason, _, err := h.r.storePod(ctx, b, backupStorePod(b), destinationOf(b, ""))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reason).To(Equal(ReasonStoreStarting))
		err = apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: backupStorePod(b)}, &networkingv1.NetworkPolicy{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "cluster %s: %v", cluster, err)
	}
}

// newClaim creates the PersistentVolumeClaim "backups" (never bound: envtest has no
// volumes).
func newClaim(t *testing.T, ns string) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backups"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := apiClient.Create(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
}

// newPVCBackup creates backup name of cluster to the claim "backups".
func newPVCBackup(t *testing.T, ns, name, cluster string) *redisv1alpha1.RedisClusterBackup {
	t.Helper()
	b := &redisv1alpha1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: redisv1alpha1.RedisClusterBackupSpec{ClusterName: cluster, PVC: &redisv1alpha1.PVCDestination{ClaimName: "backups"}}}
	if err := apiClient.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStorePodGetsItsKeyPairInASecret: a store pod's key pair is in Secret NAME-tls, made
// before it and owned by its owner, mounted at /tls; its spec holds the digests of the
// token and the certificate only, and its probe speaks HTTPS. An operator that restarted
// (a new identity) replaces the pod and writes the new key pair into the Secret before the
// new pod. A Secret of that name the operator did not make is refused and left alone.
// Released, the pod goes and the Secret stays with its owner (the operator deletes no
// Secret), the identity forgotten: a new pod gets a new key pair.
func TestStorePodGetsItsKeyPairInASecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h, ns, rc := storeTest(t)
	b := newPVCBackup(t, ns, "nightly", rc.Name)
	name := backupStorePod(b)
	open := func(b *redisv1alpha1.RedisClusterBackup, name string) (backup.Store, string, string) {
		store, reason, msg, err := h.r.storePod(ctx, b, name, destinationOf(b, ""))
		g.Expect(err).NotTo(HaveOccurred())
		return store, reason, msg
	}
	secret := func() *corev1.Secret {
		sec := &corev1.Secret{}
		g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: storeSecret(name)}, sec)).To(Succeed())
		return sec
	}
	pod := func() *corev1.Pod {
		p := &corev1.Pod{}
		g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		return p
	}

	_, reason, _ := open(b, name)
	g.Expect(reason).To(Equal(ReasonStoreStarting))
	id, err := h.r.storeIdentities.identity(ns, name, b.UID)
	g.Expect(err).NotTo(HaveOccurred())
	sec := secret()
	g.Expect(sec.Type).To(Equal(corev1.SecretTypeTLS))
	g.Expect(sec.Data).To(Equal(map[string][]byte{corev1.TLSCertKey: id.CertPEM, corev1.TLSPrivateKeyKey: id.KeyPEM}))
	g.Expect(metav1.GetControllerOf(sec).UID).To(Equal(b.UID))
	first := pod()
	c := first.Spec.Containers[0]
	g.Expect(c.Env).To(Equal([]corev1.EnvVar{{Name: backup.StoreTokenEnv, Value: backup.TokenDigest(id.Token)},
		{Name: backup.StoreCertEnv, Value: backup.CertDigest(id.CertPEM)}}), "digests only: nothing in the pod's spec lets anyone in")
	g.Expect(c.ReadinessProbe.HTTPGet.Scheme).To(Equal(corev1.URISchemeHTTPS))
	g.Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "tls", MountPath: "/tls", ReadOnly: true}))
	g.Expect(first.Spec.Volumes[1].Secret.SecretName).To(Equal(storeSecret(name)))
	g.Expect(podMadeFor(first, id)).To(BeTrue())
	g.Expect(first.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever), "a store that refuses its certificate ends, and is replaced")

	// The operator restarted: a new identity; the pod goes, then the Secret gets the new
	// key pair before the new pod is made.
	h.r.storeIdentities.forget(ns, name)
	_, reason, _ = open(b, name)
	g.Expect(reason).To(Equal(ReasonStoreStarting))
	g.Expect(apierrors.IsNotFound(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{}))).To(BeTrue(), "the pod of the old identity is replaced")
	h.writes()
	open(b, name)
	g.Expect(h.writes()).To(Equal([]string{"patch *v1.Secret " + storeSecret(name), "create *v1.Pod " + name}))
	renewed, err := h.r.storeIdentities.identity(ns, name, b.UID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewed.CertPEM).NotTo(Equal(id.CertPEM))
	g.Expect(secret().Data[corev1.TLSCertKey]).To(Equal(renewed.CertPEM))
	g.Expect(podMadeFor(pod(), renewed)).To(BeTrue())
	g.Expect(podMadeFor(pod(), id)).To(BeFalse())

	// Released: the pod goes, the identity is forgotten, the Secret stays with its owner.
	g.Expect(h.r.releaseStore(ctx, ns, name)).To(Succeed())
	g.Expect(apierrors.IsNotFound(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{}))).To(BeTrue())
	g.Expect(secret().Data[corev1.TLSCertKey]).To(Equal(renewed.CertPEM))
	again, err := h.r.storeIdentities.identity(ns, name, b.UID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.CertPEM).NotTo(Equal(renewed.CertPEM), "a released store's key pair is never trusted again")
	// Another backup of the same name (the first deleted before its store was released)
	// gets an identity of its own.
	foreign, err := h.r.storeIdentities.identity(ns, name, "another-uid")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(foreign.CertPEM).NotTo(Equal(again.CertPEM))

	// A Secret of that name the operator did not make: refused, left alone, no pod.
	weekly := newPVCBackup(t, ns, "weekly", rc.Name)
	mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: storeSecret(backupStorePod(weekly))}, StringData: map[string]string{"k": "v"}}
	g.Expect(apiClient.Create(ctx, mine)).To(Succeed())
	_, reason, msg := open(weekly, backupStorePod(weekly))
	g.Expect(reason).To(Equal(ReasonStorePodRefused))
	g.Expect(msg).To(ContainSubstring("spec.pvc.claimName: a Secret named weekly-backup-store-tls exists"))
	g.Expect(apierrors.IsNotFound(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: backupStorePod(weekly)}, &corev1.Pod{}))).To(BeTrue())
	g.Expect(h.r.releaseStore(ctx, ns, backupStorePod(weekly))).To(Succeed())
	g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: mine.Name}, mine)).To(Succeed())
}

// storeTest is a harness whose operator runs store pods of image operator:dev, a new
// namespace with the claim "backups", and a cluster of 6 pods created there.
func storeTest(t *testing.T) (*harness, string, *redisv1alpha1.RedisCluster) {
	h := newHarness(t)
	h.r.Options.StoreImage = "operator:dev"
	ns := newNamespace(t)
	newClaim(t, ns)
	rc := newCluster(ns, 6)
	if err := apiClient.Create(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	return h, ns, rc
}

// TestStoreSecretRefusalsHaveReasons: a write of a store pod's Secret that the API server
// refuses (an admission policy, a quota, an invalid object) is StorePodRefused naming the
// field and the Secret; one that raced another writer is StoreStarting, looked at again;
// any other error is returned as an error.
func TestStoreSecretRefusalsHaveReasons(t *testing.T) {
	g := NewWithT(t)
	gr := schema.GroupResource{Resource: "secrets"}
	for err, want := range map[error]string{
		apierrors.NewForbidden(gr, "b-backup-store-tls", errors.New("denied by policy")):  ReasonStorePodRefused,
		apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "b-backup-store-tls", nil): ReasonStorePodRefused,
		apierrors.NewAlreadyExists(gr, "b-backup-store-tls"):                              ReasonStoreStarting,
		apierrors.NewConflict(gr, "b-backup-store-tls", errors.New("modified")):           ReasonStoreStarting,
	} {
		reason, msg, rerr := storeSecretRefused(err, "spec.pvc.claimName", "b-backup-store-tls")
		g.Expect(rerr).NotTo(HaveOccurred())
		g.Expect(reason).To(Equal(want), "%v", err)
		g.Expect(msg).To(ContainSubstring("b-backup-store-tls"))
		if want == ReasonStorePodRefused {
			g.Expect(msg).To(HavePrefix("spec.pvc.claimName: "))
		}
	}
	_, _, err := storeSecretRefused(errors.New("connection refused"), "spec.pvc.claimName", "b-backup-store-tls")
	g.Expect(err).To(HaveOccurred())
}
