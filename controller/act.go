package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// How soon a cluster is looked at again. Changes to the CR, its objects and its pods are
// watched and reconciled at once; Redis state is not watched, so phases waiting for Redis
// (an operation under way) poll, and a Running cluster is checked for health at a slower
// pace (docs/architecture.md, "What an idle cluster costs").
const (
	requeueWaiting = 2 * time.Second
	requeueSoon    = 300 * time.Millisecond
	// requeueRunning is the default health check of a Running cluster (--health-check-interval):
	// it finds what Redis does not fix by itself and no pod event announces (a node
	// forgotten by hand, a replica detached), and rereads the password Secret, which is
	// not watched. Redis fails a master over on its own within cluster-node-timeout (5 s).
	requeueRunning = 30 * time.Second
	requeueFailed  = 10 * time.Second
	// bootstrapBudget bounds how long one reconcile drives the bootstrap before it hands
	// the worker back; progress lives in Redis, so the next reconcile goes on from there.
	bootstrapBudget = 30 * time.Second
)

// phaseAction is what one phase does, once the preamble of act is done.
type phaseAction func(r *Reconciler, ctx context.Context, s *scope) (ctrl.Result, error)

// phaseActions is the act table: one entry per phase, each in its own file
// (act_<phase>.go), so changing what a phase does touches that file and its tests.
var phaseActions = map[fsm.Phase]phaseAction{
	fsm.None:      (*Reconciler).actNone,
	fsm.Creating:  (*Reconciler).actCreating,
	fsm.Running:   (*Reconciler).actRunning,
	fsm.Scaling:   (*Reconciler).actScaling,
	fsm.Upgrading: (*Reconciler).actUpgrading,
	fsm.Failed:    (*Reconciler).actFailed,
	fsm.Deleting:  (*Reconciler).actDeleting,
}

// act does what the decided phase needs: the trial of a live configuration change
// (tryLiveConfig), the preamble every phase but Deleting shares (pause, a refused spec,
// applying the desired objects), then the phase's own action
// from phaseActions. Paused and Deleting clusters are never written to (but for the
// foreground finalizer of a deleted one).
func (r *Reconciler) act(ctx context.Context, s *scope) (ctrl.Result, error) {
	if r.tryLiveConfig(ctx, s) {
		// A live directive Redis refuses refuses the spec: decided again from the same
		// stored phase, with the refusal among the facts, before anything is applied.
		if err := r.decide(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	phase := s.decision.Phase
	action, ok := phaseActions[phase]
	if !ok {
		return ctrl.Result{}, fmt.Errorf("failed to act for RedisCluster %s: no action for phase %q", s.cluster.Name, phase)
	}
	if phase == fsm.Deleting {
		return action(r, ctx, s)
	}
	if s.cluster.Spec.Pause {
		return ctrl.Result{}, nil
	}
	r.warnNotices(s)
	if s.specErr != nil {
		r.warnOnce(s, refusalReason(s.specErr), s.specErr.Error())
		// The password Secret a spec names is not watched (the user ConfigMap is): look
		// again in a while.
		return ctrl.Result{RequeueAfter: requeueFailed}, nil
	}
	// Before the StatefulSet: its pods mount NAME-auth.
	if err := r.ensureAuthSecret(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if applied, err := r.applyObjects(ctx, s); err != nil {
		return ctrl.Result{}, err
	} else if len(applied) > 0 {
		r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonApplied, "Applied %s", strings.Join(applied, ", "))
		r.announceConfChange(s)
		if s.resized != "" {
			// Said every time it happens: each is another resize undone.
			r.Recorder.Event(s.cluster, corev1.EventTypeWarning, ReasonReverted, s.resized)
			s.notices = append(s.notices, s.resized)
		}
	}
	if deleted, err := r.deleteUnrendered(ctx, s); err != nil {
		return ctrl.Result{}, err
	} else if len(deleted) > 0 {
		r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonDeletedUnrendered, "Deleted %s: the spec no longer renders it", strings.Join(deleted, ", "))
	}
	// Before the phase's action, which may meet, heal or move slots: a node back at a
	// new IP or on another Kubernetes node announces where it is now.
	r.reconcileExternal(ctx, s)
	// Any phase of a formed cluster: a pod restarted by an upgrade or a heal is checked too.
	if err := r.reconcileLiveConfig(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	res, err := action(r, ctx, s)
	if d := s.externalRecheck; d > 0 && (res.RequeueAfter == 0 || res.RequeueAfter > d) {
		// A load balancer still pending: it is a Warning once loadBalancerBound passes.
		res.RequeueAfter = d
	}
	return res, err
}

// warnNotices says each notice (a problem that does not stop the reconcile) as a Warning,
// once.
func (r *Reconciler) warnNotices(s *scope) {
	for _, n := range s.notices {
		reason := ReasonNameClash
		if n == s.passwordNotice {
			reason = ReasonNoPassword
		}
		r.warnIfNew(s, reason, n)
	}
}

// changed reports whether acts hold one that changes the cluster: a re-announcing MEET
// alone does not, and is no reason to look again at once.
func changed(acts []topology.Action) bool {
	for _, a := range acts {
		if !a.Refresh {
			return true
		}
	}
	return false
}

// recordActions emits one Normal event per kind of Redis write, listing what was done,
// rather than one per command (a 6-node bootstrap sends dozens of MEETs).
func (r *Reconciler) recordActions(s *scope, acts []topology.Action) {
	byKind := map[topology.ActionKind][]string{}
	var kinds []topology.ActionKind
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
	countRefusal(s.cluster, reason)
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
