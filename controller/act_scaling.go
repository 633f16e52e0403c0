package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// scaleBudget bounds the slots one reconcile migrates, so status, pause and deletion stay
// responsive; the next reconcile goes on from Redis' own state.
const scaleBudget = 2 * time.Second

// requeueNext brings the next step of a resize at once. Not Requeue: true, which goes
// through the workqueue's rate limiter: its per-item backoff (5 ms, doubling) is reset
// only by Forget, so a migration of a dozen steps in a row would wait seconds, then
// minutes, between steps. RequeueAfter forgets the backoff first.
const requeueNext = time.Millisecond

// scaleRequest is what the spec asks of a resize whose pods are members[:keep].
func scaleRequest(rc *redisv1alpha1.RedisCluster, keep int) (redis.ScaleRequest, error) {
	pipeline, err := rc.Spec.PipelineKeys()
	if err != nil {
		return redis.ScaleRequest{}, err
	}
	rpm := int(rc.Spec.ReplicasPerMasterOrDefault())
	req := redis.ScaleRequest{Masters: int(rc.Spec.Masters()), ReplicasPerMaster: rpm, Keep: keep, Pipeline: pipeline, Budget: scaleBudget,
		MaxKeysPerSecond: int(rc.Spec.UpdateStrategy.MaxKeysPerSecond)}
	if u := rc.Spec.UpdateStrategy; u.Type == redisv1alpha1.UpdateStrategyAssignReceive {
		req.Assign = []topology.Assignment{}
		for _, a := range u.AssignStrategies {
			req.Assign = append(req.Assign, topology.Assignment{Slots: int(a.Slots), From: splitList(a.FromReplicas)})
		}
		// Entry i is for the i-th master added: the masters before them are the old ones,
		// and the pods added by this scale-out come after theirs.
		req.NewFrom = (req.Masters - len(u.AssignStrategies)) * (1 + rpm)
	}
	return req, nil
}

