package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// actCreating forms the Redis cluster (the bootstrap) once the pods are up, then, with
// spec.restoreFrom, restores the backup into it (reconcileRestore).
func (r *Reconciler) actCreating(ctx context.Context, s *scope) (ctrl.Result, error) {
	return r.reconcileCreate(ctx, s)
}

// reconcileCreate is the bootstrap, and once the cluster is formed, the restore of a
// cluster created with spec.restoreFrom. Without restoreFrom it is the bootstrap alone.
func (r *Reconciler) reconcileCreate(ctx context.Context, s *scope) (ctrl.Result, error) {
	if restoring(s.cluster) && fsm.Formed(r.observation(s)) {
		return r.reconcileRestore(ctx, s)
	}
	return r.reconcileBootstrap(ctx, s)
}

// reconcileBootstrap forms the Redis cluster once every pod is Ready: meet, slots,
// replicas. It is idempotent (each call plans from what Redis says now), so an operator
// that died half-way finishes the job after a restart.
func (r *Reconciler) reconcileBootstrap(ctx context.Context, s *scope) (ctrl.Result, error) {
	// The bootstrap starts once every pod runs and its Redis answers, without waiting for
	// the readiness probe: Redis holds a master's cluster_state at fail for up to 5 s after
	// it gets its slots (the rejoin delay), and that wait then overlaps the probe's initial
	// delay instead of following it. Running still waits for every pod to be Ready.
	if up := s.podsUp(); up < s.desiredReplicas() {
		s.reason = fmt.Sprintf("%d/%d pods running, %d ready", up, s.desiredReplicas(), s.readyPods())
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
	if s.redis == nil || !s.redis.AllReachable() {
		unreachable := []string{"all"}
		if s.redis != nil {
			unreachable = s.redis.Unreachable()
		}
		if s.readyPods() < s.desiredReplicas() {
			// Just started: Redis opens its port a moment after the pod runs.
			s.reason = "Waiting for Redis to answer on pods " + strings.Join(unreachable, ", ")
			return ctrl.Result{RequeueAfter: requeueSoon}, nil
		}
		// Ready pods whose Redis does not answer the operator (a wrong password, a network
		// policy): the bootstrap would only spin; say which pods and look again later.
		r.warnOnce(s, ReasonRedisError, fmt.Sprintf("Redis does not answer the operator on Ready pods %s", strings.Join(unreachable, ", ")))
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
	rc := s.cluster
	f := r.factoryFor(s)
	bctx, cancel := context.WithTimeout(ctx, bootstrapBudget)
	defer cancel()
	log.FromContext(ctx).Info("Forming Redis cluster", "members", len(s.members), "masters", rc.Spec.Masters())
	p, err := redis.Bootstrap(bctx, f, s.members[:s.desiredReplicas()], int(rc.Spec.Masters()), int(rc.Spec.ReplicasPerMasterOrDefault()))
	r.recordActions(s, p.Actions)
	switch {
	case errors.Is(err, topology.ErrRefused):
		r.warnOnce(s, ReasonRedisError, err.Error())
		return ctrl.Result{RequeueAfter: requeueFailed}, r.decideAgainAfterRefusal(s, err)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		s.reason = "Bootstrap in progress: " + p.Phase
		return ctrl.Result{Requeue: true}, nil
	case err != nil:
		r.warnOnce(s, ReasonRedisError, err.Error())
		return ctrl.Result{}, err
	}
	s.reason = "Bootstrap: " + p.Phase
	// Formed: look again at once, so the phase machine sees it and moves to Running.
	return ctrl.Result{Requeue: true}, nil
}
