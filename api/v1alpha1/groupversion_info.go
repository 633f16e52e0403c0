/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

// Package v1alpha1 holds the RedisCluster API: a Redis Cluster (sharded, with replicas)
// described the way the original Harmony Cloud operator's CR described it, plus what
// users of the other Redis operators expect (replicas per master, a password Secret,
// scheduling knobs, per-pod volume claims).
//
// +kubebuilder:object:generate=true
// +groupName=redis.middleware.hc.cn
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "redis.middleware.hc.cn", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
