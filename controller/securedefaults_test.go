package controller

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// A RedisCluster with no setting gets a password: the operator generates 32 random bytes
// into NAME-auth (owned by the RedisCluster) before any pod, the pods mount it and no
// ServiceAccount token, the cluster forms with it, clients without it are refused, and
// the password is in no event and no status. An operator restarted after NAME-auth was
// deleted by hand refuses to make a new password (the instances have the old one).
func TestSecureDefaults(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc := newCluster(newNamespace(t), 6)
	rc.Spec.DisablePassword = false
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	h.reconcile(rc)
	h.reconcile(rc)

	auth := authSecret(t, rc)
	pw := string(auth.Data["password"])
	raw, err := hex.DecodeString(pw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw).To(HaveLen(32), "32 random bytes")
	owner := auth.OwnerReferences
	g.Expect(owner).To(HaveLen(1))
	g.Expect(owner[0].UID).To(Equal(get(t, rc).UID))
	g.Expect(*owner[0].Controller).To(BeTrue())
	sts := liveStatefulSet(t, rc)
	g.Expect(sts.Spec.Template.Spec.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
	g.Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Name", "auth")))

	servers := redistest.Start(t, 6, podAuthConf(pw))
	startPods(t, rc, servers)
	got := h.reconcileUntil(rc, redisv1alpha1.PhaseRunning, 20)
	g.Expect(got.Status.Auth).NotTo(BeNil())
	g.Expect(got.Status.Auth.PasswordHash).To(HaveLen(16))
	c := meta.FindStatusCondition(got.Status.ClusterConditions, ConditionPasswordSet)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Reason).To(Equal("Generated"))
	kc := newKeyClient(t, servers, pw)
	keys := writeKeys(t, kc, 100)
	g.Expect(lostKeys(t, kc, keys)).To(BeZero())
	anon := goredis.NewClient(&goredis.Options{Addr: servers[0].Addr, MaxRetries: -1})
	err = anon.Get(ctx, "k").Err()
	anon.Close()
	g.Expect(err).To(MatchError(ContainSubstring("NOAUTH")))
	for _, e := range h.events() {
		g.Expect(e).NotTo(ContainSubstring(pw))
	}
	g.Expect(got.Status.Reason).NotTo(ContainSubstring(pw))

	// NAME-auth deleted and the operator restarted: no new password, a refusal.
	g.Expect(apiClient.Delete(ctx, auth)).To(Succeed())
	h2 := newHarness(t)
	h2.reconcile(rc)
	got = get(t, rc)
	g.Expect(got.Status.Reason).To(ContainSubstring("generated password was in Secret NAME-auth, which is gone"))
	g.Expect(got.Status.Auth).NotTo(BeNil(), "status.auth stays, the memory that the cluster has a password")
	err = apiClient.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: rc.Name + "-auth"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "NAME-auth written again with a new password: %v", err)
	g.Expect(lostKeys(t, kc, keys)).To(BeZero())
}

// The upgrade path: a cluster an older operator formed without a password (Running, no
// status.auth, no NAME-auth) is not given one behind its back: nothing is re-rendered,
// it keeps serving without a password, says so once in a Warning NoPassword, the status
// reason and the PasswordSet condition; spec.passwordSecret added to it is refused naming
// the field; spec.disablePassword: true says it is on purpose and silences the notice.
func TestClusterFormedWithoutPasswordKeepsRunningWithoutOne(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc, servers := formClusterOn(t, h, redistest.Config{}, nil)
	sts := liveStatefulSet(t, rc)
	kc := newKeyClient(t, servers, "")
	keys := writeKeys(t, kc, 100)

	// What an older operator's CR looks like: no disablePassword (the field did not exist).
	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) { s.DisablePassword = false })
	h.reconcile(rc)
	h.reconcile(rc)
	got := get(t, rc)
	g.Expect(got.Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
	g.Expect(got.Status.Auth).To(BeNil())
	g.Expect(got.Status.Reason).To(ContainSubstring("formed without a password"))
	c := meta.FindStatusCondition(got.Status.ClusterConditions, ConditionPasswordSet)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(noPasswordLegacy))
	g.Expect(warnings(h.events(), ReasonNoPassword)).To(HaveLen(1), "one Warning, not one per reconcile")
	g.Expect(liveStatefulSet(t, rc).Generation).To(Equal(sts.Generation), "the StatefulSet was re-rendered")
	err := apiClient.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: rc.Name + "-auth"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "NAME-auth made for a cluster formed without a password: %v", err)
	g.Expect(lostKeys(t, kc, keys)).To(BeZero())

	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) {
		s.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "pw", Key: "password"}
	})
	h.reconcile(rc)
	got = get(t, rc)
	g.Expect(got.Status.Reason).To(ContainSubstring("spec.passwordSecret: this cluster was formed without a password"))
	g.Expect(warnings(h.events(), ReasonInvalidSpec)).To(ConsistOf(ContainSubstring("spec.passwordSecret")))
	g.Expect(liveStatefulSet(t, rc).Generation).To(Equal(sts.Generation))

	update(t, rc, func(s *redisv1alpha1.RedisClusterSpec) { s.PasswordSecret, s.DisablePassword = nil, true })
	h.reconcile(rc)
	got = get(t, rc)
	g.Expect(got.Status.Reason).NotTo(ContainSubstring("formed without a password"))
	c = meta.FindStatusCondition(got.Status.ClusterConditions, ConditionPasswordSet)
	g.Expect(c.Reason).To(Equal(noPasswordDisabled))
	g.Expect(strings.Join(warnings(h.events(), ReasonNoPassword), "")).To(BeEmpty())
	g.Expect(lostKeys(t, kc, keys)).To(BeZero())
}

// A new cluster whose first reconciles are refused (its user ConfigMap not created yet, as
// `kubectl apply -f dir/` may order it) goes on once the ConfigMap is there, with a password
// of its own: status.auth records a password only once NAME-auth holds it, so a password
// generated in a refused reconcile, never stored and never given to a pod, is not taken for
// one the instances have lost.
func TestRefusedFirstReconcileKeepsNoPhantomPassword(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc := newCluster(newNamespace(t), 6)
	rc.Spec.DisablePassword = false
	rc.Spec.Pod = []redisv1alpha1.RedisPodTemplate{{ConfigMap: "later"}}
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	h.reconcile(rc)
	h.reconcile(rc)
	got := get(t, rc)
	g.Expect(got.Status.Auth).To(BeNil(), "no password recorded before NAME-auth holds one")
	g.Expect(got.Status.Reason).To(ContainSubstring("later"))

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: "later"}, Data: map[string]string{"redis.conf": "hz 20\n"}}
	g.Expect(apiClient.Create(ctx, cm)).To(Succeed())
	h.reconcile(rc)
	h.reconcile(rc)
	got = get(t, rc)
	g.Expect(got.Status.Reason).NotTo(ContainSubstring("which is gone"))
	auth := authSecret(t, rc)
	g.Expect(auth.Data["password"]).To(HaveLen(64), "a generated password in NAME-auth")
	g.Expect(got.Status.Auth).NotTo(BeNil())
}
