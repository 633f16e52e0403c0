package controller

import (
	"encoding/json"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Comparing a live object with the desired one by the fields the operator owns (its
// managed fields under FieldOwner), so an object already as desired is not applied again.

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
	case *policyv1.PodDisruptionBudget:
		owned, err = policyv1ac.ExtractPodDisruptionBudget(o, FieldOwner)
	case *networkingv1.NetworkPolicy:
		owned, err = networkingv1ac.ExtractNetworkPolicy(o, FieldOwner)
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
