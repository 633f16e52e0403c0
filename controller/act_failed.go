package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
)

// actFailed starts no new operation. A cluster that never formed keeps bootstrapping, so
// it recovers once the cause is gone; a formed one is healed as in Running.
func (r *Reconciler) actFailed(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !formedOnce(&s.cluster.Status) {
		// Creating failed (timed out waiting for pods, say): once the cause is gone
		// the bootstrap (and a restore) finishes, and the cluster recovers to Running.
		return r.reconcileCreate(ctx, s)
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
}
