package controller

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Cluster-level conditions, kept in status.clusterConditions so the seed's per-instance
// status.conditions keep their shape.
const (
	// ConditionReady is True while the cluster is Running and every node says cluster_state ok.
	ConditionReady = "Ready"
	// ConditionProgressing is True during Creating, Scaling and Upgrading. Its
	// lastTransitionTime is when the current phase began (the operator's timeouts count
	// from it) and its observedGeneration the generation the phase began at.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True while the cluster serves (Running, cluster_state ok) but a
	// master holding slots has no replica although spec.replicasPerMaster asks for some:
	// one more failure there loses its slots. False otherwise.
	ConditionDegraded = "Degraded"
	// ConditionFormed turns True the first time the cluster reaches Running and stays so.
	// Bootstrap only runs while it is not True: a formed cluster that loses slots is
	// healed or reported, never silently "created" again.
	ConditionFormed = "Formed"
	// ConditionPasswordSet is True when the instances require a password (reason
	// Generated or FromSecret), False when they have none (reason Disabled, or
	// FormedWithoutPassword for a cluster an older operator formed without one).
	ConditionPasswordSet = "PasswordSet"
)

// Per-instance condition reasons (status.conditions[].reason).
const (
	InstanceReady       = "Ready"
	InstancePodNotReady = "PodNotReady"
	InstanceUnreachable = "Unreachable"
	InstanceNotJoined   = "NotJoined"
	InstanceFailing     = "Failing"
)

// writeStatus computes the status from the scope and patches it when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope, reconcileErr error) error {
	if s.released || s.decision.Phase == "" {
		// Released: the CR is going. No decision: observing failed, and a status computed
		// from half an observation would be wrong; the error is retried instead.
		return nil
	}
	status := computeStatus(s, reconcileErr == nil)
	r.memory(s.cluster).progress = status.Progress
	if reflect.DeepEqual(status, s.original) {
		return nil
	}
	base := s.cluster.DeepCopy()
	base.Status = s.original
	s.cluster.Status = status
	// The optimistic lock makes a reconcile that read a stale CR from the cache fail here
	// instead of writing (and announcing) a phase change that was already made.
	if err := r.Client.Status().Patch(ctx, s.cluster, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to patch status of RedisCluster %s: %w", s.cluster.Name, err)
	}
	if d := s.decision; d.Changed() {
		kind, reason := corev1.EventTypeNormal, ReasonPhaseChanged
		if d.Phase == fsm.Failed {
			// A failure is trouble the user must see (kubectl get events --field-selector type=Warning).
			kind, reason = corev1.EventTypeWarning, ReasonFailed
		}
		r.Recorder.Eventf(s.cluster, kind, reason, "%s -> %s: %s", d.From, d.Phase, d.Message)
		log.FromContext(ctx).Info("Phase changed", "from", d.From, "to", d.Phase, "reason", d.Reason)
	}
	return nil
}

// computeStatus is a pure function of what was observed and decided.
func computeStatus(s *scope, succeeded bool) redisv1alpha1.RedisClusterStatus {
	rc := s.cluster
	st := *s.original.DeepCopy()
	phase := s.decision.Phase
	if phase == "" {
		phase = fsm.Phase(st.Phase)
	}
	st.Phase = redisv1alpha1.RedisClusterPhase(phase)
	st.Reason = reasonText(s)
	st.Replicas = int32(s.readyPods())
	st.Selector = redisv1alpha1.SelectorString(rc.Name)
	if s.redis != nil {
		st.Masters = int32(s.redis.Masters())
	}
	st.Conditions = instanceConditions(s)
	if s.held > 0 && s.statefulSet != nil {
		// Only once a StatefulSet exists: before, there is no size to hold yet.
		st.StatefulSetReplicas = s.held
	}
	if succeeded && !rc.Spec.Pause && s.specErr == nil {
		// Only a spec the operator acted on counts as observed.
		st.ObservedGeneration = rc.Generation
	}
	if s.conf.status != nil {
		st.LiveConfig = s.conf.status
	}
	// Kept when the password cannot be read now (a Secret missing): status.auth is the
	// memory that the cluster has a password (formedWithoutPassword). Recorded only once
	// NAME-auth holds it: a password generated in a reconcile that was refused before it
	// wrote NAME-auth was never stored nor given to a pod, and must not read as one lost.
	switch {
	case s.noPassword != "":
		st.Auth = nil
	case s.auth != nil && s.auth.active != "" && s.auth.exists:
		st.Auth = authStatus(s)
	}
	st.TLS = nil
	if rc.Spec.TLS != nil {
		st.TLS = s.tlsApplied
	}
	if s.restore != nil {
		st.Restore = s.restore
	}
	setClusterConditions(&st, s)
	st.Progress = progressOf(s)
	return st
}

