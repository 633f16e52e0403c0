package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// componentLabel marks the per-pod external Services (templates/service_external.cue).
const componentLabel = "app.kubernetes.io/component"

// FieldOwner is the one field manager under which every object is server-side applied.
const FieldOwner = redisv1alpha1.ManagedBy

// applyObjects server-side applies the rendered objects that observeKubernetes found
// stale, in their rendered order (the ConfigMap before the StatefulSet that mounts it).
// Objects whose owned fields already hold the rendered values are not sent at all, so an
// idle reconcile writes nothing. It returns the kind/name of each object applied. An
// object the API server refuses stops the apply (what follows may depend on it) and is
// reported once as a Warning and in the status reason, with the API server's message.
func (r *Reconciler) applyObjects(ctx context.Context, s *scope) ([]string, error) {
	return r.apply(ctx, s, s.stale)
}

// apply server-side applies objs in order, as applyObjects says; s.held follows the
// StatefulSet's size when it is among them.
func (r *Reconciler) apply(ctx context.Context, s *scope, objs []*unstructured.Unstructured) ([]string, error) {
	var applied []string
	for _, desired := range objs {
		// A fresh copy each time: Apply writes the server's answer back into its argument.
		obj := desired.DeepCopy()
		logApply(ctx, s, desired)
		if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
			client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			err = fmt.Errorf("failed to apply %s %s: %w", desired.GetKind(), desired.GetName(), err)
			if desired.GetLabels()[componentLabel] == "external" {
				// A per-pod external Service (a node port taken or out of range): said by
				// reconcileExternal, and the rest goes on, so the cluster serves on its
				// pod addresses.
				if s.externalRefused == nil {
					s.externalRefused = map[string]string{}
				}
				s.externalRefused[strings.TrimSuffix(desired.GetName(), "-external")] = err.Error()
				continue
			}
			r.warnOnce(s, ReasonApplyFailed, err.Error())
			return applied, err
		}
		if desired.GetKind() == "StatefulSet" {
			s.appliedStatefulSet = true
			if n, found, _ := unstructured.NestedInt64(desired.Object, "spec", "replicas"); found {
				s.held = int32(n)
			}
		}
		applied = append(applied, desired.GetKind()+"/"+desired.GetName())
	}
	return applied, nil
}

// observeUnrendered lists the optional objects this RedisCluster controls that its spec
// no longer renders (a NetworkPolicy after spec.networkPolicy.enabled went false), for
// deleteUnrendered. Nothing is listed while nothing is rendered (a refused spec).
func (r *Reconciler) observeUnrendered(ctx context.Context, s *scope) error {
	s.unrendered = nil
	if len(s.rendered) == 0 {
		return nil
	}
	rendered := map[string]bool{}
	for _, obj := range s.rendered {
		rendered[objectKey(obj)] = true
	}
	for _, obj := range optionalObjects(s.cluster.Name) {
		kind := kindOf(obj)
		if rendered[kind+"/"+obj.GetName()] {
			continue
		}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: obj.GetName()}, obj)
		switch {
		case client.IgnoreNotFound(err) != nil:
			return fmt.Errorf("failed to get %s %s: %w", kind, obj.GetName(), err)
		case err != nil:
			continue
		}
		if owner := metav1.GetControllerOf(obj); owner != nil && owner.UID == s.cluster.UID {
			s.unrendered = append(s.unrendered, obj)
		}
	}
	return nil
}

// deleteUnrendered deletes what observeUnrendered found, each with its UID as a
// precondition so an object made again since is left alone. It returns the kind/name of
// each object deleted.
func (r *Reconciler) deleteUnrendered(ctx context.Context, s *scope) ([]string, error) {
	var deleted []string
	for _, obj := range s.unrendered {
		what := kindOf(obj) + "/" + obj.GetName()
		log.FromContext(ctx).Info("Deleting an object the spec no longer renders", "object", what)
		uid := obj.GetUID()
		err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid})
		if client.IgnoreNotFound(err) != nil {
			return deleted, fmt.Errorf("failed to delete %s: %w", what, err)
		}
		deleted = append(deleted, what)
	}
	s.unrendered = nil
	return deleted, nil
}

// kindOf is the kind of the typed objects optionalObjects lists.
func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *networkingv1.NetworkPolicy:
		return "NetworkPolicy"
	}
	return fmt.Sprintf("%T", obj)
}

// logApply says what is about to be applied; a StatefulSet whose size changes (a scale-out,
// a revert of a hand resize) says so, with both sizes.
func logApply(ctx context.Context, s *scope, desired *unstructured.Unstructured) {
	logger := log.FromContext(ctx)
	kind := desired.GetKind()
	n, found, _ := unstructured.NestedInt64(desired.Object, "spec", "replicas")
	if sts := s.statefulSet; kind == "StatefulSet" && found && sts != nil && sts.Spec.Replicas != nil && int64(*sts.Spec.Replicas) != n {
		logger.Info("Resizing StatefulSet", "StatefulSet", klog.KObj(desired), "from", *sts.Spec.Replicas, "to", n)
		return
	}
	logger.V(1).Info("Applying "+kind, kind, klog.KObj(desired))
}

// Names of the objects a RedisCluster renders (docs/architecture.md; a test checks them
// against the templates).
func configMapName(cluster string) string     { return cluster + "-config" }
func clientServiceName(cluster string) string { return cluster + "-client" }

// renderedNames are the kind/name of every object a RedisCluster of this name renders
// by default. The optional NetworkPolicy (optionalNames) is named after the cluster too,
// so it never clashes with another RedisCluster's objects.
func renderedNames(cluster string) []string {
	return []string{"StatefulSet/" + cluster, "Service/" + cluster, "Service/" + clientServiceName(cluster),
		"ConfigMap/" + configMapName(cluster), "PodDisruptionBudget/" + cluster}
}

