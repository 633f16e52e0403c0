/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults the API server fills in (OpenAPI defaults) and that the helpers repeat, so an
// object that never went through the API server (the `render` command reading a file)
// means the same thing.
const (
	// DefaultReplicasPerMaster is spec.replicasPerMaster when unset: one replica per master.
	DefaultReplicasPerMaster int32 = 1
	// DefaultRepository is spec.repository when unset (Docker Hub's official image).
	DefaultRepository = "library/redis"
	// MinMasters is the smallest Redis Cluster the operator builds: with fewer masters
	// a failover cannot reach a majority.
	MinMasters int32 = 3
	// MaxReplicasPerMaster bounds spec.replicasPerMaster.
	MaxReplicasPerMaster int32 = 5
	// MaxReplicas bounds spec.replicas: Redis Cluster is designed for up to 1000 nodes
	// (its gossip and failure detection grow with the node count), so larger sizes are
	// refused at apply time rather than half-built.
	MaxReplicas int32 = 1000
)

// FinalizersForeground is the value of spec.finalizers that makes deleting the CR wait
// until the Redis pods are really gone (the operator holds a finalizer meanwhile).
const FinalizersForeground = "foreground"

// RedisClusterSpec is what the user asks for. Field names and shapes are the seed CR's
// (the original Harmony Cloud operator's `redis.middleware.hc.cn/v1alpha1` RedisCluster);
// additions are marked as such.
//
// The rules below are checked by the API server at `kubectl apply`, so a bad spec is
// refused before the operator sees it. The masters rule spells its numbers by indexing
// lists of literals: string(int) has no size bound, so the API server's cost estimate
// refuses a messageExpression built with it. When the rule fails, replicas is below
// 3 * (1 + replicasPerMaster) <= 18 and the masters below 3, so the lists cover every case.
// The rules are on spec, not on the object's root: the API server does not apply a rule
// whose node is unchanged (validation ratcheting), so a cluster made before a rule existed
// still takes labels, status, its finalizer's removal and deletion; only a spec change must
// satisfy it (TestPlainPortRuleLetsOlderClustersGo).
//
// +kubebuilder:validation:XValidation:rule="self.replicas < 0 || (has(self.replicasPerMaster) ? self.replicasPerMaster : 1) < 0 || (has(self.replicasPerMaster) ? self.replicasPerMaster : 1) > 5 || self.replicas / (1 + (has(self.replicasPerMaster) ? self.replicasPerMaster : 1)) >= 3",message="spec.replicas: a Redis Cluster needs at least 3 masters, so replicas must be at least 3 * (1 + replicasPerMaster)",messageExpression="'spec.replicas: ' + ['0','1','2','3','4','5','6','7','8','9','10','11','12','13','14','15','16','17'][self.replicas] + ' instances with replicasPerMaster ' + ['0','1','2','3','4','5'][(has(self.replicasPerMaster) ? self.replicasPerMaster : 1)] + ' give ' + ['0','1','2'][self.replicas / (1 + (has(self.replicasPerMaster) ? self.replicasPerMaster : 1))] + ' masters; a Redis Cluster needs at least 3'",fieldPath=".replicas",reason="FieldValueInvalid"
// +kubebuilder:validation:XValidation:rule="(has(self.pod) && size(self.pod) > 0 && has(self.pod[0].volumes) && has(self.pod[0].volumes.type) ? self.pod[0].volumes.type : 'emptyDir') == (has(oldSelf.pod) && size(oldSelf.pod) > 0 && has(oldSelf.pod[0].volumes) && has(oldSelf.pod[0].volumes.type) ? oldSelf.pod[0].volumes.type : 'emptyDir')",messageExpression="'spec.pod[0].volumes.type: cannot change from ' + (has(oldSelf.pod) && size(oldSelf.pod) > 0 && has(oldSelf.pod[0].volumes) && has(oldSelf.pod[0].volumes.type) ? oldSelf.pod[0].volumes.type : 'emptyDir') + ' to ' + (has(self.pod) && size(self.pod) > 0 && has(self.pod[0].volumes) && has(self.pod[0].volumes.type) ? self.pod[0].volumes.type : 'emptyDir') + ' on an existing cluster (the data would be left behind); create a new RedisCluster instead'",fieldPath=".pod",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="!has(self.updateStrategy) || !has(self.updateStrategy.type) || self.updateStrategy.type != 'AssignReceive' || !has(self.updateStrategy.assignStrategies) || self.replicas < 0 || (has(self.replicasPerMaster) ? self.replicasPerMaster : 1) < 0 || size(self.updateStrategy.assignStrategies) <= self.replicas / (1 + (has(self.replicasPerMaster) ? self.replicasPerMaster : 1))",message="spec.updateStrategy.assignStrategies: more entries than masters; entry i is for the i-th master a scale-out adds, so there are at most as many entries as the masters spec.replicas gives (the operator refuses any count other than the masters added)",fieldPath=".updateStrategy.assignStrategies",reason="FieldValueInvalid"
// +kubebuilder:validation:XValidation:rule="has(self.tls) == has(oldSelf.tls)",message="spec.tls: cannot be added to or removed from an existing cluster (instances with and without TLS cannot share a cluster bus); create a new RedisCluster instead",fieldPath=".tls",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="!has(self.users) || size(self.users) == 0 || !has(self.disablePassword) || !self.disablePassword",message="spec.users: ACL users need a password on the default user; remove spec.disablePassword (without a password every client is allowed everything)",fieldPath=".users",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="!has(self.disablePassword) || !self.disablePassword || !has(self.passwordSecret)",message="spec.disablePassword: cannot be set with spec.passwordSecret; choose a password (passwordSecret, or neither for a generated one) or none",fieldPath=".disablePassword",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="(has(self.pause) && self.pause) || !self.version.matches('^[vV]?[0-5]([.-].*)?$')",message="spec.version: Redis below 6 is refused (no ACL users, and its clients can run code in the container); use 6.0 or later (a paused cluster may keep an older version until it is unpaused)",fieldPath=".version",reason="FieldValueInvalid"
// +kubebuilder:validation:XValidation:rule="has(self.restoreFrom) == has(oldSelf.restoreFrom)",message="spec.restoreFrom: cannot be added to or removed from an existing cluster (a restore fills a new, empty cluster before it serves); create a new RedisCluster with it",fieldPath=".restoreFrom",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.externalAccess) || (has(self.externalAccess) && self.externalAccess.type == oldSelf.externalAccess.type)",message="spec.externalAccess: cannot be removed or change type on an existing cluster (its nodes would keep announcing the old addresses, which stop working, until each pod restarts); create a new RedisCluster instead",fieldPath=".externalAccess",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="!has(self.announceHostnames) || !self.announceHostnames || !has(self.externalAccess)",message="spec.announceHostnames: not with spec.externalAccess (a node announces one name: with externalAccess it is the outside one, set by spec.externalAccess.hostname); remove one of them",fieldPath=".announceHostnames",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="!has(self.externalAccess) || !has(self.tls) || has(self.externalAccess.hostname)",message="spec.externalAccess.hostname: required with spec.tls (a TLS client checks the name it dials against the certificate; node and load-balancer IPs change, names do not): set a pattern the certificate's SANs cover, e.g. '{{pod}}.redis.example.com'",fieldPath=".externalAccess",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="!has(self.externalAccess) || !has(self.tls) || (has(self.tls.disablePlainPort) && self.tls.disablePlainPort)",message="spec.tls.disablePlainPort: must be true with spec.externalAccess (the nodes announce their TLS ports, so a cluster client on the plain port would be redirected to TLS ports it does not speak, and the plain port is not exposed outside): set spec.tls.disablePlainPort: true",fieldPath=".tls",reason="FieldValueRequired"
type RedisClusterSpec struct {
	// replicas is the total number of Redis instances (pods), masters and replicas
	// together (seed: `replicas`). Masters = replicas / (1 + replicasPerMaster); the
	// remaining instances are spread as replicas over the masters. A Redis Cluster needs
	// at least 3 masters, so replicas must be at least 3 * (1 + replicasPerMaster).
	// This is the field `kubectl scale rec/NAME --replicas=N` changes. At most 1000:
	// Redis Cluster is designed for up to 1000 nodes (every node gossips with every other
	// and failure detection needs a majority of masters to hear of a failure), so a
	// larger cluster is refused at apply time instead of being half-built. Required.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +required
	Replicas int32 `json:"replicas"`

	// replicasPerMaster is how many replicas each master gets (addition; not in the
	// seed). 0 builds a cluster of masters only. Default 1, range 0 to 5.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=5
	// +kubebuilder:default=1
	// +optional
	ReplicasPerMaster *int32 `json:"replicasPerMaster,omitempty"`

	// pause puts the cluster in maintenance mode (seed: `pause`): while true the operator
	// changes nothing (no apply, no Redis command that writes) and says so in the status;
	// setting it back to false resumes where it stopped. Default false.
	// +optional
	Pause bool `json:"pause,omitempty"`

	// finalizers says what deleting the CR does (seed: `finalizers`).
	// "foreground": the delete waits until the Redis pods are really gone (the operator
	// holds a finalizer and the phase is Deleting). "" (default): ordinary
	// owner-reference garbage collection, the CR disappears at once.
	// +kubebuilder:validation:Enum="";foreground
	// +optional
	Finalizers string `json:"finalizers,omitempty"`

	// repository is the Redis image repository (seed: `repository`); the image is
	// repository:version unless pod[0].middlewareImage overrides it. "valkey/valkey"
	// runs Valkey: the pods run `redis-server`, which the official Redis and Valkey
	// images both have (docs/servers.md). Default "library/redis".
	// +kubebuilder:default="library/redis"
	// +optional
	Repository string `json:"repository,omitempty"`

	// version is the Redis image tag (seed: `version`, e.g. "7.0", "8.0", or "9.1" with
	// repository valkey/valkey — quote a version YAML would read as a number). Changing
	// it upgrades the cluster pod by pod. It names an image only: what each instance
	// really runs is status.conditions[].server (INFO server).
	// A tag below 6 (3.2.8, 5.0.14-alpine) is refused unless the cluster is paused:
	// Redis before 6 has no ACL users. Required, not empty.
	// +kubebuilder:validation:MinLength=1
	// +required
	Version string `json:"version"`

	// updateStrategy says how hash slots move when masters are added (seed:
	// `updateStrategy`). Default: type AutoReceive, pipeline 100.
	// +kubebuilder:default={}
	// +optional
	UpdateStrategy RedisUpdateStrategy `json:"updateStrategy,omitzero"`

	// pod is the Redis pod template (seed: `pod`). It is a list because the seed wrote
	// it as one; only its first entry is used, so at most one entry is accepted.
	// Default: no entry, i.e. a pod with an emptyDir data volume and no extras.
	// +kubebuilder:validation:MaxItems=1
	// +optional
	Pod []RedisPodTemplate `json:"pod,omitempty"`

	// passwordSecret names the Secret key holding the Redis password (addition). When
	// set, every instance requires it: it is the password of Redis' default user, of
	// the operator's own ACL user ("operator", allowed only the commands the operator
	// sends) and of replication (masterauth). The operator writes it, hashed where Redis
	// allows, into the Secret NAME-auth, which the pods mount and redis.conf includes: it
	// is never in a process's arguments, a ConfigMap, a log, an event or the status.
	// Changing the Secret rotates the password with no restart and no downtime (both
	// are valid until every instance has the new one; docs/security.md). Default: a
	// password the operator generates (32 random bytes) and keeps in Secret NAME-auth,
	// key "password", unless disablePassword; a cluster an older operator formed
	// without a password keeps running without one (docs/security.md).
	// +optional
	PasswordSecret *SecretKeyReference `json:"passwordSecret,omitempty"`

	// disablePassword runs the cluster with no password at all (addition): every client
	// that reaches port 6379 may do anything, including CONFIG SET and reading every
	// key. Not with passwordSecret or users. Only when the cluster is created: a
	// cluster that has a password keeps it (the operator refuses, naming this field),
	// and one formed without a password cannot be given one in place. Default false:
	// the operator generates a password (see passwordSecret).
	// +optional
	DisablePassword bool `json:"disablePassword,omitempty"`

	// users are application ACL users (addition), each with its password in a Secret
	// and its ACL rules, applied live to every instance with ACL SETUSER (no restart)
	// and kept in NAME-auth so a restarted instance has them. Removing an entry deletes
	// the user (ACL DELUSER). Rules Redis refuses leave the cluster as it was and are
	// reported naming spec.users[i].rules. Needs passwordSecret. An entry named
	// exporter is also the user the exporter sidecar (pod[0].monitorImage) connects
	// as (docs/metrics.md). Default: none.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Users []RedisUser `json:"users,omitempty"`

	// clientService configures the client Service NAME-client, the one endpoint
	// clients connect to (addition). Default: type ClusterIP, no annotations.
	// +kubebuilder:default={}
	// +optional
	ClientService ClientServiceSpec `json:"clientService,omitzero"`

	// networkPolicy renders a NetworkPolicy for the Redis pods when enabled (addition).
	// Default: none.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// externalAccess gives every Redis node its own address outside Kubernetes
	// (addition): a Service per pod, NAME-i-external, of type NodePort or LoadBalancer,
	// and each node announces that address to clients, so a cluster-mode client outside
	// the pod network follows MOVED and ASK redirects to addresses it can reach
	// (docs/external-access.md). With spec.tls it needs hostname. Default: none (the
	// nodes announce their pod IPs).
	// +optional
	ExternalAccess *ExternalAccessSpec `json:"externalAccess,omitempty"`

	// announceHostnames has every node announce its pod's stable DNS name inside
	// Kubernetes, NAME-i.NAME.NS.svc.cluster.local (the headless Service NAME; the same
	// as status.conditions[].domainName), with Redis 7's cluster-announce-hostname and
	// cluster-preferred-endpoint-type hostname (addition): MOVED, ASK and CLUSTER SLOTS
	// give clients inside Kubernetes names instead of pod IPs, which a TLS client can
	// check. With spec.tls the certificate's SANs must cover them (e.g.
	// *.NAME.NS.svc.cluster.local); a name it does not cover is not announced, and
	// status.reason and a Warning event say so. Not with externalAccess, whose hostname
	// names the nodes outside. Set live, no restart; turning it off has the nodes
	// announce their IPs again. Default false.
	// +optional
	AnnounceHostnames bool `json:"announceHostnames,omitempty"`

	// tls serves Redis over TLS with the certificate of a Secret (addition): clients,
	// the operator, replication, MIGRATE and the cluster bus. The TLS port is 6379; the
	// plain port moves to 6380 unless disablePlainPort. A renewed certificate (the
	// Secret's content changes) is loaded by every instance with no restart. Turning TLS
	// on or off on an existing cluster is refused (nodes of both kinds cannot share a
	// bus): create a new RedisCluster. Default: none (plain TCP on 6379).
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// restoreFrom fills the new cluster from a backup before it serves (addition): once
	// the cluster is formed, still Creating, the operator restores every key of the
	// RedisClusterBackup it names (any number of masters into any other), and only then
	// does the cluster move to Running and get its client Service. Progress is in
	// status.restore. Only when the cluster is created: it cannot be added, changed or
	// removed later (docs/backup.md). Default: none (an empty cluster).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.restoreFrom is immutable: a cluster is restored once, when it is created; create a new RedisCluster to restore another backup",reason="FieldValueForbidden"
	// +optional
	RestoreFrom *RestoreSource `json:"restoreFrom,omitempty"`
}

