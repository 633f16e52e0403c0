/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

// The labels every rendered object carries (docs/architecture.md). They are defined here
// once; templates/helpers.cue keeps the copy CUE needs, and render's tests check that the
// two agree.
const (
	// LabelName is the label that marks a Redis pod of any RedisCluster; its value is
	// LabelNameValue.
	LabelName = "app.kubernetes.io/name"
	// LabelInstance names the RedisCluster an object belongs to.
	LabelInstance = "app.kubernetes.io/instance"
	// LabelManagedBy is set to ManagedBy.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelNameValue is the value of LabelName.
	LabelNameValue = "redis-cluster"
	// ManagedBy is the operator's name: the value of LabelManagedBy, the field manager of
	// every server-side apply and the source of its events.
	ManagedBy = "redis-cluster-operator"
)

// SelectorLabels select the pods of one RedisCluster: the StatefulSet, both Services
// and status.selector use exactly these two labels.
func SelectorLabels(cluster string) map[string]string {
	return map[string]string{LabelInstance: cluster, LabelName: LabelNameValue}
}

// SelectorString is SelectorLabels as a label selector, in the stable order
// `kubectl scale` and the HPA read from status.selector.
func SelectorString(cluster string) string {
	return LabelInstance + "=" + cluster + "," + LabelName + "=" + LabelNameValue
}
