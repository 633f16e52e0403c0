/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupPhase is where a RedisClusterBackup is.
type BackupPhase string

const (
	// BackupPending: not started yet, or waiting (status.reason says for what: the
	// cluster missing or not Running, slots migrating, a node failing, a Secret missing).
	BackupPending BackupPhase = "Pending"
	// BackupRunning: the cut is taken; the masters' snapshots are being uploaded.
	BackupRunning BackupPhase = "Running"
	// BackupSucceeded: every shard's object and the manifest are in the store, checked.
	BackupSucceeded BackupPhase = "Succeeded"
	// BackupFailed: the backup stopped (status.reason); its objects, if any, are not a
	// backup: no manifest was written.
	BackupFailed BackupPhase = "Failed"
)

// Keys of the credentials Secret an S3 destination names.
const (
	S3AccessKeyIDKey     = "accessKeyID"
	S3SecretAccessKeyKey = "secretAccessKey"
)

// Deletion policies of a backup's objects (spec.deletionPolicy).
const (
	// DeletionRetain: deleting the RedisClusterBackup leaves its objects in the store.
	DeletionRetain = "Retain"
	// DeletionDelete: deleting the RedisClusterBackup deletes its objects first (finalizer).
	DeletionDelete = "Delete"
)

// BackupObjectsFinalizer holds a RedisClusterBackup with deletionPolicy Delete until its
// objects are deleted from the store.
const BackupObjectsFinalizer = "redis.middleware.hc.cn/backup-objects"

// RedisClusterBackupSpec names the cluster to back up and where to. Both are fixed once
// created: a backup is one cut of one cluster.
//
// +kubebuilder:validation:XValidation:rule="has(self.s3) != has(self.pvc)",message="exactly one of spec.s3 and spec.pvc: a backup goes to an S3-compatible bucket or to a PersistentVolumeClaim"
// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName && has(self.s3) == has(oldSelf.s3) && (!has(self.s3) || self.s3 == oldSelf.s3) && has(self.pvc) == has(oldSelf.pvc) && (!has(self.pvc) || self.pvc == oldSelf.pvc)",message="spec.clusterName, spec.s3 and spec.pvc are immutable: a backup is one cut of one cluster to one place; create another RedisClusterBackup",reason="FieldValueForbidden"
type RedisClusterBackupSpec struct {
	// clusterName is the RedisCluster of this namespace to back up. It must be Running.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ClusterName string `json:"clusterName"`

	// s3 is the S3-compatible object store the snapshots go to: one object per master,
	// PREFIX/NAMESPACE/NAME/shard-N.rdb, then PREFIX/NAMESPACE/NAME/manifest.json last
	// (a backup without its manifest is not a backup). Exactly one of s3 and pvc.
	// +optional
	S3 *S3Destination `json:"s3,omitempty"`

	// pvc is a PersistentVolumeClaim of this namespace the snapshots go to, as files with
	// the names the objects have in a bucket (PREFIX/NAMESPACE/NAME/shard-N.rdb, then
	// manifest.json), written by a store pod the operator runs with the claim mounted.
	// Exactly one of s3 and pvc.
	// +optional
	PVC *PVCDestination `json:"pvc,omitempty"`

	// deletionPolicy says what deleting this RedisClusterBackup does to its objects:
	// Retain (the default) leaves them in the store; Delete deletes them first (the
	// operator holds the resource with a finalizer until the store confirms). It may be
	// changed at any time.
	// +kubebuilder:validation:Enum=Retain;Delete
	// +kubebuilder:default=Retain
	// +optional
	DeletionPolicy string `json:"deletionPolicy,omitempty"`
}

// S3Destination is a bucket of an S3-compatible object store.
type S3Destination struct {
	// endpoint is the store's URL, http:// or https:// (path-style requests).
	// +kubebuilder:validation:Pattern=`^https?://[^/\s]+/?$`
	// +required
	Endpoint string `json:"endpoint"`
	// bucket must exist; a backup never creates one.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +required
	Bucket string `json:"bucket"`
	// prefix is prepended to every object's name (no leading or trailing slash needed).
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// region signs the requests; default us-east-1.
	// +optional
	Region string `json:"region,omitempty"`
	// credentialsSecret names a Secret of this namespace with the keys accessKeyID and
	// secretAccessKey.
	// +required
	CredentialsSecret LocalName `json:"credentialsSecret"`
	// caSecret, for an https endpoint signed by a private CA: a Secret of this namespace
	// whose key (default ca.crt) holds the PEM bundle to trust.
	// +optional
	CASecret *CAReference `json:"caSecret,omitempty"`
}

