/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ScheduleLabel names, on a RedisClusterBackup, the RedisClusterBackupSchedule that
// created it.
const ScheduleLabel = "redis.middleware.hc.cn/schedule"

// RedisClusterBackupScheduleSpec is a backup taken at an interval, and how many of them
// to keep.
//
// +kubebuilder:validation:XValidation:rule="has(self.s3) != has(self.pvc)",message="exactly one of spec.s3 and spec.pvc: backups go to an S3-compatible bucket or to a PersistentVolumeClaim"
type RedisClusterBackupScheduleSpec struct {
	// clusterName is the RedisCluster of this namespace to back up.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ClusterName string `json:"clusterName"`

	// every is the interval between two backups ("1h", "24h", "30m"); at least 10s. The
	// first backup is taken when the schedule is created; a backup is not started while
	// the previous one is still Pending or Running.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="spec.every: at least 10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	// +required
	Every metav1.Duration `json:"every"`

	// keep is how many Succeeded backups of this schedule are kept: once a backup
	// succeeds, the older Succeeded ones beyond keep are deleted with their objects, and
	// the Failed ones older than it too. A Failed backup never counts.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +required
	Keep int32 `json:"keep"`

	// s3 is where every backup goes (as a RedisClusterBackup's spec.s3). Exactly one
	// of s3 and pvc.
	// +optional
	S3 *S3Destination `json:"s3,omitempty"`

	// pvc is where every backup goes (as a RedisClusterBackup's spec.pvc). Exactly one
	// of s3 and pvc.
	// +optional
	PVC *PVCDestination `json:"pvc,omitempty"`

	// suspend stops new backups; retention goes on.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// RedisClusterBackupScheduleStatus is what the schedule did.
type RedisClusterBackupScheduleStatus struct {
	// lastScheduleTime is when the schedule last created a backup; nextScheduleTime when it
	// will create the next.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// lastSuccessfulBackup is the newest of its backups that Succeeded, and
	// lastSuccessfulTime when it did.
	// +optional
	LastSuccessfulBackup string `json:"lastSuccessfulBackup,omitempty"`
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// kept is the number of its Succeeded backups that exist.
	// +optional
	Kept int32 `json:"kept,omitempty"`
	// reason is a CamelCase word for what the schedule last did or why it waits; message
	// the details.
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// RedisClusterBackupSchedule creates a RedisClusterBackup of a cluster every interval and
// keeps the last spec.keep that succeeded, deleting older ones with their objects.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=redisclusterbackupschedules,singular=redisclusterbackupschedule,shortName=recbs,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=".spec.clusterName"
// +kubebuilder:printcolumn:name="Every",type=string,JSONPath=".spec.every"
// +kubebuilder:printcolumn:name="Keep",type=integer,JSONPath=".spec.keep"
// +kubebuilder:printcolumn:name="Kept",type=integer,JSONPath=".status.kept"
// +kubebuilder:printcolumn:name="Last Success",type=date,JSONPath=".status.lastSuccessfulTime"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.reason"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type RedisClusterBackupSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RedisClusterBackupScheduleSpec   `json:"spec"`
	Status RedisClusterBackupScheduleStatus `json:"status,omitempty"`
}

// RedisClusterBackupScheduleList is a list of RedisClusterBackupSchedules.
//
// +kubebuilder:object:root=true
type RedisClusterBackupScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RedisClusterBackupSchedule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RedisClusterBackupSchedule{}, &RedisClusterBackupScheduleList{})
}
