package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// decide reduces what was observed to the facts the guards read (observation, with every
// cannot-proceed fact known before acting), lets the phase machine decide the phase, and
// derives from that phase the objects to apply (deriveDesired). Its one look at Redis is
// a read whose need depends on the stored phase (readReplication).
func (r *Reconciler) decide(ctx context.Context, s *scope) error {
	r.readReplication(ctx, s)
	d, err := fsm.Evaluate(s.cluster.Status.Phase, r.observation(s))
	if err != nil {
		return fmt.Errorf("failed to evaluate phase of RedisCluster %s: %w", s.cluster.Name, err)
	}
	s.decision = d
	return deriveDesired(s)
}

// decideAgainAfterRefusal is the one second evaluation: acting found that the operation
// cannot proceed from Redis data it read while acting (the bootstrap refused to claim
// nodes holding keys; a resize refused for lack of memory, keys on a new node or an
// assignment the cluster's masters cannot give), which decide could not know. The machine
// evaluates the same facts plus that one, so the cluster fails in this reconcile with the
// refusal as the reason. Everything else that stops an operation is a fact decide
// computes before the machine runs (cannotProceed).
func (r *Reconciler) decideAgainAfterRefusal(s *scope, refusal error) error {
	obs := r.observation(s)
	obs.CannotProceed, obs.CannotProceedMessage = true, refusal.Error()
	d, err := fsm.Evaluate(s.decision.Phase, obs)
	if err != nil {
		return fmt.Errorf("failed to evaluate phase of RedisCluster %s: %w", s.cluster.Name, err)
	}
	if d.Changed() {
		d.From = s.decision.From
		s.decision = d
	}
	return nil
}

// observation reduces the scope to the plain facts the phase machine's guards read.
func (r *Reconciler) observation(s *scope) fsm.Observation {
	rc := s.cluster
	sts := s.statefulSet
	o := fsm.Observation{
		SpecValid:         s.specErr == nil,
		Paused:            rc.Spec.Pause,
		Deleting:          !rc.DeletionTimestamp.IsZero(),
		SpecChanged:       specChangedSinceFailure(rc),
		DesiredReplicas:   rc.Spec.Replicas,
		ObservedReplicas:  observedSize(s),
		StatefulSetAtSize: sts != nil && sts.Spec.Replicas != nil && *sts.Spec.Replicas == rc.Spec.Replicas && sts.Status.ReadyReplicas == rc.Spec.Replicas,
		PodsReady:         s.readyPods() == s.desiredReplicas() && len(s.pods) == s.desiredReplicas(),
		TemplateChanged:   s.templateChanged || podsOutdated(s),
		AllPodsUpdated:    allPodsUpdated(s),
		TimedOut:          r.timedOut(s),
		Restored:          restored(rc),
	}
	if err := cannotProceed(s); err != nil {
		o.CannotProceed, o.CannotProceedMessage = true, err.Error()
	}
	if st := s.redis; st != nil {
		masters := int(rc.Spec.Masters())
		o.AllMet = st.AllMet() && len(st.Members) == s.desiredReplicas()
		o.NodesAgree = st.Agreed()
		o.SlotsCovered = st.AllSlotsCovered()
		o.ReplicasAttached = st.Masters() == masters && st.MastersHaveReplicas(int(rc.Spec.ReplicasPerMasterOrDefault()))
		o.ClusterOK = st.ClusterOK()
		o.SlotsPlaced = st.NoOpenSlots() && st.Masters() == masters
		o.RemovedNodesForgotten = o.ObservedReplicas == rc.Spec.Replicas
		if rc.Status.Phase == fsm.Scaling {
			// Done only when the slots match the plan and no member knows a node beyond
			// the new size (the leaving ones forgotten everywhere).
			o.SlotsPlaced = scalePlaced(s)
			o.RemovedNodesForgotten = o.RemovedNodesForgotten && st.KnowsOnly() && len(st.Members) == s.desiredReplicas()
		}
		o.ReplicasInSync = st.NoFailures() && st.ReplicaLinksUp() && replicationInSync(s)
		// Slots whose master and every replica are gone (or that nobody claims) stay down
		// until a human restores them: healing cannot invent their keys. A master that is
		// only down, with a replica to promote, is not broken.
		o.Broken = len(st.LostSlots()) > 0
	}
	return o
}

// observedSize is the number of nodes the Redis cluster knows; before any node answers it
// falls back to the size the operator last applied to the StatefulSet (not its live size,
// which anyone can change), so an unreachable cluster does not look resized.
func observedSize(s *scope) int32 {
	if st := s.redis; st != nil && st.AllReachable() && len(st.Members) >= s.desiredReplicas() {
		return int32(st.ReachableNodes())
	}
	if s.redis != nil {
		if n, ok := s.redis.KnownSize(); ok {
			return int32(n)
		}
	}
	if s.appliedSize > 0 {
		return s.appliedSize
	}
	return s.cluster.Spec.Replicas
}

