package fsm

// The facts: one observation each. Their names are the ones the table and the
// diagram use; docs/fsm.md lists their Doc strings.
var (
	specValid = fact("SpecValid", "SpecValid", "the spec passes the checks the schema cannot make",
		func(o Observation) bool { return o.SpecValid })
	paused = fact("Paused", "Paused", "spec.pause is true",
		func(o Observation) bool { return o.Paused })
	deletionRequested = fact("DeletionRequested", "Deleting", "the CR has a deletionTimestamp",
		func(o Observation) bool { return o.Deleting })
	specChanged = fact("SpecChanged", "SpecChanged", "the user edited the spec after the failure",
		func(o Observation) bool { return o.SpecChanged })

	podsReady = fact("PodsReady", "PodsReady", "every pod is Ready",
		func(o Observation) bool { return o.PodsReady })
	allMet = fact("AllMet", "AllMet", "every pod's Redis node is a member known to all others",
		func(o Observation) bool { return o.AllMet })
	nodesAgree = fact("NodesAgree", "NodesAgree", "every node reports the same members, roles and slot owners",
		func(o Observation) bool { return o.NodesAgree })
	slotsCovered = fact("SlotsCovered", "SlotsCovered", "all 16384 slots are served",
		func(o Observation) bool { return o.SlotsCovered })
	replicasAttached = fact("ReplicasAttached", "ReplicasAttached", "every master has its replicas",
		func(o Observation) bool { return o.ReplicasAttached })
	clusterOK = fact("ClusterOK", "ClusterOK", "cluster_state is ok on every node",
		func(o Observation) bool { return o.ClusterOK })

	sizeDiffers = fact("SizeDiffers", "DesiredReplicas != ObservedReplicas", "spec.replicas differs from the number of nodes in the cluster",
		func(o Observation) bool { return o.DesiredReplicas != o.ObservedReplicas })
	sizeMatches = fact("SizeMatches", "DesiredReplicas == ObservedReplicas", "spec.replicas equals the number of nodes in the cluster",
		func(o Observation) bool { return o.DesiredReplicas == o.ObservedReplicas })
	statefulSetAtSize = fact("StatefulSetAtSize", "StatefulSetAtSize", "the StatefulSet has, and has ready, spec.replicas pods",
		func(o Observation) bool { return o.StatefulSetAtSize })
	slotsPlaced = fact("SlotsPlaced", "SlotsPlaced", "slots sit where updateStrategy puts them and none is open",
		func(o Observation) bool { return o.SlotsPlaced })
	removedNodesForgotten = fact("RemovedNodesForgotten", "RemovedNodesForgotten", "no node knows a removed node any more",
		func(o Observation) bool { return o.RemovedNodesForgotten })

	templateChanged = fact("TemplateChanged", "TemplateChanged", "the rendered pod template differs from the one the pods run",
		func(o Observation) bool { return o.TemplateChanged })
	templateCurrent = fact("TemplateCurrent", "!TemplateChanged", "the pods' template is the rendered one",
		func(o Observation) bool { return !o.TemplateChanged })
	allPodsUpdated = fact("AllPodsUpdated", "AllPodsUpdated", "every pod runs the StatefulSet's update revision",
		func(o Observation) bool { return o.AllPodsUpdated })
	replicasInSync = fact("ReplicasInSync", "ReplicasInSync", "every replica's link is up and caught up",
		func(o Observation) bool { return o.ReplicasInSync })

	timedOut = fact("TimedOut", "TimedOut", "the phase's operation outlived the operator's timeout",
		func(o Observation) bool { return o.TimedOut })
	cannotProceed = fact("CannotProceed", "CannotProceed", "the operation cannot be done as the spec asks",
		func(o Observation) bool { return o.CannotProceed })
	canProceed = fact("CanProceed", "!CannotProceed", "nothing in the spec stops the operation",
		func(o Observation) bool { return !o.CannotProceed })
	restored = fact("Restored", "Restored", "no spec.restoreFrom, or every key of its backup is in",
		func(o Observation) bool { return o.Restored })
	broken = fact("Broken", "Broken", "the cluster is broken beyond what healing fixes at once (uncovered slots)",
		func(o Observation) bool { return o.Broken })
	notBroken = fact("NotBroken", "!Broken", "the cluster is not broken beyond healing",
		func(o Observation) bool { return !o.Broken })
)

// The guards of the table, built from the facts; each reads like its row of
// the phase table in docs/fsm.md.
var (
	// formedParts are what a formed cluster is. NodesAgree is included because
	// the bootstrap is finished only when every node has the same view (issue 4).
	formedParts = []Guard{podsReady, allMet, slotsCovered, replicasAttached, clusterOK, nodesAgree}

	// clusterFormed guards initialize: formed, and restored (always true without
	// spec.restoreFrom), so a restored cluster serves only once every key is in.
	// Restored is last: a cluster waiting for its restore reads AwaitingRestored
	// only once it is formed, which is when the restore runs.
	clusterFormed = allOf("ClusterFormed", "the Redis cluster is formed and every node agrees",
		append(append([]Guard{}, formedParts...), restored)...)

	// scaleDone guards scaled. SizeMatches is what makes Running's scale false
	// afterwards, so the machine cannot bounce between Running and Scaling.
	scaleDone = allOf("ScaleDone", "the cluster has the new size and its slots are placed",
		statefulSetAtSize, sizeMatches, slotsPlaced, removedNodesForgotten, replicasAttached, clusterOK)

	// upgradeDone guards upgraded. TemplateCurrent keeps Running's upgrade
	// false afterwards; a template edited mid-upgrade keeps Upgrading going.
	upgradeDone = allOf("UpgradeDone", "every pod runs the new template and the cluster is whole again",
		allPodsUpdated, templateCurrent, podsReady, allMet, replicasInSync, clusterOK)

	operationStuck = anyOf("OperationStuck", "the operation timed out or cannot proceed",
		timedOut, cannotProceed)

	// matchesSpec: the cluster is what the spec asks for.
	matchesSpec = allOf("MatchesSpec", "the cluster is what the spec asks for",
		sizeMatches, templateCurrent, slotsCovered, replicasAttached)

	// causeCleared guards recover. NotBroken and ClusterOK keep Running's
	// fail false afterwards (no bounce). Either the cluster matches the spec
	// again, or the user changed the spec since the failure: then Running
	// starts what the new spec needs on the next evaluation.
	// Restored: a cluster whose Creating timed out mid-restore recovers only once
	// every key is in.
	causeCleared = allOf("CauseCleared", "the cluster is healthy again and matches the spec, or the spec was changed",
		notBroken, canProceed, clusterOK, slotsCovered, restored,
		anyOf("MatchesSpecOrSpecChanged", "the cluster matches the spec, or the user changed the spec", matchesSpec, specChanged))
)

// Formed reports whether the Redis cluster is formed (ClusterFormed but for Restored):
// what the controller waits for before it restores spec.restoreFrom.
func Formed(o Observation) bool {
	return allOf("Formed", "", formedParts...).Holds(o)
}