// RestoreSource names the backup a new cluster is filled from.
type RestoreSource struct {
	// backup is the name of a RedisClusterBackup of this namespace that Succeeded; its
	// objects are read from the store its spec.s3 names, with its credentials Secret.
	// Required.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Backup string `json:"backup"`

	// replace allows restoring into a cluster whose nodes already hold keys (kept data
	// of a claim, say): a key of the backup then replaces the cluster's key of that name,
	// other keys stay. Default false: a cluster holding any key is refused, nothing is
	// written, and the status says which node holds keys.
	// +optional
	Replace bool `json:"replace,omitempty"`
}

// RedisCluster is a Redis Cluster: a StatefulSet of Redis instances in cluster mode, the
// hash slots spread over its masters, each master with replicasPerMaster replicas.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=redisclusters,singular=rediscluster,shortName=rec,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".spec.replicas",description="Redis instances asked for"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.replicas",description="Redis instances up"
// +kubebuilder:printcolumn:name="Masters",type=integer,JSONPath=".status.masters",description="Masters holding slots"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=".status.progress.summary",description="Slots moved or pods upgraded"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type RedisCluster struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the user asks for.
	// +required
	Spec RedisClusterSpec `json:"spec"`

	// status is what the operator observed; written by the operator only.
	// +optional
	Status RedisClusterStatus `json:"status,omitzero"`
}

// RedisClusterList is a list of RedisCluster.
//
// +kubebuilder:object:root=true
type RedisClusterList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RedisCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RedisCluster{}, &RedisClusterList{})
}
