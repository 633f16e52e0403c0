package topology

import (
	"errors"
	"fmt"
	"strings"
)

// ActionKind names a Redis write a plan makes; its value names the write in events
// ("RedisAction" events group the writes of one reconcile by kind).
type ActionKind string

// Every kind of action, each with the plans that make it and the command it sends. The
// executor (redis/execute.go, run) sends the first five; the others are carried out by
// their own code, which reports them as actions of that kind.
const (
	// ActionSetConfigEpoch: CLUSTER SET-CONFIG-EPOCH, a distinct epoch per node (bootstrap).
	ActionSetConfigEpoch ActionKind = "SetConfigEpoch"
	// ActionAddSlots: CLUSTER ADDSLOTSRANGE of a master's share (bootstrap).
	ActionAddSlots ActionKind = "AddSlots"
	// ActionMeet: CLUSTER MEET (bootstrap, healing, resizing, re-announcing).
	ActionMeet ActionKind = "Meet"
	// ActionReplicate: CLUSTER REPLICATE (bootstrap, healing, resizing).
	ActionReplicate ActionKind = "Replicate"
	// ActionForget: CLUSTER FORGET of a lost node on one member (healing, resizing).
	ActionForget ActionKind = "Forget"
	// ActionFailover: CLUSTER FAILOVER FORCE (or TAKEOVER) sent to the most up-to-date
	// replica of a lost master that Redis did not promote by itself (PlanPromote; carried
	// out by redis.Promote).
	ActionFailover ActionKind = "Failover"
	// ActionReleaseReplica: CLUSTER RESET of a spare replica, which becomes an empty
	// master (resizing; carried out by redis.Scale).
	ActionReleaseReplica ActionKind = "ReleaseReplica"
	// ActionFixSlot: what redis.FixOpenSlots did to one open slot; done by FixOpenSlots
	// itself, never by the executor.
	ActionFixSlot ActionKind = "FixSlot"
)

// Action is one write on one member. Actions of one plan on different members may run in
// parallel; actions on the same member run in plan order.
type Action struct {
	Kind ActionKind
	// Member is the index of the member the command is sent to.
	Member int
	Epoch  uint64    // SetConfigEpoch
	Slots  SlotRange // AddSlots
	// Target is the member index met (Meet) or replicated (Replicate).
	Target int
	// TargetAddr and MasterID are filled from the observation so the executor needs no lookup.
	TargetAddr string
	MasterID   string
	// NodeID is the node forgotten (Forget), or the lost master taken over from (Failover).
	NodeID string
	// Mode is FailoverForce or FailoverTakeover (Failover).
	Mode string
	// Message is for events: "Assigned slots 0-5460 to demo-0".
	Message string
	// Refresh marks a MEET sent only so a node that knows Member hears its current role
	// and slots at once; it changes no topology, so callers may skip the event.
	Refresh bool
}

// Messages joins the actions' messages with "; ", as one log line shows them.
func Messages(acts []Action) string {
	out := make([]string, len(acts))
	for i, a := range acts {
		out[i] = a.Message
	}
	return strings.Join(out, "; ")
}

// ErrRefused wraps every refusal of a plan (bootstrap or healing: data on a node,
// conflicting slots; a resize: bad assignments, keys on a new node, too little memory):
// nothing was written, and the caller should warn the user and not retry until
// something changes. Refused wraps it with the operation's name.
var ErrRefused = errors.New("refused")

// Refused is err refused by op ("bootstrap", "healing"): "bootstrap refused: <err>".
func Refused(op string, err error) error {
	return fmt.Errorf("%s %w: %w", op, ErrRefused, err)
}
