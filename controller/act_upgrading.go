package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

const (
	// requeueFailover is how soon a failover in flight is looked at again: a coordinated
	// CLUSTER FAILOVER usually completes within a few hundred milliseconds.
	requeueFailover = 500 * time.Millisecond
	// failoverWait is how long a FAILOVER sent is waited for before it is sent again;
	// Redis abandons a manual failover after 5 s.
	failoverWait = 6 * time.Second
	// syncCheckWithin is how long one sync check reads a streaming replica again before it
	// reports it behind: long enough for the bytes in flight on a busy master, short
	// enough that a reconcile does not stall on a replica that is really behind.
	syncCheckWithin = 500 * time.Millisecond
)

// failoverSent is the CLUSTER FAILOVER last sent for one cluster.
type failoverSent struct {
	replicaID, replicaPod, masterPod string
	at                               time.Time
}

// actUpgrading rolls the pods onto the new template, one step per reconcile
// (reconcileUpgrade; the rollback rule is in upgrade_rollback.go).
func (r *Reconciler) actUpgrading(ctx context.Context, s *scope) (ctrl.Result, error) {
	return r.reconcileUpgrade(ctx, s)
}

// reconcileUpgrade takes one step of the rolling upgrade. The StatefulSet is OnDelete, so
// the operator restarts each pod itself, one at a time and only while the cluster is whole:
// replicas first, then each master once it was failed over to a replica that already runs
// the new template, which leaves the old master a replica to restart like the others.
func (r *Reconciler) reconcileUpgrade(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.appliedStatefulSet {
		// A template was applied in this reconcile (the one that enters Upgrading applies
		// the new template), so the StatefulSet observed before says the old revision: let
		// the StatefulSet controller compute the new one first.
		return ctrl.Result{RequeueAfter: requeueSoon}, nil
	}
	if wait, msg := r.failoverInFlight(s); wait {
		s.reason = msg
		return ctrl.Result{RequeueAfter: requeueFailover}, nil
	}
	rev, ok := updateRevision(s)
	if !ok {
		if needsHealing(s) {
			return r.reconcileHeal(ctx, s)
		}
		s.reason = "Waiting for the StatefulSet controller to compute the new revision"
		return ctrl.Result{RequeueAfter: requeueSoon}, nil
	}
	if pod, why := failingPod(s, rev, true); pod != nil {
		// The new template does not come up: restarting more pods on it would only take
		// more of the cluster down. Stop, say which pod and why, and wait for the user.
		r.warnStopped(s, fmt.Sprintf("Upgrade stopped: pod %s on the new template %s; no further pod is restarted. Fix the template or set the spec back: pods on a revision that is no longer current are then replaced by themselves", pod.Name, why))
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
	if s.cluster.Spec.PodTemplate().UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		s.reason = "spec.pod[0].updateStrategy is OnDelete: delete the pods to restart them on the new template"
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
	if res, done, err := r.rollBackFailingPod(ctx, s, rev); done {
		return res, err
	}
	if needsHealing(s) {
		// A restarted pod not back yet, or back empty: heal (and wait) before the next.
		return r.reconcileHeal(ctx, s)
	}
	m, master := nextRestart(s, rev)
	if m == nil {
		s.reason = "Every pod runs the new template; waiting for the replicas to sync"
		return ctrl.Result{RequeueAfter: requeueSoon}, nil
	}
	// A spare copy at every moment: the pod restarted last (or the empty node healing
	// joined in its place) must hold a full, current copy before another pod goes.
	if wait := r.replicaBehind(ctx, s, m); wait != "" {
		s.reason = wait + " before restarting the next pod"
		return ctrl.Result{RequeueAfter: requeueFailover}, nil
	}
	if !master {
		return r.restartPod(ctx, s, m.Pod, fmt.Sprintf("Restarting %s on the new template", m.Pod))
	}
	return r.upgradeMaster(ctx, s, m, rev)
}

// warnStopped says why the roll stopped, with a Warning the first time this stop is seen.
func (r *Reconciler) warnStopped(s *scope, msg string) {
	s.reason = msg
	mem := r.memory(s.cluster)
	if mem.stopWarned == msg {
		return
	}
	mem.stopWarned = msg
	r.Recorder.Event(s.cluster, corev1.EventTypeWarning, ReasonUpgradeStopped, msg)
}

// replicaBehind checks every replica against its master (redis.CheckSync) and says which
// one is not caught up and why; "" when all are. One replica is not waited for: next, the
// pod restarted next, when its server cannot read the RDB its master writes
// (topology.UnreadableRDB). That is an old master failed over to a replica on a newer
// server, which refused it a partial resync: the full sync it asks for instead can never
// load on its server, while its restart onto the new one, which it is waiting for, can.
func (r *Reconciler) replicaBehind(ctx context.Context, s *scope, next *topology.MemberState) string {
	f := r.factoryFor(s)
	for _, p := range s.redis.ReplicasAndMasters() {
		if p.Master == nil {
			return fmt.Sprintf("Waiting for the master of replica %s to be a member", p.Replica.Pod)
		}
		if p.Replica == next && topology.UnreadableRDB(p.Replica.Server, []topology.Server{p.Master.Server}) != "" {
			continue
		}
		if why := r.syncWait(ctx, f, p.Master, p.Replica); why != "" {
			return why
		}
	}
	return ""
}

// syncWait is "" when the replica is caught up with the master, else why it is not.
func (r *Reconciler) syncWait(ctx context.Context, f redis.Factory, master, replica *topology.MemberState) string {
	var aliases []string
	if master.External != "" {
		// spec.externalAccess NodePort: replicas replicate from the node port the master
		// announces.
		aliases = append(aliases, master.External)
	}
	c, err := redis.CheckSync(ctx, f, master.Addr, replica.Addr, syncCheckWithin, aliases...)
	switch {
	case err != nil:
		return fmt.Sprintf("Waiting for replica %s to answer a sync check: %v", replica.Pod, err)
	case !c.CaughtUp():
		return fmt.Sprintf("Waiting for replica %s to catch up with its master %s: %s", replica.Pod, master.Pod, c.Why())
	}
	return ""
}

// upgradeMaster fails the master over to an updated, in-sync replica; a master with no
// replica is restarted as it is only when its data survives the restart.
func (r *Reconciler) upgradeMaster(ctx context.Context, s *scope, m *topology.MemberState, rev string) (ctrl.Result, error) {
	if target := failoverTarget(s, m.ID(), rev); target != nil {
		// A failover to a replica that lags makes the master hold its clients until the
		// replica catches up, and Redis gives up after 5 s: check first, wait if behind.
		f := r.factoryFor(s)
		if why := r.syncWait(ctx, f, m, target); why != "" {
			s.reason = why + " before failing it over"
			return ctrl.Result{RequeueAfter: requeueFailover}, nil
		}
		return r.failOver(ctx, s, m, target, ReasonUpgrade, "before its restart")
	}
	if s.cluster.Spec.ReplicasPerMasterOrDefault() > 0 {
		s.reason = fmt.Sprintf("Waiting for a replica of %s on the new template to sync before failing it over", m.Pod)
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
	if !persistentData(s.cluster) {
		// decide has failed the phase already (upgradeLosesData); only a paused cluster
		// could get here, and it does not act.
		return ctrl.Result{RequeueAfter: requeueFailed}, nil
	}
	r.Recorder.Eventf(s.cluster, corev1.EventTypeWarning, ReasonUpgrade,
		"Restarting master %s, which has no replica, on the new template: its slots are unavailable until it is back", m.Pod)
	return r.restartPod(ctx, s, m.Pod, "")
}

// upgradeLosesData says why the roll cannot go on without losing keys, nil when it can:
// the next pod to restart is a master with no replica to fail over to (replicasPerMaster
// 0) whose data does not outlive its pod. A fact decide knows before acting, so the
// cluster fails instead of restarting it.
func upgradeLosesData(s *scope) error {
	rc := s.cluster
	if rc.Spec.ReplicasPerMasterOrDefault() > 0 || persistentData(rc) || s.redis == nil ||
		rc.Spec.PodTemplate().UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return nil
	}
	rev, ok := updateRevision(s)
	if !ok {
		return nil
	}
	if m, master := nextRestart(s, rev); master {
		return fmt.Errorf("spec.pod[0].volumes: master %s has no replica to fail over to (replicasPerMaster 0) and its data does not outlive its pod (%s), so restarting it on the new template would lose its keys; set replicasPerMaster, or a persistent volume type (nfs, volumeClaimTemplate), or set the template back to recover", m.Pod, rc.Spec.PodTemplate().Volumes.Type)
	}
	return nil
}

// failOver sends CLUSTER FAILOVER to the target replica and remembers it, so the next
// reconciles wait for the roles to swap instead of sending it again. The event (reason, and
// why, ending its message) says what the failover is for.
func (r *Reconciler) failOver(ctx context.Context, s *scope, m, target *topology.MemberState, reason, why string) (ctrl.Result, error) {
	f := r.factoryFor(s)
	log.FromContext(ctx).Info("Failing over master", "Pod", klog.KRef(s.cluster.Namespace, m.Pod), "replica", klog.KRef(s.cluster.Namespace, target.Pod), "command", "CLUSTER FAILOVER")
	if err := f.For(target.Addr).Failover(ctx); err != nil {
		r.warnOnce(s, ReasonRedisError, err.Error())
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
	countFailover(s.cluster, failoverManual)
	r.memory(s.cluster).failover = &failoverSent{
		replicaID: target.ID(), replicaPod: target.Pod, masterPod: m.Pod, at: s.now,
	}
	r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, reason, "Failing over %s to %s %s", m.Pod, target.Pod, why)
	s.reason = fmt.Sprintf("Failing over %s to %s", m.Pod, target.Pod)
	return ctrl.Result{RequeueAfter: requeueFailover}, nil
}

// failoverInFlight reports whether a FAILOVER sent lately has not yet been seen through:
// until every member agrees the replica is a master, nothing else is done (not even
// healing, which would read the half-swapped view as damage).
func (r *Reconciler) failoverInFlight(s *scope) (bool, string) {
	mem := r.memory(s.cluster)
	sent := mem.failover
	if sent == nil {
		return false, ""
	}
	if s.redis.AllSeeMaster(sent.replicaID) || s.now.Sub(sent.at) > failoverWait {
		mem.failover = nil
		return false, ""
	}
	return true, fmt.Sprintf("Waiting for %s to take over from %s", sent.replicaPod, sent.masterPod)
}

// restartPod deletes the pod; the StatefulSet recreates it on the update revision.
func (r *Reconciler) restartPod(ctx context.Context, s *scope, name, event string) (ctrl.Result, error) {
	pod := podNamed(s, name)
	if pod == nil {
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	}
	log.FromContext(ctx).Info("Deleting Pod", "Pod", klog.KObj(pod), "reason", "restart on the new template")
	if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("failed to delete pod %s: %w", name, err)
	}
	if event != "" {
		r.Recorder.Event(s.cluster, corev1.EventTypeNormal, ReasonUpgrade, event)
	}
	// The roll moves on: a later stop, even for the same pod and cause, is news again.
	r.memory(s.cluster).stopWarned = ""
	s.reason = "Restarting " + name + " on the new template"
	// Give the cache time to see the pod go, so the next reconcile does not pick it again.
	return ctrl.Result{RequeueAfter: requeueWaiting}, nil
}

