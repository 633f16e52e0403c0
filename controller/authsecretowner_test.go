package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// The RBAC lets the operator create and patch any Secret where it runs (resourceNames
// cannot name NAME-auth of clusters not created yet), so the code is what keeps it to its
// own: a Secret named NAME-auth that the RedisCluster does not control (a user's password
// Secret that happens to have the name, or one another object controls) is refused, never
// written, and nothing else is applied for the cluster.
func TestForeignAuthSecretIsNotWritten(t *testing.T) {
	for _, c := range []struct {
		name  string
		owner func(ns string) []metav1.OwnerReference
		want  string
	}{
		{"hand-made", func(string) []metav1.OwnerReference { return nil },
			"Secret demo-auth exists and is not managed by the operator"},
		{"controlled by another object", func(ns string) []metav1.OwnerReference {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}
			if err := apiClient.Create(context.Background(), cm); err != nil {
				t.Fatal(err)
			}
			return []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "app", UID: cm.UID, Controller: ptrTrue()}}
		}, "Secret demo-auth is controlled by ConfigMap app, not by this RedisCluster"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t)
			ctx := context.Background()
			ns := newNamespace(t)
			mine := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-auth", OwnerReferences: c.owner(ns)},
				Data:       map[string][]byte{"password": []byte("the user's own")},
			}
			g.Expect(apiClient.Create(ctx, mine)).To(Succeed())
			rc := newCluster(ns, 6)
			rc.Spec.DisablePassword = false // the default: a generated password in NAME-auth
			g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
			for i := 0; i < 3; i++ {
				h.reconcile(rc)
			}
			sec := &corev1.Secret{}
			g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(mine), sec)).To(Succeed())
			g.Expect(sec.ResourceVersion).To(Equal(mine.ResourceVersion), "the Secret is untouched")
			g.Expect(sec.Data).To(Equal(mine.Data))
			g.Expect(get(t, rc).Status.Reason).To(ContainSubstring(c.want))
			g.Expect(warnings(h.events(), ReasonNotOwner)).To(ConsistOf(ContainSubstring(c.want)), "said once")
			err := apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, &appsv1.StatefulSet{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing is applied for the refused cluster: %v", err)
		})
	}
}

// The ownership check and the write are one: the apply of NAME-auth carries the
// resourceVersion of the Secret the operator read and judged its own, so a Secret deleted
// and replaced by someone else's in between is refused by the API server (Conflict)
// rather than taken over by ForceOwnership.
func TestAuthSecretWriteIsPreconditionedOnWhatWasRead(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	ns := newNamespace(t)
	rc := newCluster(ns, 6)
	rc.Spec.DisablePassword = false
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	g.Eventually(func() error { // the first reconciles write NAME-auth, owned by the RedisCluster
		h.reconcile(rc)
		return apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-auth"}, &corev1.Secret{})
	}).Should(Succeed())
	rc = get(t, rc)
	rc.SetGroupVersionKind(redisv1alpha1.GroupVersion.WithKind("RedisCluster"))

	s := &scope{cluster: rc}
	g.Expect(h.r.observeAuth(ctx, s)).To(Succeed())
	g.Expect(s.specErr).NotTo(HaveOccurred())
	g.Expect(s.auth.exists).To(BeTrue())
	// Its own Secret, as read, is written; each write records the new resourceVersion.
	g.Expect(h.r.writeAuthSecret(ctx, s, s.auth.active, "", nil)).To(Succeed())
	g.Expect(h.r.writeAuthSecret(ctx, s, s.auth.active, "", nil)).To(Succeed())

	// Meanwhile NAME-auth is deleted and a Secret of someone else's takes its name.
	g.Expect(apiClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-auth"}})).To(Succeed())
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-auth"}, Data: map[string][]byte{"token": []byte("theirs")}}
	g.Expect(apiClient.Create(ctx, theirs)).To(Succeed())

	err := h.r.writeAuthSecret(ctx, s, s.auth.active, "", nil)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "want a Conflict, got %v", err)
	sec := &corev1.Secret{}
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(theirs), sec)).To(Succeed())
	g.Expect(sec.ResourceVersion).To(Equal(theirs.ResourceVersion), "their Secret is untouched")
	g.Expect(sec.OwnerReferences).To(BeEmpty())

}

func ptrTrue() *bool { b := true; return &b }
