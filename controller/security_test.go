package controller

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// The PodDisruptionBudget is applied with the other objects: controlled by the CR (so the
// garbage collector deletes it with the CR), selecting exactly the StatefulSet's pods, and
// left alone by a reconcile that finds it as rendered.
func TestPodDisruptionBudgetIsAppliedAndOwned(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc := newCluster(newNamespace(t), 6)
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	h.reconcile(rc)
	h.reconcile(rc)

	sts := &appsv1.StatefulSet{}
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(rc), sts)).To(Succeed())
	pdb := &policyv1.PodDisruptionBudget{}
	g.Expect(apiClient.Get(ctx, client.ObjectKeyFromObject(rc), pdb)).To(Succeed())
	g.Expect(pdb.Spec.Selector).To(Equal(sts.Spec.Selector))
	g.Expect(pdb.Spec.MaxUnavailable).To(Equal(ptr.To(intstr.FromInt32(1))))
	owner := metav1.GetControllerOf(pdb)
	g.Expect(owner).NotTo(BeNil())
	g.Expect(owner.UID).To(Equal(get(t, rc).UID))

	h.writes()
	h.reconcile(rc)
	for _, w := range h.writes() {
		g.Expect(w).NotTo(HavePrefix("apply"), "a PodDisruptionBudget as rendered is applied again")
	}
}

// spec.networkPolicy.enabled renders a NetworkPolicy, applied like the other objects;
// turning it off deletes it (and says so), and a NetworkPolicy of the same name the
// operator did not make is never deleted.
func TestNetworkPolicyFollowsTheSpec(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	rc := newCluster(newNamespace(t), 6)
	rc.Spec.NetworkPolicy = &redisv1alpha1.NetworkPolicySpec{Enabled: true}
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	h.reconcile(rc)
	h.reconcile(rc)
	np := &networkingv1.NetworkPolicy{}
	key := client.ObjectKeyFromObject(rc)
	g.Expect(apiClient.Get(ctx, key, np)).To(Succeed())
	g.Expect(metav1.GetControllerOf(np).UID).To(Equal(get(t, rc).UID))
	g.Expect(np.Spec.Ingress).To(HaveLen(2), "own pods to 6379/16379, anyone to 6379")

	h.writes()
	h.reconcile(rc)
	for _, w := range h.writes() {
		g.Expect(w).NotTo(HavePrefix("apply"), "a NetworkPolicy as rendered is applied again")
	}

	latest := get(t, rc)
	latest.Spec.NetworkPolicy.Enabled = false
	g.Expect(apiClient.Update(ctx, latest)).To(Succeed())
	h.events()
	h.reconcile(rc)
	err := apiClient.Get(ctx, key, np)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "NetworkPolicy still there after enabled: false: %v", err)
	deleted := 0
	for _, e := range h.events() {
		if strings.Contains(e, ReasonDeletedUnrendered) && strings.Contains(e, "NetworkPolicy/demo") {
			deleted++
		}
	}
	g.Expect(deleted).To(Equal(1))

	// A hand-made NetworkPolicy named like the cluster's is not the operator's to delete.
	mine := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: rc.Name},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	g.Expect(apiClient.Create(ctx, mine)).To(Succeed())
	h.reconcile(rc)
	g.Expect(apiClient.Get(ctx, key, np)).To(Succeed())
	g.Expect(np.UID).To(Equal(mine.UID))
}