// optionalObjects are the objects a RedisCluster renders only when its spec asks for them
// (spec.networkPolicy.enabled); one the operator applied earlier and the spec no longer
// renders is deleted (observeUnrendered, deleteUnrendered).
func optionalObjects(cluster string) []client.Object {
	return []client.Object{&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: cluster}}}
}

// notOurs says why the live object is not this RedisCluster's to apply, "" when it is:
// it is controlled by this RedisCluster, or by nobody but was made by this operator for
// a RedisCluster of this name (left behind by `kubectl delete --cascade=orphan`, so the
// re-applied RedisCluster adopts it again). Anything else is left alone.
func notOurs(kind string, live client.Object, rc *redisv1alpha1.RedisCluster) string {
	what := kind + " " + live.GetName()
	owner := metav1.GetControllerOf(live)
	switch {
	case owner == nil && madeByOperatorFor(live, rc.Name):
		return ""
	case owner == nil:
		return fmt.Sprintf("%s exists and is not managed by the operator: it is left alone; delete or rename it, or rename this RedisCluster", what)
	case owner.UID == rc.UID:
		return ""
	case owner.Kind == rc.Kind && owner.Name == rc.Name:
		return fmt.Sprintf("%s belongs to a deleted RedisCluster %s (uid %s): waiting for the garbage collector to remove it", what, owner.Name, owner.UID)
	default:
		return fmt.Sprintf("%s is controlled by %s %s, not by this RedisCluster: it is left alone; rename one of the two", what, owner.Kind, owner.Name)
	}
}

// madeByOperatorFor reports whether the operator applied the object for a RedisCluster
// of this name: its field manager is in managedFields and the instance label names it.
func madeByOperatorFor(obj client.Object, cluster string) bool {
	if obj.GetLabels()[redisv1alpha1.LabelInstance] != cluster {
		return false
	}
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager == FieldOwner && mf.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// appliedReplicas is the StatefulSet's size when the operator's field manager owns
// spec.replicas, i.e. the size the operator last applied; ours is false when another
// manager resized it since (an Update or a forced apply takes the field over).
func appliedReplicas(sts *appsv1.StatefulSet) (n int32, ours bool) {
	if sts == nil || sts.Spec.Replicas == nil {
		return 0, false
	}
	owned, err := extractOwned(sts)
	if err != nil {
		return 0, false
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(owned, "spec", "replicas"); !found {
		return 0, false
	}
	return *sts.Spec.Replicas, true
}

// replicasManager names the field manager, other than the operator, that owns the
// StatefulSet's spec.replicas ("" when none does), for the Warning that reverts it.
func replicasManager(sts *appsv1.StatefulSet) string {
	for _, mf := range sts.ManagedFields {
		if mf.Manager == FieldOwner || mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(mf.FieldsV1.Raw, &fields) != nil {
			continue
		}
		if spec, ok := fields["f:spec"].(map[string]any); ok {
			if _, ok := spec["f:replicas"]; ok {
				return mf.Manager
			}
		}
	}
	return ""
}

// observeNameClashes notes other RedisClusters of the namespace that would render an
// object with the name of one this RedisCluster renders (CR shop's client Service and
// CR shop-client's headless Service are both Service shop-client). The object stays
// with whoever controls it; the other cluster is refused (observeKubernetes) and this one
// says so in its status and a Warning, so both users learn of the clash.
func (r *Reconciler) observeNameClashes(ctx context.Context, s *scope) error {
	rc := s.cluster
	list := &redisv1alpha1.RedisClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(rc.Namespace)); err != nil {
		return fmt.Errorf("failed to list RedisClusters in %s: %w", rc.Namespace, err)
	}
	ours := map[string]bool{}
	for _, n := range renderedNames(rc.Name) {
		ours[n] = true
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == rc.UID {
			continue
		}
		for _, n := range renderedNames(other.Name) {
			if ours[n] {
				s.notices = append(s.notices, fmt.Sprintf("RedisCluster %s would also render %s; the operator never gives an object to a second RedisCluster, so one of the two cannot be served: rename it", other.Name, n))
			}
		}
	}
	return nil
}

// liveObject reads the typed object the rendered one stands for, from the cache.
// It returns nil when the object does not exist yet.
func (r *Reconciler) liveObject(ctx context.Context, desired *unstructured.Unstructured) (client.Object, error) {
	var live client.Object
	switch desired.GetKind() {
	case "StatefulSet":
		live = &appsv1.StatefulSet{}
	case "Service":
		live = &corev1.Service{}
	case "ConfigMap":
		live = &corev1.ConfigMap{}
	case "PodDisruptionBudget":
		live = &policyv1.PodDisruptionBudget{}
	case "NetworkPolicy":
		live = &networkingv1.NetworkPolicy{}
	default:
		return nil, fmt.Errorf("failed to read %s %s: the renderer produced a kind the operator does not manage", desired.GetKind(), desired.GetName())
	}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: desired.GetNamespace(), Name: desired.GetName()}, live)
	if err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to get %s %s: %w", desired.GetKind(), desired.GetName(), err)
	}
	return live, nil
}

// setOwner makes the cluster the controlling owner, so that garbage collection removes
// the objects with the cluster and their changes wake the reconciler.
func setOwner(obj *unstructured.Unstructured, owner client.Object) {
	gvk := owner.GetObjectKind().GroupVersionKind()
	obj.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion:         gvk.GroupVersion().String(),
		Kind:               gvk.Kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}})
}