// reasonText explains the phase in words: the machine's reason, then what the acting step
// said (pods ready, bootstrap step, why the spec cannot be applied).
func reasonText(s *scope) string {
	msg := s.decision.Message
	if s.decision.Reason != "" {
		msg = s.decision.Reason + ": " + msg
	}
	if s.decision.Phase == fsm.Failed && !s.decision.Changed() {
		// The failure's cause was said when the phase changed; keep saying it.
		if c := meta.FindStatusCondition(s.original.ClusterConditions, ConditionProgressing); c != nil {
			msg = c.Message + ". " + msg
		}
	}
	if s.reason != "" {
		msg += ". " + s.reason
	}
	for _, n := range s.notices {
		msg += ". " + n
	}
	if s.redisErr != nil {
		msg += ". Redis: " + s.redisErr.Error()
	}
	return msg
}

func setClusterConditions(st *redisv1alpha1.RedisClusterStatus, s *scope) {
	phase := fsm.Phase(st.Phase)
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: string(phase), ObservedGeneration: s.cluster.Generation,
		Message: "the cluster is not Running"}
	if phase == fsm.Running && s.redis != nil && s.redis.ClusterOK() {
		ready.Status, ready.Message = metav1.ConditionTrue, "cluster_state is ok on every node"
	}
	meta.SetStatusCondition(&st.ClusterConditions, ready)
	meta.SetStatusCondition(&st.ClusterConditions, degraded(phase, s))
	setConfigured(st, s)
	setPasswordSet(st, s)
	if phase == fsm.Running && !formedOnce(st) {
		meta.SetStatusCondition(&st.ClusterConditions, metav1.Condition{Type: ConditionFormed, Status: metav1.ConditionTrue,
			Reason: "Bootstrapped", Message: "the Redis cluster was formed", ObservedGeneration: s.cluster.Generation})
	}

	progressing := metav1.Condition{Type: ConditionProgressing, Status: metav1.ConditionFalse, Reason: string(phase),
		Message: fmt.Sprintf("phase %s", phase)}
	switch phase {
	case fsm.Creating, fsm.Scaling, fsm.Upgrading:
		progressing.Status = metav1.ConditionTrue
	}
	old := meta.FindStatusCondition(st.ClusterConditions, ConditionProgressing)
	if old == nil || old.Reason != progressing.Reason {
		if s.decision.Changed() {
			progressing.Message = s.decision.Message
		}
		// A new phase: restart its clock and remember the generation it began at.
		progressing.LastTransitionTime = metav1.NewTime(s.now)
		progressing.ObservedGeneration = s.cluster.Generation
		meta.RemoveStatusCondition(&st.ClusterConditions, ConditionProgressing)
		st.ClusterConditions = append(st.ClusterConditions, progressing)
		return
	}
	progressing.LastTransitionTime, progressing.ObservedGeneration = old.LastTransitionTime, old.ObservedGeneration
	progressing.Message = old.Message
	*old = progressing
}

// degraded is the Degraded condition: True when the cluster serves with a shard that has
// no replica.
func degraded(phase fsm.Phase, s *scope) metav1.Condition {
	c := metav1.Condition{Type: ConditionDegraded, Status: metav1.ConditionFalse, Reason: "Replicated", ObservedGeneration: s.cluster.Generation,
		Message: "every master has a replica, or the spec asks for none"}
	switch {
	case phase != fsm.Running || !serving(s.redis):
		c.Reason, c.Message = "NotServing", "the cluster is not Running with cluster_state ok"
	case s.cluster.Spec.ReplicasPerMasterOrDefault() > 0:
		if lone := s.redis.MastersWithoutReplica(); len(lone) > 0 {
			c.Status, c.Reason = metav1.ConditionTrue, "ReplicaMissing"
			c.Message = fmt.Sprintf("master %s has no replica: one more failure there loses its slots", strings.Join(lone, ", "))
		}
	}
	return c
}

