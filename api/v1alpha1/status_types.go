/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RedisClusterPhase is where the cluster is in its life (seed: `status.phase`).
// +kubebuilder:validation:Enum="";None;Creating;Running;Scaling;Upgrading;Failed;Deleting
type RedisClusterPhase string

const (
	// PhaseNone: the CR was just created.
	PhaseNone RedisClusterPhase = "None"
	// PhaseCreating: the operator created the objects and waits for the instances, then
	// builds the cluster (meet, slots, replicas).
	PhaseCreating RedisClusterPhase = "Creating"
	// PhaseRunning: the cluster matches the spec and serves.
	PhaseRunning RedisClusterPhase = "Running"
	// PhaseScaling: the instance count changed; instances are added or removed and
	// slots move.
	PhaseScaling RedisClusterPhase = "Scaling"
	// PhaseUpgrading: the pod template changed; pods are replaced one by one.
	PhaseUpgrading RedisClusterPhase = "Upgrading"
	// PhaseFailed: an operation timed out or cannot proceed, or the cluster is broken;
	// status.reason says why.
	PhaseFailed RedisClusterPhase = "Failed"
	// PhaseDeleting: the CR is being deleted with finalizers: foreground.
	PhaseDeleting RedisClusterPhase = "Deleting"
)

// RedisClusterStatus is what the operator observed (seed: `status`).
type RedisClusterStatus struct {
	// replicas is the number of Redis instances up (seed: `replicas`); the scale
	// subresource reads it.
	// +optional
	Replicas int32 `json:"replicas"`

	// masters is the number of masters holding slots (addition).
	// +optional
	Masters int32 `json:"masters"`

	// phase is where the cluster is in its life (seed: `phase`): "" or None (just
	// created), Creating, Running, Scaling, Upgrading, Failed, Deleting.
	// +optional
	Phase RedisClusterPhase `json:"phase,omitempty"`

	// reason says, in words, why the phase is what it is (seed: `reason`), e.g. why
	// it failed or why a request cannot be done.
	// +optional
	Reason string `json:"reason,omitempty"`

	// conditions has one entry per Redis instance (seed: `conditions`).
	// +optional
	Conditions []RedisClusterCondition `json:"conditions,omitempty"`

	// observedGeneration is the metadata.generation of the spec last reconciled
	// successfully (addition).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// selector is the label selector of the Redis pods, as a string, for the scale
	// subresource (addition), e.g.
	// "app.kubernetes.io/instance=NAME,app.kubernetes.io/name=redis-cluster".
	// +optional
	Selector string `json:"selector,omitempty"`

	// statefulSetReplicas is the size the operator holds the StatefulSet at (addition):
	// spec.replicas once the cluster has reached it; during a scale-in the old, larger
	// size until the leaving nodes are empty and forgotten. A StatefulSet resized by
	// anyone else (`kubectl scale sts`, a GitOps tool) is put back to it, with a
	// Warning event. 0 until the operator has applied the StatefulSet.
	// +optional
	StatefulSetReplicas int32 `json:"statefulSetReplicas,omitempty"`

	// clusterConditions are conditions of the whole cluster, in the standard shape
	// (addition; kept apart so `conditions` keeps the seed's per-instance shape).
	// +listType=map
	// +listMapKey=type
	// +optional
	ClusterConditions []metav1.Condition `json:"clusterConditions,omitempty"`

	// liveConfig is what the operator applied to the running nodes with CONFIG SET
	// (addition): the redis.conf settings that change without a restart
	// (docs/configuration.md).
	// +optional
	LiveConfig *LiveConfigStatus `json:"liveConfig,omitempty"`

	// progress is how far the current resize or upgrade has got (addition): set
	// while Scaling or Upgrading, kept with finishTime once the phase is over, until the
	// next operation starts.
	// +optional
	Progress *OperationProgress `json:"progress,omitempty"`

	// auth says which password and ACL users the instances have (addition), without
	// any password: hashes only. Absent without spec.passwordSecret.
	// +optional
	Auth *AuthStatus `json:"auth,omitempty"`

	// tls says which certificate every instance serves (addition). Absent without
	// spec.tls.
	// +optional
	TLS *TLSStatus `json:"tls,omitempty"`

	// restore is how the restore of spec.restoreFrom went (addition). Absent without
	// spec.restoreFrom.
	// +optional
	Restore *RestoreStatus `json:"restore,omitempty"`
}

