package controller

import "errors"

// Event reasons. Normal events record what the operator did; Warning events record what
// it refused or could not do, with a message that tells the user what to change.
const (
	// ReasonPhaseChanged: the phase machine moved the cluster to another phase.
	ReasonPhaseChanged = "PhaseChanged"
	// ReasonApplied: rendered objects were server-side applied.
	ReasonApplied = "Applied"
	// ReasonDeletedUnrendered: an optional object the spec no longer renders (a
	// NetworkPolicy after spec.networkPolicy.enabled went false) was deleted.
	ReasonDeletedUnrendered = "DeletedUnrendered"
	// ReasonRedisAction: a command that changes the Redis cluster was issued (meet, slots, replicate).
	ReasonRedisAction = "RedisAction"
	// ReasonInvalidSpec: the spec cannot be rendered or acted on; the cluster keeps serving as it was.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonRedisError: Redis refused or could not be reached for a change.
	ReasonRedisError = "RedisError"
	// ReasonMigrationStuck: a key could not be moved within MIGRATE's timeout; the status
	// names it and its slot.
	ReasonMigrationStuck = "MigrationStuck"
	// ReasonSlotMigrationFailed: the servers failed a slot migration of one source and
	// target (CLUSTER MIGRATESLOTS, Valkey 9) several times in a row; the operator starts
	// no new one for the pair for a while and says why.
	ReasonSlotMigrationFailed = "SlotMigrationFailed"
	// ReasonUpgrade: a step of the rolling upgrade (a failover, a pod restarted on the new template).
	ReasonUpgrade = "Upgrade"
	// ReasonHandOver: a master whose pod is being deleted (kubectl delete pod, a drain's
	// eviction) was failed over to its replica while the pod's preStop hook held it.
	ReasonHandOver = "HandOver"
	// ReasonUpgradeStopped: a pod on the new template does not come up; the roll stops.
	ReasonUpgradeStopped = "UpgradeStopped"
	// ReasonDeleted: the foreground finalizer was released once every pod was gone.
	ReasonDeleted = "Deleted"
	// ReasonFailed: the cluster moved to Failed (a Warning, unlike other phase changes).
	ReasonFailed = "Failed"
	// ReasonReverted: an owned object changed behind the operator's back (the StatefulSet
	// resized by hand or by another tool) was put back to what the RedisCluster says.
	ReasonReverted = "Reverted"
	// ReasonNotOwner: an object with a name the operator renders exists but is not
	// controlled by this RedisCluster; the operator leaves it alone and applies nothing.
	ReasonNotOwner = "NotOwner"
	// ReasonNameClash: another RedisCluster in the namespace would render an object with
	// the name of one this RedisCluster owns; the object stays this cluster's.
	ReasonNameClash = "NameClash"
	// ReasonApplyFailed: the API server refused an object the operator applied.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonConfigApplied: redis.conf's live directives changed and every node was given
	// them with CONFIG SET, no pod restarted (liveconfig.go).
	ReasonConfigApplied = "ConfigApplied"
	// ReasonConfigRestart: a redis.conf directive CONFIG SET cannot apply changed; the
	// pods roll (Upgrading).
	ReasonConfigRestart = "ConfigRestart"
	// ReasonConfigRefused: Redis refused a live directive's value; nothing was changed.
	ReasonConfigRefused = "ConfigRefused"
	// ReasonDowngradeRefused: the spec's image holds a server that cannot read the RDB the
	// running instances write (an older version, or another engine); nothing rolls.
	ReasonDowngradeRefused = "DowngradeRefused"
)

// refusal is a reason the spec cannot be acted on that has an event reason of its own
// (ReasonInvalidSpec otherwise); it goes in scope.specErr.
type refusal struct {
	reason string
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// refusalReason is the event reason for a scope.specErr.
func refusalReason(err error) string {
	if r := (*refusal)(nil); errors.As(err, &r) {
		return r.reason
	}
	return ReasonInvalidSpec
}