// nextRestart picks the next member whose pod runs an old revision: replicas first, in
// ordinal order, then masters. master says which kind it is.
func nextRestart(s *scope, rev string) (*topology.MemberState, bool) {
	var firstMaster *topology.MemberState
	for i := range s.redis.Members {
		m := &s.redis.Members[i]
		pod, self := podNamed(s, m.Pod), m.Self()
		if pod == nil || self == nil || podRevision(pod) == rev {
			continue
		}
		if self.Replica {
			return m, false
		}
		if firstMaster == nil {
			firstMaster = m
		}
	}
	return firstMaster, firstMaster != nil
}

// failoverTarget is a replica of masterID whose pod runs the update revision and whose
// INFO replication says it is connected and not syncing; nil when none is.
func failoverTarget(s *scope, masterID, rev string) *topology.MemberState {
	for i := range s.redis.Members {
		m := &s.redis.Members[i]
		self := m.Self()
		if self == nil || !self.Replica || self.MasterID != masterID {
			continue
		}
		if pod := podNamed(s, m.Pod); pod != nil && podRevision(pod) == rev && s.replication[m.Pod].InSync() {
			return m
		}
	}
	return nil
}

// persistentData reports whether a pod's /data outlives the pod wherever it is scheduled
// next. hostPath does not: it is a directory of one Kubernetes node, and the pods of a
// StatefulSet (one template) cannot be pinned each to its own node, so a recreated pod may
// start on another node with an empty (or stale) directory.
func persistentData(rc *redisv1alpha1.RedisCluster) bool {
	switch rc.Spec.PodTemplate().Volumes.Type {
	case redisv1alpha1.VolumeTypeNFS, redisv1alpha1.VolumeTypeVolumeClaimTemplate:
		return true
	}
	return false
}