// RestoreStatus is the restore of spec.restoreFrom: the cluster moves to Running only
// once completedAt is set.
type RestoreStatus struct {
	// backup is the RedisClusterBackup restored.
	Backup string `json:"backup"`
	// reason is a CamelCase word for where the restore is (RestoreStarted,
	// RestoreSucceeded), why it waits or an attempt failed and is retried (BackupNotFound,
	// BackupNotSucceeded, SecretMissing, S3Error, ClusterNotEmpty, RestoreFailed), or why
	// it failed for good (S3AccessDenied, BackupObjectMissing, ChecksumMismatch,
	// IncompatibleBackup: failedAt is set); message the details.
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// keys restored so far (or in all, once completed); bytes: the keys and values sent
	// (RESTORE payloads, strings' values);
	// expired: keys of the backup whose expiry had passed, not written.
	// +optional
	Keys int64 `json:"keys,omitempty"`
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
	// +optional
	Expired int64 `json:"expired,omitempty"`
	// attempts counts the restores started. An attempt cut short (an error, an operator
	// restart) is started again from the beginning: every key is written with RESTORE
	// REPLACE, so keys an earlier attempt wrote are overwritten with the same values.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// startedAt is when the operator checked the cluster empty and began; set before the
	// first key is written.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// completedAt is when every key was in.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// failedAt is when the restore failed for a cause no retry cures (reason says which):
	// it is not tried again, and the cluster turns Failed. Fix the cause, delete the
	// RedisCluster and create it again.
	// +optional
	FailedAt *metav1.Time `json:"failedAt,omitempty"`
}

// TLSStatus is the certificate of spec.tls.secretName every instance was last seen
// serving.
type TLSStatus struct {
	// secretHash is the first 16 hex digits of the sha256 of the Secret's tls.crt, tls.key
	// and ca.crt that every instance has loaded. When the Secret's content no longer
	// matches it (a renewal), the operator has every instance load the new files with
	// CONFIG SET, with no restart, then records the new hash.
	// +optional
	SecretHash string `json:"secretHash,omitempty"`

	// serial is the serial number (hex) of the certificate every instance serves.
	// +optional
	Serial string `json:"serial,omitempty"`

	// notAfter is when that certificate expires.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
}

// LiveConfigStatus is what the operator applied of redis.conf's live directives.
type LiveConfigStatus struct {
	// settings are the live directives redis.conf sets, with the values every node in
	// nodes was given with CONFIG SET.
	// +optional
	Settings map[string]string `json:"settings,omitempty"`

	// nodes are the pods that have the settings, each as POD/UID/RESTARTS (the pod's UID
	// shortened, the redis container's restart count): a pod restarted or replaced since
	// is given them again, the others are not asked.
	// +optional
	Nodes []string `json:"nodes,omitempty"`
}

