package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// How soon a cluster is looked at again. Redis state is not watched, so phases that wait
// for Redis poll; a Running cluster is checked for health at a slower pace.
const (
	requeueWaiting = 2 * time.Second
	requeueSoon    = 300 * time.Millisecond
	requeueRunning = 30 * time.Second
	requeueFailed  = 10 * time.Second
	// bootstrapBudget bounds how long one reconcile drives the bootstrap before it hands
	// the worker back; progress lives in Redis, so the next reconcile goes on from there.
	bootstrapBudget = 30 * time.Second
)

// act does what the decided phase needs. Paused and Deleting clusters are never written
// to (but for the foreground finalizer of a deleted one).
func (r *Reconciler) act(ctx context.Context, s *scope) (ctrl.Result, error) {
	d := s.decision
	switch {
	case d.Phase == fsm.Deleting:
		return r.reconcileDeletion(ctx, s)
	case s.cluster.Spec.Pause:
		return ctrl.Result{}, nil
	}
	for _, n := range s.notices {
		r.warnIfNew(s, ReasonNameClash, n)
	}
	if s.specErr != nil {
		r.warnOnce(s, refusalReason(s.specErr), s.specErr.Error())
		// The Secret or ConfigMap a spec names is not watched: look again in a while.
		return ctrl.Result{RequeueAfter: requeueFailed}, nil
	}
	if applied, err := r.applyObjects(ctx, s); err != nil {
		return ctrl.Result{}, err
	} else if len(applied) > 0 {
		r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonApplied, "Applied %s", strings.Join(applied, ", "))
		if s.resized != "" {
			// Said every time it happens: each is another resize undone.
			r.Recorder.Event(s.cluster, corev1.EventTypeWarning, ReasonReverted, s.resized)
			s.notices = append(s.notices, s.resized)
		}
	}
	switch d.Phase {
	case fsm.Creating:
		return r.reconcileBootstrap(ctx, s)
	case fsm.Running:
		if d.Changed() {
			return ctrl.Result{Requeue: true}, nil
		}
		if needsHealing(s) {
			// A pod restarting, back at a new address or empty, a lost node: heal once
			// every pod answers, and look again soon so the status catches up.
			return r.reconcileHeal(ctx, s)
		}
		return ctrl.Result{RequeueAfter: requeueRunning}, nil
	case fsm.Upgrading:
		return r.reconcileUpgrade(ctx, s)
	case fsm.Scaling:
		return r.reconcileScale(ctx, s)
	case fsm.Failed:
		if !formedOnce(&s.cluster.Status) {
			// Creating failed (timed out waiting for pods, say): once the cause is gone
			// the bootstrap finishes, and the cluster recovers to Running.
			return r.reconcileBootstrap(ctx, s)
		}
		if res, done, err := r.rollBackFromFailed(ctx, s); done {
			return res, err
		}
		if needsHealing(s) {
			// Broken by lost slots, or a cause that healing removes (every pod back at a
			// new address): heal what can be healed; lost slots stay lost.
			return r.reconcileHeal(ctx, s)
		}
		return ctrl.Result{RequeueAfter: requeueFailed}, nil
	default:
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
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
	f := r.redis.factory(client.ObjectKeyFromObject(rc), s.password)
	bctx, cancel := context.WithTimeout(ctx, bootstrapBudget)
	defer cancel()
	log.FromContext(ctx).Info("Forming Redis cluster", "members", len(s.members), "masters", rc.Spec.Masters())
	p, err := redis.Bootstrap(bctx, f, s.members[:s.desiredReplicas()], int(rc.Spec.Masters()), int(rc.Spec.ReplicasPerMasterOrDefault()))
	r.recordActions(s, p.Actions)
	switch {
	case errors.Is(err, redis.ErrRefused):
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

// recordActions emits one Normal event per kind of Redis write, listing what was done,
// rather than one per command (a 6-node bootstrap sends dozens of MEETs).
func (r *Reconciler) recordActions(s *scope, acts []redis.Action) {
	byKind := map[redis.ActionKind][]string{}
	var kinds []redis.ActionKind
	for _, a := range acts {
		if a.Refresh {
			continue // a re-announcing MEET between nodes that know each other: no change to report
		}
		if _, seen := byKind[a.Kind]; !seen {
			kinds = append(kinds, a.Kind)
		}
		byKind[a.Kind] = append(byKind[a.Kind], a.Message)
	}
	for _, k := range kinds {
		msgs := byKind[k]
		msg := strings.Join(msgs, "; ")
		if len(msgs) > 6 {
			msg = fmt.Sprintf("%s; … (%d in all)", strings.Join(msgs[:6], "; "), len(msgs))
		}
		r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonRedisAction, "%s: %s", k, msg)
	}
}

// warnOnce makes msg the status reason and emits it as a Warning event when it is new for
// this cluster's status, so a problem that lasts is reported once, not every reconcile.
func (r *Reconciler) warnOnce(s *scope, reason, msg string) {
	s.reason = msg
	r.warnIfNew(s, reason, msg)
}

// warnIfNew emits a Warning event unless the status reason already says msg.
func (r *Reconciler) warnIfNew(s *scope, reason, msg string) {
	if strings.Contains(s.original.Reason, msg) {
		return
	}
	r.Recorder.Event(s.cluster, corev1.EventTypeWarning, reason, msg)
}

// allInstancesHealthy reports whether every pod is Ready and every Redis node reachable,
// connected to all others and not flagged failing.
func allInstancesHealthy(s *scope) bool {
	if s.redis == nil || len(s.pods) != s.desiredReplicas() {
		return false
	}
	for _, f := range s.redis.Facts() {
		if !f.Reachable || !f.Connected || f.Failed {
			return false
		}
	}
	return s.readyPods() == s.desiredReplicas()
}
