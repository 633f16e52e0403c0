package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner is the one field manager under which every object is server-side applied.
const FieldOwner = "redis-cluster-operator"

// applyObjects server-side applies the rendered objects that observeKubernetes found
// stale, in their rendered order (the ConfigMap before the StatefulSet that mounts it).
// Objects whose owned fields already hold the rendered values are not sent at all, so an
// idle reconcile writes nothing. It returns the kind/name of each object applied.
func (r *Reconciler) applyObjects(ctx context.Context, s *scope) ([]string, error) {
	var applied []string
	for _, desired := range s.stale {
		// A fresh copy each time: Apply writes the server's answer back into its argument.
		obj := desired.DeepCopy()
		if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
			client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return applied, fmt.Errorf("failed to apply %s %s: %w", desired.GetKind(), desired.GetName(), err)
		}
		applied = append(applied, desired.GetKind()+"/"+desired.GetName())
	}
	return applied, nil
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

// ownedFieldsMatch reports whether the fields our field manager owns in the live object
// hold the rendered values.
func ownedFieldsMatch(live client.Object, desired *unstructured.Unstructured) (bool, error) {
	owned, err := extractOwned(live)
	if err != nil {
		return false, err
	}
	desiredMap, err := normalise(desired.Object)
	if err != nil {
		return false, err
	}
	return equalJSON(comparable(owned), comparable(desiredMap)), nil
}

// extractOwned extracts from the live object the fields our field manager owns (from
// managedFields, with the upstream schema so keyed lists such as containers are followed),
// normalised for comparison.
func extractOwned(live client.Object) (map[string]any, error) {
	var owned any
	var err error
	switch o := live.(type) {
	case *appsv1.StatefulSet:
		owned, err = appsv1ac.ExtractStatefulSet(o, FieldOwner)
	case *corev1.Service:
		owned, err = corev1ac.ExtractService(o, FieldOwner)
	case *corev1.ConfigMap:
		owned, err = corev1ac.ExtractConfigMap(o, FieldOwner)
	default:
		return nil, fmt.Errorf("failed to extract owned fields of %s: unmanaged type %T", live.GetName(), live)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to extract owned fields of %s: %w", live.GetName(), err)
	}
	return normalise(owned)
}

// equalJSON compares two normalised JSON values.
func equalJSON(a, b any) bool { return reflect.DeepEqual(a, b) }

// normalise turns any JSON-able value into plain maps, slices, strings, float64 and
// bools, with empty maps, empty lists and nulls removed, so that values that serialise
// the same compare equal.
func normalise(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal object for comparison: %w", err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("failed to unmarshal object for comparison: %w", err)
	}
	pruned, _ := prune(out).(map[string]any)
	return pruned, nil
}

func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			p := prune(val)
			if p == nil {
				delete(t, k)
				continue
			}
			t[k] = p
		}
		if len(t) == 0 {
			return nil
		}
		return t
	case []any:
		if len(t) == 0 {
			return nil
		}
		for i := range t {
			t[i] = prune(t[i])
		}
		return t
	default:
		return v
	}
}

// comparable keeps what an apply sets: identity, labels, annotations, owners, spec and data.
func comparable(m map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"spec", "data", "binaryData"} {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	if meta, ok := m["metadata"].(map[string]any); ok {
		kept := map[string]any{}
		for _, k := range []string{"name", "namespace", "labels", "annotations", "ownerReferences"} {
			if v, ok := meta[k]; ok {
				kept[k] = v
			}
		}
		out["metadata"] = kept
	}
	return out
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