// timedOut compares how long the current phase has lasted with the operator's timeout
// for it. The phase's start is the Progressing condition's transition time, kept in the
// status, so a restarted operator keeps counting.
func (r *Reconciler) timedOut(s *scope) bool {
	var limit time.Duration
	switch s.cluster.Status.Phase {
	case fsm.Creating:
		limit = r.Options.CreateTimeout
	case fsm.Scaling:
		limit = r.Options.ScaleTimeout
	case fsm.Upgrading:
		limit = r.Options.UpgradeTimeout
	default:
		return false
	}
	c := meta.FindStatusCondition(s.cluster.Status.ClusterConditions, ConditionProgressing)
	return limit > 0 && c != nil && s.now.Sub(c.LastTransitionTime.Time) > limit
}

// specChangedSinceFailure reports whether the user edited the spec after the cluster
// failed: the Progressing condition records the generation the failure was seen at.
func specChangedSinceFailure(rc *redisv1alpha1.RedisCluster) bool {
	if rc.Status.Phase != fsm.Failed {
		return false
	}
	c := meta.FindStatusCondition(rc.Status.ClusterConditions, ConditionProgressing)
	return c != nil && rc.Generation > c.ObservedGeneration
}

// cannotProceed says why the operation of the stored phase cannot be done as the spec
// asks, nil when nothing stops it. Each is known before acting: a spec the operator
// cannot act on, a MIGRATE batch size it cannot read while Scaling, and, while
// Upgrading, a master the roll would have to restart with no replica to take over and
// data that does not outlive its pod.
func cannotProceed(s *scope) error {
	if s.specErr != nil {
		return s.specErr
	}
	switch s.cluster.Status.Phase {
	case fsm.Creating:
		if st := s.cluster.Status.Restore; st != nil && st.FailedAt != nil {
			return fmt.Errorf("spec.restoreFrom: restoring backup %s failed for good: %s: %s; delete this RedisCluster and create it again once the cause is fixed",
				st.Backup, st.Reason, st.Message)
		}
	case fsm.Scaling:
		if _, err := scaleRequest(s.cluster, s.desiredReplicas()); err != nil {
			return err
		}
	case fsm.Upgrading:
		return upgradeLosesData(s)
	}
	return nil
}

// restored is the Restored fact: true without spec.restoreFrom (every cluster created
// without one moves exactly as before), for a cluster formed before, and once
// status.restore records every key of the named backup in.
func restored(rc *redisv1alpha1.RedisCluster) bool {
	from := rc.Spec.RestoreFrom
	if from == nil || formedOnce(&rc.Status) {
		return true
	}
	st := rc.Status.Restore
	return st != nil && st.Backup == from.Backup && st.CompletedAt != nil
}

// readReplication reads INFO replication of the replicas when a roll may be under way
// (upgradeMayBeUnderWay): a read only, the one decide makes, because whether it is worth
// its cost depends on the stored phase, which observe never reads. Read once a
// reconcile: a second decide (act's, after a refused live directive) reuses it.
func (r *Reconciler) readReplication(ctx context.Context, s *scope) {
	if s.redis == nil || s.replication != nil || !upgradeMayBeUnderWay(s) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, observeBudget)
	defer cancel()
	s.replication = observeReplication(ctx, r.factoryFor(s), s.redis)
}

// upgradeMayBeUnderWay says whether INFO replication is worth reading: only Upgrading's
// guard (UpgradeDone) and the failovers (of a roll, or a hand-over from a pod being deleted,
// handover.go) read it, so it is read while the stored phase is Upgrading, the pods are
// about to be rolled (a new template, outdated pods) or a pod is terminating. A cost
// choice, decide's because it reads the stored phase: an idle Running cluster is spared
// a command per replica each health check, and the facts the machine evaluates in other
// phases do not depend on it.
func upgradeMayBeUnderWay(s *scope) bool {
	return s.cluster.Status.Phase == fsm.Upgrading || s.templateChanged || podsOutdated(s) || len(terminatingPods(s)) > 0
}

// observeReplication reads INFO replication from every reachable replica, all at once so
// it costs one round trip. A replica that does not answer is left out, so it is neither a
// failover target nor counted in sync.
func observeReplication(ctx context.Context, f redis.Factory, st *topology.ClusterState) map[string]topology.Replication {
	out := map[string]topology.Replication{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range st.Members {
		m := &st.Members[i]
		if self := m.Self(); self == nil || !self.Replica {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, err := f.For(m.Addr).Replication(ctx); err == nil {
				mu.Lock()
				out[m.Pod] = r
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}
