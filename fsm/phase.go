package fsm

import redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"

// Phase is a RedisCluster's status.phase. The names are defined once, in the API
// (api/v1alpha1, where the CRD's enum lists them); the machine uses them as they are.
type Phase = redisv1alpha1.RedisClusterPhase

const (
	// None: the CR was just created and the operator has not started on it.
	// The empty string is read as None.
	None = redisv1alpha1.PhaseNone
	// Creating: pods are coming up and the Redis cluster is being formed.
	Creating = redisv1alpha1.PhaseCreating
	// Running: the cluster serves and matches the spec; the operator heals it.
	Running = redisv1alpha1.PhaseRunning
	// Scaling: masters or replicas are being added or removed, slots moved.
	Scaling = redisv1alpha1.PhaseScaling
	// Upgrading: the pods are being rolled onto a new pod template.
	Upgrading = redisv1alpha1.PhaseUpgrading
	// Failed: an operation timed out or cannot proceed, or the cluster broke.
	Failed = redisv1alpha1.PhaseFailed
	// Deleting: the CR has a deletionTimestamp; nothing else happens any more.
	Deleting = redisv1alpha1.PhaseDeleting
)

// Phases lists every phase in the order the docs show them.
var Phases = []Phase{None, Creating, Running, Scaling, Upgrading, Failed, Deleting}

// normalize reads the empty phase of a fresh CR as None.
func normalize(p Phase) Phase {
	if p == "" {
		return None
	}
	return p
}

// known reports whether p is one of Phases.
func known(p Phase) bool {
	for _, q := range Phases {
		if p == q {
			return true
		}
	}
	return false
}

// Event names a transition of the machine.
type Event string

const (
	Create     Event = "create"
	Initialize Event = "initialize"
	Scale      Event = "scale"
	Scaled     Event = "scaled"
	Upgrade    Event = "upgrade"
	Upgraded   Event = "upgraded"
	Fail       Event = "fail"
	Recover    Event = "recover"
	Delete     Event = "delete"
)

// Events lists every event in the order Evaluate offers them: delete first
// (the user's explicit wish beats everything), then fail (a stuck operation
// must not keep acting), then the forward events.
var Events = []Event{Delete, Fail, Create, Initialize, Scale, Upgrade, Scaled, Upgraded, Recover}
