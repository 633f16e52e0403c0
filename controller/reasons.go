package controller

// Event reasons. Normal events record what the operator did; Warning events record what
// it refused or could not do, with a message that tells the user what to change.
const (
	// ReasonPhaseChanged: the phase machine moved the cluster to another phase.
	ReasonPhaseChanged = "PhaseChanged"
	// ReasonApplied: rendered objects were server-side applied.
	ReasonApplied = "Applied"
	// ReasonRedisAction: a command that changes the Redis cluster was issued (meet, slots, replicate).
	ReasonRedisAction = "RedisAction"
	// ReasonPaused: spec.pause is true; the operator changes nothing.
	ReasonPaused = "Paused"
	// ReasonInvalidSpec: the spec cannot be rendered or acted on; the cluster keeps serving as it was.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonRedisError: Redis refused or could not be reached for a change.
	ReasonRedisError = "RedisError"
	// ReasonMigrationStuck: a key could not be moved within MIGRATE's timeout; the status
	// names it and its slot.
	ReasonMigrationStuck = "MigrationStuck"
	// ReasonTimedOut: an operation outlived its operator timeout.
	ReasonTimedOut = "TimedOut"
	// ReasonUpgrade: a step of the rolling upgrade (a failover, a pod restarted on the new template).
	ReasonUpgrade = "Upgrade"
	// ReasonDeleted: the foreground finalizer was released once every pod was gone.
	ReasonDeleted = "Deleted"
)

// Label keys shared with templates/ (see docs/architecture.md).
const (
	labelName     = "app.kubernetes.io/name"
	labelInstance = "app.kubernetes.io/instance"
	labelNameVal  = "redis-cluster"
)

// selectorLabels selects the pods of one cluster; status.selector is their string form.
func selectorLabels(cluster string) map[string]string {
	return map[string]string{labelInstance: cluster, labelName: labelNameVal}
}

// selectorString is the label selector of the scale subresource, in the stable order
// `kubectl scale` and the HPA read it.
func selectorString(cluster string) string {
	return labelInstance + "=" + cluster + "," + labelName + "=" + labelNameVal
}