// OperationProgress is how far a resize (slots migrating) or an upgrade (pods replaced)
// has got. The operator writes it once per migration step (at most every two seconds or
// so), not once per batch.
type OperationProgress struct {
	// operation is Scaling or Upgrading: the phase this progress is of.
	Operation RedisClusterPhase `json:"operation"`

	// summary is the progress in a few words, shown by `kubectl get rec` as Progress:
	// "1234/5461 slots", "paused at 1234/5461 slots", "3/6 pods", "done in 14s".
	// +optional
	Summary string `json:"summary,omitempty"`

	// startTime is when the operation began.
	StartTime metav1.Time `json:"startTime"`

	// finishTime is when the cluster was Running again; unset while under way.
	// +optional
	FinishTime *metav1.Time `json:"finishTime,omitempty"`

	// slotsToMove is the slots the resize moves in all: those moved plus those the
	// current plan still has to move (a plan changed mid-way, as by an abort, changes it).
	// +optional
	SlotsToMove int32 `json:"slotsToMove,omitempty"`

	// slotsMoved is the slots moved so far.
	// +optional
	SlotsMoved int32 `json:"slotsMoved,omitempty"`

	// keysMoved is the keys moved so far.
	// +optional
	KeysMoved int64 `json:"keysMoved,omitempty"`

	// keysPerSecond is the rate of the last migration step.
	// +optional
	KeysPerSecond int64 `json:"keysPerSecond,omitempty"`

	// estimatedSecondsLeft is the time the slots left would take at the last step's
	// pace of slots; unset before the first slot moved.
	// +optional
	EstimatedSecondsLeft *int64 `json:"estimatedSecondsLeft,omitempty"`

	// podsTotal and podsDone count an upgrade's pods and those on the new template.
	// +optional
	PodsTotal int32 `json:"podsTotal,omitempty"`
	// +optional
	PodsDone int32 `json:"podsDone,omitempty"`

	// paused is true while spec.pause holds the operation.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// AuthStatus is what the operator applied of spec.passwordSecret and spec.users.
type AuthStatus struct {
	// passwordHash identifies the password the instances and the operator use: the
	// first 16 hex digits of sha256(RedisCluster UID + password), so two clusters with
	// the same password show different hashes and the value gives no dictionary hint
	// across clusters.
	// +optional
	PasswordHash string `json:"passwordHash,omitempty"`

	// previousPasswordHash is set while a rotation is under way: the password that is
	// still accepted until every instance has the new one.
	// +optional
	PreviousPasswordHash string `json:"previousPasswordHash,omitempty"`

	// users are the spec.users names applied to every instance.
	// +optional
	Users []string `json:"users,omitempty"`
}

// RedisClusterCondition is the state of one Redis instance (seed: an item of
// `status.conditions`).
type RedisClusterCondition struct {
	// name is the pod's name, e.g. "demo-0" (seed: `name`).
	// +optional
	Name string `json:"name,omitempty"`

	// instance is the instance's address, ip:port (seed: `instance`).
	// +optional
	Instance string `json:"instance,omitempty"`

	// type is the instance's role: master or slave (seed: `type`), Redis' own words
	// (redis.RoleMaster, redis.RoleSlave).
	// +optional
	Type string `json:"type,omitempty"`

	// masterNodeId is the node ID of the master this instance replicates; a master's
	// own node ID for a master (seed: `masterNodeId`).
	// +optional
	MasterNodeID string `json:"masterNodeId,omitempty"`

	// nodeId is the instance's Redis Cluster node ID (seed: `nodeId`).
	// +optional
	NodeID string `json:"nodeId,omitempty"`

	// domainName is the pod's DNS name, NAME-i.NAME.NS.svc.cluster.local (seed:
	// `domainName`).
	// +optional
	DomainName string `json:"domainName,omitempty"`

	// slots are the hash slots the instance serves, e.g. "0-5460" or
	// "0-100,200-300"; empty for a replica (seed: `slots`).
	// +optional
	Slots string `json:"slots,omitempty"`

	// hostname is the name of the node the pod runs on (seed: `hostname`).
	// +optional
	Hostname string `json:"hostname,omitempty"`

	// hostIP is the IP of the node the pod runs on (seed: `hostIP`).
	// +optional
	HostIP string `json:"hostIP,omitempty"`

	// server is the server the instance runs and its version, as the instance itself
	// says (INFO server), e.g. "redis 8.0.2" or "valkey 9.1.2" (addition): not the
	// image's tag. Kept from the last answer while the instance does not answer at the
	// same address; empty until it first answers.
	// +optional
	Server string `json:"server,omitempty"`

	// externalAddress is the address, host:port, the instance announces to clients
	// outside Kubernetes (addition; spec.externalAccess): the one MOVED and CLUSTER SLOTS
	// give. Empty without spec.externalAccess or until the instance announces it.
	// +optional
	ExternalAddress string `json:"externalAddress,omitempty"`

	// status is "True" when the instance is up and part of the cluster, "False" when
	// not, "Unknown" when it cannot be told (seed: `status`).
	// +optional
	Status corev1.ConditionStatus `json:"status,omitempty"`

	// reason is a CamelCase word for the status (seed: `reason`).
	// +optional
	Reason string `json:"reason,omitempty"`

	// message says the same for humans (seed: `message`).
	// +optional
	Message string `json:"message,omitempty"`

	// lastTransitionTime is when status last changed (seed: `lastTransitionTime`).
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitzero"`
}