// updateRevision is the StatefulSet's update revision once its controller has seen the
// current spec; false before (and always in envtest, which runs no StatefulSet controller).
func updateRevision(s *scope) (string, bool) {
	sts := s.statefulSet
	if sts == nil || sts.Status.ObservedGeneration < sts.Generation || sts.Status.UpdateRevision == "" {
		return "", false
	}
	return sts.Status.UpdateRevision, true
}

// allPodsUpdated reports whether every desired pod exists and runs the update revision.
// Under OnDelete the StatefulSet controller never moves currentRevision to the update
// revision by itself, so the pods' controller-revision-hash labels are what count.
func allPodsUpdated(s *scope) bool {
	rev, ok := updateRevision(s)
	if !ok || len(s.pods) < s.desiredReplicas() {
		return false
	}
	for _, p := range s.pods[:s.desiredReplicas()] {
		if p == nil || p.DeletionTimestamp != nil || podRevision(p) != rev {
			return false
		}
	}
	return true
}

// podsOutdated reports whether a formed cluster has a pod on an older revision than the
// StatefulSet's: a template applied whose rollout is not finished (an upgrade that
// failed part-way, say) still needs Upgrading, although the template itself is current.
func podsOutdated(s *scope) bool {
	rev, ok := updateRevision(s)
	if !ok || !formedOnce(&s.cluster.Status) {
		return false
	}
	for _, p := range s.pods {
		if p != nil && p.DeletionTimestamp == nil && podRevision(p) != rev {
			return true
		}
	}
	return false
}

// replicationInSync is true unless INFO replication, read in Upgrading, shows a replica
// whose link to its master is down or still syncing.
func replicationInSync(s *scope) bool {
	for _, r := range s.replication {
		if !r.InSync() {
			return false
		}
	}
	return true
}

func podRevision(p *corev1.Pod) string {
	return p.Labels[appsv1.ControllerRevisionHashLabelKey]
}

func podNamed(s *scope, name string) *corev1.Pod {
	for _, p := range s.pods {
		if p != nil && p.Name == name {
			return p
		}
	}
	return nil
}
