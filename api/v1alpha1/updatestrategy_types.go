/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import "k8s.io/apimachinery/pkg/util/intstr"

// RedisUpdateStrategyType says how new masters get their hash slots.
// +kubebuilder:validation:Enum=AutoReceive;AssignReceive
type RedisUpdateStrategyType string

const (
	// UpdateStrategyAutoReceive gives every new master an even share taken from all
	// masters, the plan of `redis-cli --cluster rebalance --cluster-use-empty-masters`.
	UpdateStrategyAutoReceive RedisUpdateStrategyType = "AutoReceive"
	// UpdateStrategyAssignReceive gives the i-th new master assignStrategies[i].slots
	// slots taken from the masters listed in assignStrategies[i].fromReplicas.
	UpdateStrategyAssignReceive RedisUpdateStrategyType = "AssignReceive"
)

// DefaultPipeline is updateStrategy.pipeline when unset: keys per MIGRATE batch.
const DefaultPipeline = 100

// RedisUpdateStrategy says how hash slots move when masters are added (seed:
// `updateStrategy`).
//
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'AssignReceive' || (has(self.assignStrategies) && size(self.assignStrategies) > 0)",message="spec.updateStrategy.assignStrategies: type AssignReceive needs at least one entry (slots and fromReplicas for each new master)",fieldPath=".assignStrategies",reason="FieldValueRequired"
type RedisUpdateStrategy struct {
	// type is AutoReceive (default: each new master receives an even share of the slots
	// from all masters, assignStrategies unused) or AssignReceive (assignStrategies says,
	// for each new master in order, how many slots it takes and from which masters)
	// (seed: `updateStrategy.type`).
	// +kubebuilder:default=AutoReceive
	// +optional
	Type RedisUpdateStrategyType `json:"type,omitempty"`

	// pipeline is how many keys each MIGRATE batch moves while slots migrate (seed:
	// `updateStrategy.pipeline`, written there as the string "100"). A positive whole
	// number, given as a number (100) or a string of digits ("100"). Default 100.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=10
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self > 0 : self.matches('^[0-9]+$') && self.matches('[1-9]')",message="spec.updateStrategy.pipeline: must be a positive whole number of keys per MIGRATE batch, such as 100 or \"100\""
	// +kubebuilder:default=100
	// +optional
	Pipeline *intstr.IntOrString `json:"pipeline,omitempty"`

	// maxKeysPerSecond caps how many keys per second slot migration moves, all
	// MIGRATE streams together (addition). 0, the default, sets no cap: slots move as
	// fast as Redis allows (docs/migration.md has the write gaps measured). A cap is 100 or more; it also makes MIGRATE batches no
	// larger than the cap and migrates fewer slots at once, so pause and abort stop sooner.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000000
	// +kubebuilder:validation:XValidation:rule="self == 0 || self >= 100",message="spec.updateStrategy.maxKeysPerSecond: 0 (no cap) or at least 100 keys per second"
	// +kubebuilder:default=0
	// +optional
	MaxKeysPerSecond int32 `json:"maxKeysPerSecond,omitempty"`

	// assignStrategies is used by type AssignReceive, which requires at least one
	// entry: entry i is for the i-th master added (seed: `updateStrategy.assignStrategies`).
	// Default empty.
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	AssignStrategies []AssignStrategy `json:"assignStrategies,omitempty"`
}

// AssignStrategy is how many slots one new master takes, and from which masters (seed:
// an item of `updateStrategy.assignStrategies`).
type AssignStrategy struct {
	// slots is how many hash slots the new master takes, 1 to 16384 (seed: `slots`).
	// Slots are taken from the fromReplicas masters in proportion to what they own.
	// Required.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16384
	// +required
	Slots int32 `json:"slots"`

	// fromReplicas lists the masters that give the slots, comma-separated (seed:
	// `fromReplicas`, e.g. "nodeId3,nodeId4"). Each item is a Redis node ID or the name
	// of the pod running that master (e.g. "demo-0"). Required.
	// +kubebuilder:validation:MinLength=1
	// +required
	FromReplicas string `json:"fromReplicas"`
}
