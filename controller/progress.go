package controller

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// scaleStep is what one resize step (redis.Scale) moved and how long it took.
type scaleStep struct {
	progress redis.ScaleProgress
	took     time.Duration
}

// migrating reports whether the step planned slot moves: only then is its Remaining the
// number of slots the plan has left.
func (st *scaleStep) migrating() bool { return st.progress.Phase == redis.PhaseMigrating }

// progressOf is status.progress for the decided phase: the stored progress carried on
// while Scaling or Upgrading (a new one when the operation begins), and marked finished
// with finishTime once the phase is over. It changes only when a step moved slots, a pod
// was upgraded, pause was set or cleared, or the operation ended, so a migration writes
// its status once per step (scaleBudget), not once per batch.
func progressOf(s *scope) *redisv1alpha1.OperationProgress {
	phase := redisv1alpha1.RedisClusterPhase(s.decision.Phase)
	prev := s.original.Progress
	if m := s.remembered; m != nil && (prev == nil || !m.StartTime.Before(&prev.StartTime)) {
		prev = m // counted by this operator, maybe not yet in the cached status
	}
	switch phase {
	case redisv1alpha1.PhaseScaling, redisv1alpha1.PhaseUpgrading:
	default:
		return finished(prev, phase, s.now)
	}
	p := &redisv1alpha1.OperationProgress{Operation: phase, StartTime: metav1.NewTime(s.now)}
	if prev != nil && prev.Operation == phase && prev.FinishTime == nil {
		p = prev.DeepCopy()
	}
	p.Paused = s.cluster.Spec.Pause
	if phase == redisv1alpha1.PhaseUpgrading {
		p.PodsTotal, p.PodsDone = int32(s.desiredReplicas()), int32(podsUpdated(s))
	} else if s.step != nil {
		addStep(p, s.step)
	}
	p.Summary = summary(p)
	return p
}

// addStep counts a resize step's moved slots and keys, and sets the rate and the estimate
// from its pace.
func addStep(p *redisv1alpha1.OperationProgress, st *scaleStep) {
	moved := st.progress
	p.SlotsMoved += int32(moved.MovedSlots)
	p.KeysMoved += int64(moved.MovedKeys)
	if st.migrating() {
		p.SlotsToMove = p.SlotsMoved + int32(moved.Remaining)
	}
	p.SlotsToMove = max(p.SlotsToMove, p.SlotsMoved)
	if moved.MovedSlots == 0 || st.took <= 0 {
		return
	}
	p.KeysPerSecond = int64(float64(moved.MovedKeys) / st.took.Seconds())
	left := int64(float64(p.SlotsToMove-p.SlotsMoved) * st.took.Seconds() / float64(moved.MovedSlots))
	p.EstimatedSecondsLeft = &left
}

// summary is the Progress column.
func summary(p *redisv1alpha1.OperationProgress) string {
	var text string
	switch {
	case p.Operation == redisv1alpha1.PhaseUpgrading:
		text = fmt.Sprintf("%d/%d pods", p.PodsDone, p.PodsTotal)
	case p.SlotsToMove == 0:
		text = "preparing"
	default:
		text = fmt.Sprintf("%d/%d slots", p.SlotsMoved, p.SlotsToMove)
	}
	if p.Paused {
		return "paused at " + text
	}
	return text
}

// finished marks an operation's progress over once the cluster left its phase; nil when
// there was none. The progress stays, with its figures, until the next operation.
func finished(prev *redisv1alpha1.OperationProgress, phase redisv1alpha1.RedisClusterPhase, now time.Time) *redisv1alpha1.OperationProgress {
	if prev == nil || prev.FinishTime != nil {
		return prev
	}
	p := prev.DeepCopy()
	end := metav1.NewTime(now)
	p.FinishTime, p.Paused, p.EstimatedSecondsLeft = &end, false, nil
	took := now.Sub(p.StartTime.Time).Round(time.Second)
	p.Summary = fmt.Sprintf("done in %v", took)
	if phase != redisv1alpha1.PhaseRunning {
		p.Summary = fmt.Sprintf("ended %s after %v", phase, took)
	}
	return p
}

// podsUpdated counts the desired pods on the StatefulSet's update revision.
func podsUpdated(s *scope) int {
	rev, ok := updateRevision(s)
	if !ok {
		return 0
	}
	n := 0
	for i, p := range s.pods {
		if i < s.desiredReplicas() && p != nil && p.DeletionTimestamp == nil && podRevision(p) == rev {
			n++
		}
	}
	return n
}

// milestone is the tenth of the slots moved (0 to 10); -1 before the plan is known.
func milestone(p *redisv1alpha1.OperationProgress) int {
	if p == nil || p.Operation != redisv1alpha1.PhaseScaling || p.SlotsToMove == 0 || p.FinishTime != nil {
		return -1
	}
	return int(10 * int64(p.SlotsMoved) / int64(p.SlotsToMove))
}

// recordMilestone emits a Normal event when a resize step started moving slots or
// crossed a tenth of them: about ten events a migration, not one per batch.
func (r *Reconciler) recordMilestone(s *scope) {
	if s.step == nil || s.step.progress.MovedSlots == 0 || s.decision.Phase != fsm.Scaling {
		return
	}
	before, after := progressOf(&scope{cluster: s.cluster, original: s.original, remembered: s.remembered, now: s.now, decision: s.decision}), progressOf(s)
	if before.SlotsMoved > 0 && milestone(before) == milestone(after) {
		return
	}
	msg := fmt.Sprintf("MigrateSlots: %d/%d slots moved (%d%%), %d keys, %d keys/s", after.SlotsMoved, after.SlotsToMove,
		10*milestone(after), after.KeysMoved, after.KeysPerSecond)
	if after.EstimatedSecondsLeft != nil {
		msg += fmt.Sprintf(", about %ds left", *after.EstimatedSecondsLeft)
	}
	r.Recorder.Event(s.cluster, "Normal", ReasonRedisAction, msg)
}