func splitList(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// actScaling resizes the cluster, one bounded step per reconcile (reconcileScale).
func (r *Reconciler) actScaling(ctx context.Context, s *scope) (ctrl.Result, error) {
	return r.reconcileScale(ctx, s)
}

// reconcileScale takes one bounded step of a resize (redis.Scale). Scale-out: the
// StatefulSet already has the new size (heldSize lets it through in Scaling);
// once every pod runs and answers, the new nodes are met, the new masters receive slots
// per updateStrategy and the rest become replicas. Scale-in: the slots move off the
// leaving masters, every kept node forgets the leaving ones (which are reset), and only
// then does the StatefulSet shrink.
func (r *Reconciler) reconcileScale(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.decision.Changed() {
		return ctrl.Result{Requeue: true}, nil
	}
	rc := s.cluster
	// A step may turn replica migration off on nodes the resize ends up keeping.
	r.memory(rc).migrationChecked = false
	desired := s.desiredReplicas()
	members, current, ok := scaleMembers(s)
	if !ok {
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
	need := len(members)
	req, err := scaleRequest(rc, desired)
	if err != nil {
		// decide has failed the phase already (cannotProceed); a paused cluster does not act.
		return ctrl.Result{RequeueAfter: requeueFailed}, nil
	}
	req.NodeTimeout = nodeTimeout(s)
	req.Servers = learntServers(s.redis)
	req.Refused = s.assignRefused
	if desired > current {
		req.Keep = need
	}
	f := r.factoryFor(s)
	// Room for one big key's MIGRATE (redis.BigKeyBudget): a step that cannot wait for it
	// would leave the key's slot open for ever. Steps without one end as soon as before.
	sctx, cancel := context.WithTimeout(ctx, scaleBudget+healBudget+redis.BigKeyBudget)
	defer cancel()
	req.Stop = r.stopRequested(ctx, rc)
	began := time.Now()
	p, err := r.scaleStep(sctx, f, members, req)
	s.step = &scaleStep{progress: p, took: time.Since(began)}
	countMigrated(rc, p.MovedSlots, p.MovedKeys, s.step.took)
	r.recordActions(s, p.Actions)
	if p.MovedSlots > 0 {
		log.FromContext(ctx).Info("Migrated slots", "slots", p.MovedSlots, "keys", p.MovedKeys, "remaining", p.Remaining)
		r.recordMilestone(s)
	}
	if err != nil {
		return r.scaleStepFailed(s, err, current, desired)
	}
	s.reason = "Scaling: " + p.Phase
	if p.Mover == redis.MoverAtomic {
		s.reason += " (CLUSTER MIGRATESLOTS)"
	}
	if p.Remaining > 0 {
		s.reason = fmt.Sprintf("%s, %d slots left", s.reason, p.Remaining)
	}
	if p.Done && current > desired {
		if err := r.shrinkStatefulSet(ctx, s, desired); err != nil {
			return ctrl.Result{}, err
		}
	}
	if p.Remaining > 0 || changed(p.Actions) || p.MovedSlots > 0 {
		return ctrl.Result{RequeueAfter: requeueNext}, nil
	}
	return ctrl.Result{RequeueAfter: requeueSoon}, nil
}

// scaleMembers are the members a resize step works on: every pod of the applied size and
// of the new one (on scale-in the leaving ones are emptied first), in ordinal order, with
// the applied size; false, with the reason said, while one is not running yet.
func scaleMembers(s *scope) ([]topology.Member, int, bool) {
	sts := s.statefulSet
	if sts == nil || sts.Spec.Replicas == nil {
		return nil, 0, false
	}
	current := int(*sts.Spec.Replicas)
	need := max(current, s.desiredReplicas())
	if len(s.members) < need {
		s.reason = fmt.Sprintf("Scaling: %d/%d pods running", len(s.members), need)
		return nil, current, false
	}
	members := s.members[:need]
	for i, m := range members {
		if m.Pod != fmt.Sprintf("%s-%d", s.cluster.Name, i) {
			return nil, current, false
		}
	}
	return members, current, true
}

// scaleStepFailed says why a resize step ended with err: a refusal fails the phase in
// this reconcile (decideAgainAfterRefusal), a stuck key is tried again after its backoff,
// anything else soon.
func (r *Reconciler) scaleStepFailed(s *scope, err error, current, desired int) (ctrl.Result, error) {
	var stuck *redis.StuckKeyError
	var failed *redis.AtomicMigrationError
	switch {
	case errors.Is(err, topology.ErrRefused):
		reason, msg := scaleRefusal(s.cluster, err, current, desired)
		r.warnOnce(s, reason, msg)
		s.reason = "" // the phase's own reason carries msg: say it once
		return ctrl.Result{RequeueAfter: requeueFailed}, r.decideAgainAfterRefusal(s, errors.New(msg))
	case errors.As(err, &stuck):
		// Each try blocks the source for up to MIGRATE's timeout: come back after the
		// backoff, not at once.
		r.warnOnce(s, ReasonMigrationStuck, "Scaling: "+stuckReason(s.members, stuck))
		return ctrl.Result{RequeueAfter: redis.StuckBackoff}, nil
	case errors.As(err, &failed):
		// The servers failed the pair's migrations: say so, and come back when the next
		// try may be started, not at once.
		r.warnOnce(s, ReasonSlotMigrationFailed, "Scaling: "+atomicFailedReason(s.members, failed))
		return ctrl.Result{RequeueAfter: redis.AtomicRetryAfter}, nil
	}
	r.warnOnce(s, ReasonRedisError, fmt.Sprintf("Scaling: %v", err))
	return ctrl.Result{RequeueAfter: requeueWaiting}, nil
}

// shrinkStatefulSet applies the StatefulSet at the smaller size once the leaving nodes
// hold nothing and nobody knows them. It applies a copy of the desired StatefulSet with
// that size: what decide derived stays as decided (heldSize held the larger size until
// the step said it was done, which only acting could know).
func (r *Reconciler) shrinkStatefulSet(ctx context.Context, s *scope, desired int) error {
	rc := s.cluster
	log.FromContext(ctx).Info("Shrinking StatefulSet", "StatefulSet", klog.KRef(rc.Namespace, rc.Name), "replicas", desired)
	for _, obj := range s.desired {
		if obj.GetKind() != "StatefulSet" {
			continue
		}
		shrunk := obj.DeepCopy()
		_ = unstructured.SetNestedField(shrunk.Object, int64(desired), "spec", "replicas")
		if _, err := r.apply(ctx, s, []*unstructured.Unstructured{shrunk}); err != nil {
			return err
		}
	}
	r.Recorder.Eventf(rc, "Normal", ReasonApplied, "Shrank StatefulSet %s to %d pods", rc.Name, desired)
	return nil
}

// scaleStep is redis.Scale with the collector's target raised (gcWhileMoving) until it
// returns, however it returns.
func (r *Reconciler) scaleStep(ctx context.Context, f redis.Factory, members []topology.Member, req redis.ScaleRequest) (redis.ScaleProgress, error) {
	defer r.gc.hold()()
	return redis.Scale(ctx, f, members, req)
}

// stopRequested is the Stop of a resize step: it reads the RedisCluster again (from the
// cache) before groups of slots start, and ends the step after the slots in flight once
// the user paused it, asked for another size (an abort puts the old one back), or
// deleted it, so the next reconcile acts on the new spec after the groups in flight, not a budget.
func (r *Reconciler) stopRequested(ctx context.Context, rc *redisv1alpha1.RedisCluster) func() bool {
	return func() bool {
		now := &redisv1alpha1.RedisCluster{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(rc), now); err != nil {
			return false // the step goes on within its budget; the next reconcile reads again
		}
		return now.Spec.Pause || now.Spec.Replicas != rc.Spec.Replicas || !now.DeletionTimestamp.IsZero()
	}
}

// scalePlaced is the SlotsPlaced guard while Scaling: the slots sit where the plan puts
// them (no move left) and none is open. A plan refusing AssignReceive's entries is kept
// for the resize step (s.assignRefused), which refuses with it rather than plan again.
func scalePlaced(s *scope) bool {
	st := s.redis
	if st == nil {
		return false
	}
	req, err := scaleRequest(s.cluster, len(st.Members))
	if err != nil {
		return false
	}
	moves, err := topology.PlanScale(st, req.Shape())
	if ae := (*topology.AssignError)(nil); errors.As(err, &ae) {
		s.assignRefused = err
	}
	return err == nil && len(moves) == 0 && st.NoOpenSlots() && st.Masters() == int(s.cluster.Spec.Masters())
}

// learntServers is what each member of st runs (learnServers), by pod, for the resize
// step's choice of mover; nil before Redis answered.
func learntServers(st *topology.ClusterState) map[string]topology.Server {
	if st == nil {
		return nil
	}
	out := map[string]topology.Server{}
	for _, m := range st.Members {
		if m.Server.Known() {
			out[m.Pod] = m.Server
		}
	}
	return out
}

// scaleRefusal words a refused resize for the status and a Warning event, naming the
// spec field the user should change: redis/ reports what is wrong in its own terms.
func scaleRefusal(rc *redisv1alpha1.RedisCluster, err error, current, desired int) (string, string) {
	var ae *topology.AssignError
	var ce *topology.CapacityError
	var ke *redis.KeysError
	switch {
	case errors.As(err, &ae):
		field := "spec.updateStrategy.assignStrategies"
		if ae.Index >= 0 {
			field = fmt.Sprintf("%s[%d]", field, ae.Index)
		}
		if ae.Field != "" {
			field += "." + ae.Field
		}
		return ReasonInvalidSpec, fmt.Sprintf("Scaling refused: %s: %s; nothing moved", field, ae.Problem)
	case errors.As(err, &ce) && desired >= current:
		return ReasonRedisError, fmt.Sprintf("Scaling refused: the slots planned for the new masters do not fit: %s; no slot moved. "+
			"Raise maxmemory or change spec.updateStrategy", ce.Error())
	case errors.As(err, &ce):
		return ReasonRedisError, fmt.Sprintf("Scaling refused: spec.replicas: %d instances (%d masters) cannot hold the data: %s; "+
			"no slot moved and the cluster keeps serving at %d instances. Raise maxmemory or keep spec.replicas at %d",
			desired, rc.Spec.Masters(), ce.Error(), current, current)
	case errors.As(err, &ke):
		return ReasonRedisError, "Scaling refused: " + ke.Error()
	}
	return ReasonRedisError, err.Error()
}

// atomicFailedReason names the pods of a pair whose slot migrations the servers failed.
func atomicFailedReason(members []topology.Member, e *redis.AtomicMigrationError) string {
	return fmt.Sprintf("slot migration from %s to %s failed %d times in a row (CLUSTER MIGRATESLOTS); last: %s; next try in %v",
		podOf(members, e.Source), podOf(members, e.Target), e.Failures, e.Message, redis.AtomicRetryAfter)
}

// podOf is the pod of the member at addr, or addr.
func podOf(members []topology.Member, addr string) string {
	for _, m := range members {
		if m.Addr == addr {
			return m.Pod
		}
	}
	return addr
}

// stuckReason names the key, its slot and the pods, and leaves out the retry time so
// warnOnce reports each stuck key once.
func stuckReason(members []topology.Member, e *redis.StuckKeyError) string {
	return fmt.Sprintf("migration stuck: key %q of slot %d cannot move from %s to %s within %v; tried again every %v",
		e.Key, e.Slot, podOf(members, e.Source), podOf(members, e.Target), e.Timeout, redis.StuckBackoff)
}
