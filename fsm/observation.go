package fsm

// Observation is what one reconcile saw, reduced to plain facts. The controller
// fills every field from the CR, the StatefulSet, the pods and each Redis
// node's CLUSTER NODES / CLUSTER INFO / INFO replication; the FSM only reads it.
// The zero value is "nothing observed yet": no guard that moves forward holds.
type Observation struct {
	// SpecValid: the spec passed the checks the CRD schema cannot make
	// (e.g. replicas give at least 3 masters). Filled from the CR.
	SpecValid bool
	// Paused: spec.pause. Filled from the CR.
	Paused bool
	// Deleting: metadata.deletionTimestamp is set. Filled from the CR.
	Deleting bool
	// SpecChanged: metadata.generation is newer than the generation the
	// cluster failed at, i.e. the user edited the spec after the failure.
	// Filled from the CR and its status; false when unknown (safe: Failed then
	// waits until the cluster matches the spec).
	SpecChanged bool

	// DesiredReplicas: spec.replicas, the number of Redis instances asked for.
	DesiredReplicas int32
	// ObservedReplicas: the cluster's size, the number of Redis nodes the
	// cluster knows as members (CLUSTER NODES of a reachable node).
	ObservedReplicas int32
	// StatefulSetAtSize: the StatefulSet's spec.replicas and readyReplicas both
	// equal DesiredReplicas. Filled from the StatefulSet.
	StatefulSetAtSize bool
	// PodsReady: every pod of the StatefulSet is Ready. Filled from the pods.
	PodsReady bool

	// AllMet: every pod's Redis node is a member of the cluster, known to
	// every other node (CLUSTER NODES of each node).
	AllMet bool
	// NodesAgree: every node reports the same members, roles and slot owners
	// (CLUSTER NODES of each node compared).
	NodesAgree bool
	// SlotsCovered: all 16384 slots are served by a master that is not failed
	// (CLUSTER NODES / CLUSTER SLOTS).
	SlotsCovered bool
	// ReplicasAttached: every master has spec.replicasPerMaster replicas
	// (CLUSTER NODES).
	ReplicasAttached bool
	// ClusterOK: cluster_state:ok on every node (CLUSTER INFO of each node).
	ClusterOK bool

	// SlotsPlaced: the slot distribution is the one spec.updateStrategy asks
	// for, and no slot is left IMPORTING or MIGRATING (CLUSTER NODES, planner).
	SlotsPlaced bool
	// RemovedNodesForgotten: no node beyond DesiredReplicas is known to any
	// node any more (CLUSTER NODES of each node).
	RemovedNodesForgotten bool

	// TemplateChanged: the rendered pod template (image, version, resources,
	// config hash…) differs from the one the pods run (rendered StatefulSet
	// against the applied one and its currentRevision/updateRevision).
	TemplateChanged bool
	// AllPodsUpdated: every pod runs the StatefulSet's update revision
	// (pod label controller-revision-hash).
	AllPodsUpdated bool
	// ReplicasInSync: every replica has master_link_status:up and has caught
	// up with its master (INFO replication of each node).
	ReplicasInSync bool

	// TimedOut: the current phase's operation has lasted longer than the
	// operator's --create/--scale/--upgrade timeout. The controller compares
	// the phase's start with its clock; the FSM never reads a clock.
	TimedOut bool
	// CannotProceed: the operation cannot be done as asked (an AssignReceive
	// naming an unknown node, more slots asked than the givers own…).
	// Filled by the controller's planners.
	CannotProceed bool
	// CannotProceedMessage says why, for the user. Used only when CannotProceed.
	CannotProceedMessage string
	// Restored: the cluster has no spec.restoreFrom, was formed before, or
	// status.restore records every key of the backup in (completedAt). Filled
	// from the CR; true for every cluster created without restoreFrom.
	Restored bool

	// Broken: the cluster is broken beyond what healing fixes at once, e.g.
	// slots whose master and every replica are gone (CLUSTER NODES).
	Broken bool
}
