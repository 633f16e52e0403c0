package controller

import (
	"context"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// ReasonHoldReleased: a raised cluster-node-timeout left by an earlier operator process
// (one big key's MIGRATE holds failure detection, redis/bigkey.go, and so does a restore,
// redis/backup/restore.go) was set back.
const ReasonHoldReleased = "HoldReleased"

// releaseStaleHolds sets cluster-node-timeout back to the configured value on nodes where
// an operator that died mid big-key move or mid restore left it raised. Once per cluster per operator
// process, on the first reconcile that finds it Running and whole: later holds are set
// back by the process that raises them. A node that cannot be read is looked at again on
// a later reconcile.
func (r *Reconciler) releaseStaleHolds(ctx context.Context, s *scope) {
	if r.memory(s.cluster).holdsChecked {
		return
	}
	configured, ok := configuredNodeTimeout(s)
	if !ok {
		return
	}
	addrs := s.memberAddrs()
	n, err := redis.ReleaseStaleHolds(ctx, r.factoryFor(s), addrs, configured)
	if n > 0 {
		r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonHoldReleased,
			"cluster-node-timeout set back to %d ms on %d instances (raised for a big key's move or a restore by an operator that stopped before setting it back)", configured.Milliseconds(), n)
	}
	if err != nil {
		log.FromContext(ctx).Info("could not check cluster-node-timeout on every instance; will look again", "error", err.Error())
		return
	}
	r.memory(s.cluster).holdsChecked = true
}

// configuredNodeTimeout is cluster-node-timeout as the rendered redis.conf sets it (its
// last line for the directive wins, as in Redis).
func configuredNodeTimeout(s *scope) (time.Duration, bool) {
	conf, ok := renderedConf(s)
	if !ok {
		return 0, false
	}
	ms, err := strconv.ParseInt(topology.ConfValue(conf, "cluster-node-timeout", ""), 10, 64)
	if err != nil || ms <= 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
