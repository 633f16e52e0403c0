package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// healBudget bounds one healing step: an observation and a handful of writes.
const healBudget = 10 * time.Second

// promoteAfter is how long a master holding slots may be seen failing before the operator
// promotes its most up-to-date replica itself. Redis fails a master over on its own about
// 1–2 s after flagging it fail (cluster-node-timeout, 5 s in the template, after it stops
// answering), and retries a lost election after twice the node timeout; three node
// timeouts leave Redis that retry and still bound the outage when Redis will never act (no
// majority of masters, cluster-replica-no-failover, a replica it deems too stale).
const promoteAfter = 15 * time.Second

// healOptions are the healer's own-failover settings for this cluster.
func (r *Reconciler) healOptions(s *scope) redis.HealOptions {
	mem := r.memory(s.cluster)
	if mem.failWatch == nil {
		mem.failWatch = redis.NewFailWatch()
	}
	pipeline, _ := s.cluster.Spec.PipelineKeys() // an invalid value: the default
	return redis.HealOptions{Watch: mem.failWatch, PromoteAfter: promoteAfter, Now: r.now, Pipeline: pipeline, NodeTimeout: nodeTimeout(s)}
}

// needsHealing reports whether a cluster that was formed once is not whole: an instance
// not Ready, unreachable, unconnected or flagged failing, or the Redis cluster not formed
// as the spec asks (a lost node still known, a member at an old address, a replica
// missing). A healthy cluster is never handed to the healer, so it stays write-free.
func needsHealing(s *scope) bool {
	if !allInstancesHealthy(s) {
		return true
	}
	rc := s.cluster
	return !s.redis.Formed(int(rc.Spec.Masters()), int(rc.Spec.ReplicasPerMasterOrDefault()))
}

// reconcileHeal takes one healing step (redis.Heal) once every desired pod runs and its
// Redis answers: re-meeting pods back at new addresses, forgetting lost nodes that hold no
// slots, attaching fresh nodes as replicas. Until then Redis Cluster's own failover is
// all that acts. The phase does not change while healing; the Ready condition and the
// instance conditions show where the cluster stands.
func (r *Reconciler) reconcileHeal(ctx context.Context, s *scope) (ctrl.Result, error) {
	desired := s.desiredReplicas()
	if sts := s.statefulSet; sts == nil || sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != desired {
		// A size change the operator holds back (Failed with CannotProceed): the members
		// are not the spec's, and healing them towards it would be wrong.
		return ctrl.Result{RequeueAfter: requeueFailed}, nil
	}
	rc := s.cluster
	f := r.factoryFor(s)
	budget := healBudget
	if s.redis != nil && !s.redis.NoOpenSlots() {
		// The step finishes an open slot first (redis.FixOpenSlots): room for one big
		// key's MIGRATE, or a slot holding one would be given up on at every step.
		budget += redis.BigKeyBudget
	}
	hctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	if s.podsUp() < desired || len(s.members) < desired || s.redis == nil || !s.redis.AllReachable() {
		// Pods are missing: nothing is re-pointed or forgotten on a partial view. Only a
		// master that is gone and that Redis has not failed over in time gets its best
		// replica promoted, so its slots do not stay down while a pod cannot come back.
		if len(s.members) > 0 {
			p, err := redis.Promote(hctx, f, s.members, r.healOptions(s))
			r.recordActions(s, p.Actions)
			countHealed(rc, p.Actions)
			if err != nil {
				r.warnOnce(s, ReasonRedisError, fmt.Sprintf("Healing: %v", err))
			}
		}
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
	p, err := redis.HealWith(hctx, f, s.members[:desired], int(rc.Spec.Masters()), int(rc.Spec.ReplicasPerMasterOrDefault()), r.healOptions(s))
	r.recordActions(s, p.Actions)
	countHealed(rc, p.Actions)
	switch {
	case errors.Is(err, topology.ErrRefused):
		// Nothing was written; say why once and look again at the slow pace.
		r.warnOnce(s, ReasonRedisError, err.Error())
		return ctrl.Result{RequeueAfter: requeueFailed}, nil
	case err != nil:
		r.warnOnce(s, ReasonRedisError, fmt.Sprintf("Healing: %v", err))
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
	if len(p.Actions) > 0 {
		log.FromContext(ctx).Info("Healing Redis cluster", "phase", p.Phase, "actions", topology.Messages(p.Actions))
	}
	if !p.Done {
		s.reason = "Healing: " + p.Phase
	}
	return ctrl.Result{RequeueAfter: requeueWaiting}, nil
}