// PVCDestination is a PersistentVolumeClaim of the backup's namespace. It is mounted by
// a store pod (of the operator's image, owned by the backup or the restoring cluster,
// deleted when done) while the operator writes, reads or deletes files: ReadWriteOnce
// suffices.
type PVCDestination struct {
	// claimName is the PersistentVolumeClaim; it must exist, and be Bound within 2
	// minutes of the store pod's creation (WaitForFirstConsumer binds it then).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ClaimName string `json:"claimName"`
	// prefix is prepended to every file's path in the volume (no leading or trailing
	// slash needed).
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(e, e == '..') && !self.startsWith('/')",message="spec.pvc.prefix: a path inside the volume: no '..' element and no leading '/'"
	// +optional
	Prefix string `json:"prefix,omitempty"`
}

// CAReference is a key of a Secret holding PEM certificates.
type CAReference struct {
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
	// key holding the PEM bundle; default ca.crt.
	// +kubebuilder:default="ca.crt"
	// +optional
	Key string `json:"key,omitempty"`
}

// LocalName names an object of the same namespace.
type LocalName struct {
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// RedisClusterBackupStatus is what the backup did.
type RedisClusterBackupStatus struct {
	// phase: Pending, Running, Succeeded or Failed.
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`
	// reason is a CamelCase word for why it waits or failed; message the details.
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// cutStartedAt is when writes were paused on the first master and cutEndedAt when the
	// last master resumed them: every write acknowledged before cutStartedAt is in the
	// backup, no write sent after cutEndedAt is.
	// +optional
	CutStartedAt *metav1.MicroTime `json:"cutStartedAt,omitempty"`
	// +optional
	CutEndedAt *metav1.MicroTime `json:"cutEndedAt,omitempty"`
	// writePause is how long writes were paused, as a duration ("7.5ms").
	// +optional
	WritePause string `json:"writePause,omitempty"`
	// completedAt is when the backup succeeded or failed.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// progress counts what is uploaded.
	// +optional
	Progress BackupProgress `json:"progress,omitempty"`
	// rdbVersion is the snapshots' RDB format version; a restore needs a Redis that reads it.
	// +optional
	RDBVersion int32 `json:"rdbVersion,omitempty"`
	// redisVersion is the Redis version of the masters at the cut; for Valkey 8 and
	// later, which name no Redis version, the server and its version ("valkey 9.1.2").
	// +optional
	RedisVersion string `json:"redisVersion,omitempty"`
	// shards has one entry per master at the cut.
	// +optional
	// +listType=atomic
	Shards []BackupShard `json:"shards,omitempty"`
}

// BackupProgress counts a backup's work.
type BackupProgress struct {
	// shards is the number of masters at the cut; shardsDone how many are uploaded.
	// +optional
	Shards int32 `json:"shards,omitempty"`
	// +optional
	ShardsDone int32 `json:"shardsDone,omitempty"`
	// bytes uploaded, and keys read from the uploaded snapshots.
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
	// +optional
	Keys int64 `json:"keys,omitempty"`
	// summary is what kubectl get shows ("2/3 shards, 120 MiB").
	// +optional
	Summary string `json:"summary,omitempty"`
}

// BackupShard is one master's snapshot.
type BackupShard struct {
	// nodeID is the master's Redis node ID at the cut; slots its slot ranges ("0-5460").
	NodeID string `json:"nodeID"`
	Slots  string `json:"slots"`
	// replicationOffset is where the snapshot ends in the master's write stream.
	ReplicationOffset int64 `json:"replicationOffset"`
	// object is the object's name in the bucket; size its bytes; sha256 its checksum.
	Object string `json:"object"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// keys is the number of keys in the snapshot.
	Keys int64 `json:"keys"`
}

// RedisClusterBackup is one consistent backup of a RedisCluster: every master's data at
// one point of the write stream, in an S3-compatible object store or on a
// PersistentVolumeClaim.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=redisclusterbackups,singular=redisclusterbackup,shortName=recb,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=".spec.clusterName"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=".status.progress.summary",description="Shards and bytes uploaded"
// +kubebuilder:printcolumn:name="Keys",type=integer,JSONPath=".status.progress.keys"
// +kubebuilder:printcolumn:name="Pause",type=string,JSONPath=".status.writePause",description="How long writes were paused for the cut"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.reason"
// +kubebuilder:printcolumn:name="Deletion",type=string,JSONPath=".spec.deletionPolicy",priority=1,description="What deleting the resource does to its objects"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type RedisClusterBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RedisClusterBackupSpec   `json:"spec"`
	Status RedisClusterBackupStatus `json:"status,omitempty"`
}

// RedisClusterBackupList is a list of RedisClusterBackups.
//
// +kubebuilder:object:root=true
type RedisClusterBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RedisClusterBackup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RedisClusterBackup{}, &RedisClusterBackupList{})
}
