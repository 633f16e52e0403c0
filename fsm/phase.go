package fsm

// Phase is a RedisCluster's status.phase. The values are the seed's, plus Deleting.
type Phase string

const (
	// None: the CR was just created and the operator has not started on it.
	// The empty string is read as None.
	None Phase = "None"
	// Creating: pods are coming up and the Redis cluster is being formed.
	Creating Phase = "Creating"
	// Running: the cluster serves and matches the spec; the operator heals it.
	Running Phase = "Running"
	// Scaling: masters or replicas are being added or removed, slots moved.
	Scaling Phase = "Scaling"
	// Upgrading: the pods are being rolled onto a new pod template.
	Upgrading Phase = "Upgrading"
	// Failed: an operation timed out or cannot proceed, or the cluster broke.
	Failed Phase = "Failed"
	// Deleting: the CR has a deletionTimestamp; nothing else happens any more.
	Deleting Phase = "Deleting"
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