// serving reports whether every member that answers says cluster_state ok: a replica pod
// down does not stop the cluster serving.
func serving(st *topology.ClusterState) bool {
	if st == nil {
		return false
	}
	answered := 0
	for i := range st.Members {
		if m := &st.Members[i]; m.Reachable() {
			if !m.Info.OK() {
				return false
			}
			answered++
		}
	}
	return answered > 0
}

// instanceConditions lists one entry per pod, in ordinal order, with the seed's fields.
func instanceConditions(s *scope) []redisv1alpha1.RedisClusterCondition {
	facts := map[string]topology.MemberFacts{}
	if s.redis != nil {
		for _, f := range s.redis.Facts() {
			facts[f.Pod] = f
		}
	}
	previous := map[string]redisv1alpha1.RedisClusterCondition{}
	for _, c := range s.original.Conditions {
		previous[c.Name] = c
	}
	var out []redisv1alpha1.RedisClusterCondition
	for _, p := range s.pods {
		if p == nil {
			continue
		}
		c := redisv1alpha1.RedisClusterCondition{
			Name:       p.Name,
			DomainName: podDomainName(p.Name, s.cluster.Name, p.Namespace),
			Hostname:   p.Spec.NodeName,
			HostIP:     p.Status.HostIP,
		}
		c.ExternalAddress = externalAddress(s, p.Name)
		if p.Status.PodIP != "" {
			c.Instance = fmt.Sprintf("%s:%d", p.Status.PodIP, clientPort(p))
		}
		f, known := facts[p.Name]
		if known {
			c.NodeID, c.Type, c.Slots = f.NodeID, f.Role, f.Slots.String()
			c.MasterNodeID = f.MasterNodeID
			if f.Role == topology.RoleMaster {
				c.MasterNodeID = f.NodeID
			}
		}
		if known {
			c.Server = f.Server
		}
		c.Status, c.Reason, c.Message = instanceHealth(p, f, known)
		c.LastTransitionTime = metav1.NewTime(s.now)
		if prev, ok := previous[p.Name]; ok && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		if prev, ok := previous[p.Name]; ok && c.Server == "" && c.Instance != "" && prev.Instance == c.Instance {
			c.Server = prev.Server // the same process, most likely: it did not answer this time
		}
		out = append(out, c)
	}
	return out
}

func instanceHealth(p *corev1.Pod, f topology.MemberFacts, known bool) (corev1.ConditionStatus, string, string) {
	switch {
	case !podReady(p):
		return corev1.ConditionFalse, InstancePodNotReady, fmt.Sprintf("pod %s is %s and not Ready", p.Name, p.Status.Phase)
	case !known || !f.Reachable:
		return corev1.ConditionFalse, InstanceUnreachable, "Redis did not answer: " + f.Error
	case f.Failed:
		return corev1.ConditionFalse, InstanceFailing, "another node flags this node as failing"
	case !f.Connected:
		return corev1.ConditionFalse, InstanceNotJoined, "not every node is connected to this node yet"
	default:
		return corev1.ConditionTrue, InstanceReady, fmt.Sprintf("%s serving", f.Role)
	}
}

// formedOnce reports whether the cluster has been formed before.
func formedOnce(st *redisv1alpha1.RedisClusterStatus) bool {
	return meta.IsStatusConditionTrue(st.ClusterConditions, ConditionFormed)
}

// setPasswordSet is the PasswordSet condition: whether the instances require a password,
// and where it comes from. Unchanged while the spec is refused before it was decided.
func setPasswordSet(st *redisv1alpha1.RedisClusterStatus, s *scope) {
	c := metav1.Condition{Type: ConditionPasswordSet, ObservedGeneration: s.cluster.Generation}
	switch {
	case s.noPassword == noPasswordLegacy:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, noPasswordLegacy, legacyNoPasswordNotice
	case s.noPassword == noPasswordDisabled:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, noPasswordDisabled, "spec.disablePassword: every client that reaches port 6379 may do anything"
	case s.auth != nil && s.cluster.Spec.PasswordSecret != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "FromSecret", "the instances require the password of spec.passwordSecret"
	case s.auth != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "Generated", "the instances require the password the operator generated: Secret NAME-auth, key password"
	default:
		return
	}
	meta.SetStatusCondition(&st.ClusterConditions, c)
}
