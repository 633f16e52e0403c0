package controller

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
)

// actRunning watches a formed cluster: it heals what is not whole (controller/heal.go) and writes
// nothing to a healthy one. A Running cluster keeps its StatefulSet's size and template
// (decide holds them); Scaling and Upgrading change them.
func (r *Reconciler) actRunning(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.decision.Changed() {
		return ctrl.Result{Requeue: true}, nil
	}
	// A master whose pod is being deleted hands its slots to a replica first (handover.go).
	if acted, res, err := r.handOver(ctx, s); acted || err != nil {
		return res, err
	}
	if needsHealing(s) {
		// A pod restarting, back at a new address or empty, a lost node: heal once
		// every pod answers, and look again soon so the status catches up.
		return r.reconcileHeal(ctx, s)
	}
	// A cluster-node-timeout an earlier operator raised and could not set back (staleholds.go).
	r.releaseStaleHolds(ctx, s)
	// Replica migration a scale-in turned off on nodes it then kept (replicamigration.go).
	r.restoreReplicaMigration(ctx, s)
	// A whole cluster takes a new password or changed users (auth.go); a step that
	// fails is tried again soon, the cluster serving meanwhile.
	if err := r.reconcileAuth(ctx, s); err != nil {
		return ctrl.Result{RequeueAfter: requeueWaiting}, fmt.Errorf("failed to apply the password or users: %w", err)
	}
	// A renewed certificate is loaded by every instance (tls.go), once the kubelet has
	// refreshed the mounted files.
	if wait, err := r.reconcileTLS(ctx, s); err != nil || wait {
		return ctrl.Result{RequeueAfter: requeueCertificate}, err
	}
	return ctrl.Result{RequeueAfter: r.healthCheckInterval()}, nil
}
