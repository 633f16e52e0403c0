package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
)

// A store pod's port is guarded by its token; with the cluster's NetworkPolicy enabled
// (spec.networkPolicy.enabled) it is guarded by a NetworkPolicy of its own too, named like
// the pod, that admits only the operator's pods to it: the peer the cluster's own
// NetworkPolicy admits the operator by (templates/networkpolicy.cue, _operatorPeer), its
// namespace (--operator-namespace) chosen by the kubernetes.io/metadata.name label the API
// server sets, which no tenant can set on another namespace. It is owned by what owns the
// pod and deleted with it (releaseStore), so the owner's deletion takes it too.
//
// Only with the cluster's NetworkPolicy enabled, not always: that peer holds only where
// the operator runs in the cluster, in its namespace, its pods labelled as the chart and
// config/manager label them. Enabling the cluster's NetworkPolicy is where a user says so
// (the operator must reach Redis by that same peer); a policy made without it would cut
// PVC backups off wherever it does not hold (an operator run outside the cluster, pods
// relabelled) for users who never asked for NetworkPolicies, with nothing in the spec to
// fix it. The cluster is the one the backup names (spec.clusterName), or the restoring
// cluster; a backup's whose cluster is gone (its files deleted afterwards) gets none.

// operatorPodName is the app.kubernetes.io/name label of the operator's pods (the chart
// and config/manager set it), the one templates/networkpolicy.cue admits.
const operatorPodName = "redis-cluster-operator"

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;create;update;delete

// storeGuarded tells whether the store pod of owner gets a NetworkPolicy: whether the
// RedisCluster it serves (owner itself, or the backup's spec.clusterName) has
// spec.networkPolicy.enabled.
func (r *Reconciler) storeGuarded(ctx context.Context, owner client.Object) (bool, error) {
	rc, isCluster := owner.(*redisv1alpha1.RedisCluster)
	if b, isBackup := owner.(*redisv1alpha1.RedisClusterBackup); isBackup {
		rc = &redisv1alpha1.RedisCluster{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, rc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
	} else if !isCluster {
		return false, nil
	}
	return rc.Spec.NetworkPolicy != nil && rc.Spec.NetworkPolicy.Enabled, nil
}

// ensureStorePolicy makes the NetworkPolicy name of owner's store pod what storeGuarded
// asks: created (owned by owner) or kept up to date, or deleted. A NetworkPolicy of that
// name the operator did not make for owner is left alone, and refused (StorePodRefused)
// when one is needed. field names the claim in messages.
func (r *Reconciler) ensureStorePolicy(ctx context.Context, owner client.Object, name, field string) (string, string, error) {
	guard, err := r.storeGuarded(ctx, owner)
	if err != nil {
		return "", "", err
	}
	live := &networkingv1.NetworkPolicy{}
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, live)
	exists := err == nil
	switch {
	case client.IgnoreNotFound(err) != nil:
		return "", "", err
	case exists && !metav1.IsControlledBy(live, owner):
		if !guard {
			return "", "", nil
		}
		return ReasonStorePodRefused, notTheOperators(field, "NetworkPolicy", name, owner), nil
	case !guard && exists:
		uid := live.UID
		return "", "", client.IgnoreNotFound(r.Client.Delete(ctx, live, client.Preconditions{UID: &uid}))
	case !guard:
		return "", "", nil
	}
	want := storePolicySpec(owner.GetNamespace(), name, r.operatorNamespace())
	if exists { // the operator's namespace may have changed since
		if equality.Semantic.DeepEqual(live.Spec, want.Spec) {
			return "", "", nil
		}
		live.Spec = want.Spec
		return "", "", r.Client.Update(ctx, live)
	}
	if err := controllerutil.SetControllerReference(owner, want, r.Client.Scheme()); err != nil {
		return "", "", err
	}
	if err := r.Client.Create(ctx, want); apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		return ReasonStorePodRefused, fmt.Sprintf("%s: the NetworkPolicy %s of the store pod was refused: %v", field, name, err), nil
	} else if client.IgnoreAlreadyExists(err) != nil {
		return "", "", fmt.Errorf("creating the NetworkPolicy %s of the store pod: %w", name, err)
	}
	return "", "", nil
}

// operatorNamespace is the namespace of the operator's pods the Renderer was given
// (--operator-namespace), "" when unknown.
func (r *Reconciler) operatorNamespace() string {
	if r.Renderer == nil {
		return ""
	}
	return r.Renderer.OperatorNamespace()
}

// storePolicySpec is the NetworkPolicy of store pod name: ingress to its port from the
// operator's pods only, in namespace operatorNS ("" unknown: in the pod's own namespace,
// as the cluster's NetworkPolicy does). Egress is not restricted.
func storePolicySpec(ns, name, operatorNS string) *networkingv1.NetworkPolicy {
	peer := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{redisv1alpha1.LabelName: operatorPodName}}}
	if operatorNS != "" {
		peer.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": operatorNS}}
	}
	port := intstr.FromInt32(backup.StorePort)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: storeLabels()},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: storePodLabels(name)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{peer},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port}},
			}},
		},
	}
}
