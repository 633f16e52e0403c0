/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// RedisPodTemplate is the Redis pod template (seed: an item of `pod`).
type RedisPodTemplate struct {
	// labels are added to every Redis pod (seed: `labels`). The operator's own labels
	// (app.kubernetes.io/name, instance, managed-by) win on a clash. Default none.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to every Redis pod (seed: `annotations`). Default none.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// env is added to the redis container (seed: `env`). MAXMEMORY, when present,
	// becomes Redis `maxmemory` (e.g. "2gb"). Default none.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// affinity is the pods' scheduling affinity (seed: `affinity`). Default none.
	//
	// Unknown fields directly under affinity are kept, not refused: the seed's sample
	// leaves `nodeAffinity:` empty (null) and puts `requiredDuringSchedulingIgnoredDuringExecution`
	// beside it, one level too high, and that sample must apply as written under
	// kubectl's strict field validation. Such a misplaced key is stored but has no
	// effect: only the fields of a Kubernetes Affinity (nodeAffinity, podAffinity,
	// podAntiAffinity) are used; move it under nodeAffinity for it to apply.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// resources are the redis container's requests and limits (seed: `resources`).
	// Default none.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitzero"`

	// updateStrategy says how the operator rolls the pods when their template changes
	// (seed: `pod[].updateStrategy`, e.g. type RollingUpdate). The StatefulSet itself
	// always gets type OnDelete: the operator restarts the pods, RollingUpdate meaning one
	// pod at a time, replicas first, each master only after it was failed over to an
	// updated replica. rollingUpdate.partition is not used. Not to be confused with
	// spec.updateStrategy, which moves slots. Default: RollingUpdate.
	// +optional
	UpdateStrategy appsv1.StatefulSetUpdateStrategy `json:"updateStrategy,omitzero"`

	// volumes says where each instance keeps its data (/data: nodes.conf, RDB, AOF)
	// (seed: `volumes`). Default: type emptyDir.
	// +kubebuilder:default={}
	// +optional
	Volumes RedisVolumes `json:"volumes,omitzero"`

	// configmap is the name of a ConfigMap, in the RedisCluster's namespace, whose
	// `redis.conf` key holds settings that override the operator's defaults (seed:
	// `configmap`). Default: none, the defaults only.
	// +optional
	ConfigMap string `json:"configmap,omitempty"`

	// monitorImage is the image of a metrics exporter run as a sidecar named exporter
	// (seed: `monitorImage`). Default: no sidecar.
	// +optional
	MonitorImage string `json:"monitorImage,omitempty"`

	// initImage is the image of an init container named init (seed: `initImage`).
	// Default: no init container.
	// +optional
	InitImage string `json:"initImage,omitempty"`

	// middlewareImage, when set, is the full Redis image and overrides
	// repository:version (seed: `middlewareImage`). Default: repository:version.
	// +optional
	MiddlewareImage string `json:"middlewareImage,omitempty"`

	// tolerations are the pods' tolerations (addition). Default none.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// nodeSelector restricts the pods to nodes with these labels (addition). Default none.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// topologySpreadConstraints spread the pods over zones or nodes (addition).
	// Default none.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// securityContext is the pods' security context (addition). Default none.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`

	// priorityClassName is the pods' PriorityClass (addition). Default none.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// VolumeType is where an instance keeps /data.
// +kubebuilder:validation:Enum=emptyDir;hostPath;nfs;volumeClaimTemplate
type VolumeType string

const (
	// VolumeTypeEmptyDir keeps data in an emptyDir: lost when the pod is deleted.
	VolumeTypeEmptyDir VolumeType = "emptyDir"
	// VolumeTypeHostPath keeps data in hostPath/<namespace>/<pod name> on the node the pod
	// runs on: kept only while the pod comes back to that node.
	VolumeTypeHostPath VolumeType = "hostPath"
	// VolumeTypeNFS keeps data on the existing claim persistentVolumeClaimName, shared by
	// every pod, each in its own sub-directory (<pod name>).
	VolumeTypeNFS VolumeType = "nfs"
	// VolumeTypeVolumeClaimTemplate gives each pod its own claim (StatefulSet
	// volumeClaimTemplates) of storageClassName and size.
	VolumeTypeVolumeClaimTemplate VolumeType = "volumeClaimTemplate"
)

// RedisVolumes says where each instance keeps its data (seed: `volumes`). The type of an
// existing cluster cannot change: the data would be left behind.
//
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'nfs' || (has(self.persistentVolumeClaimName) && size(self.persistentVolumeClaimName) > 0)",message="spec.pod[0].volumes.persistentVolumeClaimName: volumes of type nfs need the name of an existing PersistentVolumeClaim",fieldPath=".persistentVolumeClaimName",reason="FieldValueRequired"
type RedisVolumes struct {
	// type is emptyDir (default; data lost with the pod), hostPath (a directory on the
	// node, kept while the pod returns to that node, see hostPath), nfs (the existing claim persistentVolumeClaimName, shared by
	// all pods, one sub-directory each) or volumeClaimTemplate (one claim per pod, see
	// storageClassName and size) (seed: `volumes.type`, which had hostPath and nfs).
	// Cannot change once the cluster exists.
	// +kubebuilder:default=emptyDir
	// +optional
	Type VolumeType `json:"type,omitempty"`

	// persistentVolumeClaimName is the existing claim used by type nfs, required there
	// (seed: `persistentVolumeClaimName`). Default none.
	// +optional
	PersistentVolumeClaimName string `json:"persistentVolumeClaimName,omitempty"`

	// hostPath is the node directory used by type hostPath; each pod uses
	// hostPath/<namespace>/<pod name> (addition). Default /var/lib/redis-cluster.
	// The directory is on the Kubernetes node the pod runs on, and pods are not pinned to
	// nodes, so it keeps a pod's data (nodes.conf and keys) only while the pod is recreated
	// on the same node: a pod rescheduled to another node starts empty there (the operator
	// joins it as a replica; its keys live on in its replica), or finds an old copy from an
	// earlier visit (Redis gives its slots to the newer owner by config epoch and it becomes
	// a replica, dropping the old keys). The operator treats hostPath as not persistent: a
	// master without replicas is not restarted on it. A RedisCluster deleted and applied
	// again re-forms from the kept directories of pods that land on their old nodes.
	// +kubebuilder:validation:Pattern=`^/`
	// +optional
	HostPath string `json:"hostPath,omitempty"`

	// storageClassName is the StorageClass of each pod's claim for type
	// volumeClaimTemplate (addition). Default: the cluster's default StorageClass.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// size is the size of each pod's claim for type volumeClaimTemplate (addition).
	// Default 1Gi.
	// +optional
	Size resource.Quantity `json:"size,omitzero"`
}
