package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
)

// actNone waits: a CR stays None only while its spec cannot be rendered or acted on
// (act's preamble says why), or while it is paused before it ever started.
func (r *Reconciler) actNone(_ context.Context, _ *scope) (ctrl.Result, error) {
	return ctrl.Result{RequeueAfter: requeueWaiting}, nil
}
