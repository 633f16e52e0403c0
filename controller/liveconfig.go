package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Live configuration (docs/configuration.md). redis.conf is the ConfigMap NAME-config; its
// live directives (topology.LiveDirectives) are left out of the pod template's config hash,
// so changing them rolls no pod: the operator gives every node the new values with
// CONFIG SET. The ConfigMap holds them too, so a pod that starts later reads them; there
// is no CONFIG REWRITE, because redis.conf is a ConfigMap volume the kubelet mounts
// read-only and rewrites itself. Any other change changes the hash and rolls the pods
// through Upgrading.

// ConditionConfigured says which path the last redis.conf change took and whether every
// node runs it.
const ConditionConfigured = "Configured"

// Reasons of the Configured condition.
const (
	// ConfiguredLive: the live directives were set with CONFIG SET on every node.
	ConfiguredLive = "AppliedLive"
	// ConfiguredApplied: every node runs redis.conf as rendered (no change to report).
	ConfiguredApplied = "Applied"
	// ConfiguredRestartRequired: a directive CONFIG SET cannot apply changed; the pods roll.
	ConfiguredRestartRequired = "RestartRequired"
	// ConfiguredRestarted: the roll a restart-only change asked for is done.
	ConfiguredRestarted = "Restarted"
	// ConfiguredRefused: Redis refused a setting; nothing was changed.
	ConfiguredRefused = ReasonConfigRefused
)

// liveConf is what one reconcile knows and did about redis.conf.
type liveConf struct {
	// want are the live directives the rendered redis.conf sets; nil when it renders
	// none or the spec is refused (observeLiveConfig).
	want map[string]string
	// change names the directives that differ between the applied ConfigMap and the
	// rendered one; empty when they are the same (observeLiveConfig).
	change topology.ConfChange
	// status is what to record in status.liveConfig; nil keeps what is there (act).
	status *redisv1alpha1.LiveConfigStatus
	// condition is the Configured condition to set; nil keeps what is there (act).
	condition *metav1.Condition
}

// observeLiveConfig reads what the rendered redis.conf changes: the live directives it
// sets and the directives that differ from the applied ConfigMap. It sends nothing to
// Redis; the trial of a change is act's (tryLiveConfig).
func (r *Reconciler) observeLiveConfig(s *scope) {
	conf, ok := renderedConf(s)
	if !ok || s.specErr != nil {
		return
	}
	s.conf.want = liveSettings(s.cluster, conf)
	if cm, ok := s.live["ConfigMap/"+configMapName(s.cluster.Name)].(*corev1.ConfigMap); ok {
		s.conf.change = topology.DiffConf(cm.Data["redis.conf"], conf)
	}
}

// tryLiveConfig tries a change of the live directives on one node (setting everything
// back at once), first thing in act, so a value Redis refuses refuses the spec before
// anything is applied: no ConfigMap a restarted pod would fail on, no node half-changed.
// It reports whether Redis refused (s.specErr then says so): the reconcile decides again
// with the spec refused, as if the refusal had been observed.
func (r *Reconciler) tryLiveConfig(ctx context.Context, s *scope) bool {
	if s.conf.want == nil || s.specErr != nil || s.cluster.Spec.Pause || !formedOnce(&s.cluster.Status) || maps.Equal(appliedLive(s), s.conf.want) {
		return false
	}
	addr, ok := firstReachable(s)
	if !ok {
		return false
	}
	err := redis.TryLive(ctx, r.factoryFor(s), addr, topology.LiveCommands(appliedLive(s), s.conf.want))
	refused := (*redis.ConfigRefusedError)(nil)
	if !errors.As(err, &refused) {
		return false
	}
	s.specErr = &refusal{reason: ReasonConfigRefused, err: fmt.Errorf(
		"%s: %v; nothing was changed, on any node or in ConfigMap %s", confSource(s), err, configMapName(s.cluster.Name))}
	return true
}

// reconcileLiveConfig gives the live directives to the nodes that lack them: every
// reachable node when redis.conf's live settings changed, otherwise only pods started or
// replaced since they were last given (status.liveConfig.nodes), so an unchanged cluster
// costs no Redis command. Only a formed cluster: pods that start read the ConfigMap.
func (r *Reconciler) reconcileLiveConfig(ctx context.Context, s *scope) error {
	if s.redis == nil || !formedOnce(&s.cluster.Status) || s.conf.want == nil {
		return nil
	}
	applied := appliedLive(s)
	changed := !maps.Equal(applied, s.conf.want)
	var had []string
	if !changed && s.original.LiveConfig != nil {
		had = s.original.LiveConfig.Nodes
	}
	targets, nodes := liveTargets(s, had)
	cmds := topology.LiveCommands(applied, s.conf.want)
	if len(targets) > 0 && len(cmds) > 0 {
		if err := redis.ApplyLive(ctx, r.factoryFor(s), targets, cmds); err != nil {
			return r.liveRefused(s, err)
		}
	}
	s.conf.status = &redisv1alpha1.LiveConfigStatus{Nodes: nodes}
	if len(s.conf.want) > 0 { // nil, not empty: the status read back has no empty map
		s.conf.status.Settings = s.conf.want
	}
	old := meta.FindStatusCondition(s.original.ClusterConditions, ConditionConfigured)
	switch {
	case changed && s.original.LiveConfig != nil && len(cmds) > 0:
		msg := fmt.Sprintf("CONFIG SET %s on every node; no restart", settingsText(cmds))
		r.Recorder.Event(s.cluster, corev1.EventTypeNormal, ReasonConfigApplied, msg)
		if s.conf.condition == nil { // a restart asked for in the same edit says more
			s.conf.condition = configured(s, metav1.ConditionTrue, ConfiguredLive, msg)
		}
	case s.conf.condition != nil:
	case old == nil || old.Reason == ConfiguredRefused:
		// A new cluster, or a refused value set back to what the nodes have.
		s.conf.condition = configured(s, metav1.ConditionTrue, ConfiguredApplied, "every node runs redis.conf as rendered")
	}
	return nil
}

// liveRefused reports a setting a node refused although the trial node took it (nodes of
// different versions): ApplyLive set everything back. Another error is returned.
func (r *Reconciler) liveRefused(s *scope, err error) error {
	refused := (*redis.ConfigRefusedError)(nil)
	if !errors.As(err, &refused) {
		return fmt.Errorf("failed to apply redis.conf's live settings: %w", err)
	}
	msg := fmt.Sprintf("%s: %v on %s; every node was set back", confSource(s), err, refused.Addr)
	r.warnOnce(s, ReasonConfigRefused, msg)
	s.conf.condition = configured(s, metav1.ConditionFalse, ConfiguredRefused, msg)
	return nil
}

// announceConfChange says, when the rendered redis.conf differs from the applied one,
// which path each changed directive takes and why.
func (r *Reconciler) announceConfChange(s *scope) {
	c := s.conf.change
	if len(c.Restart) == 0 || !formedOnce(&s.cluster.Status) {
		return
	}
	msg := fmt.Sprintf("redis.conf: %s changed, which CONFIG SET cannot apply: the pods restart one at a time (Upgrading)", strings.Join(c.Restart, ", "))
	if len(c.Live) > 0 {
		msg += fmt.Sprintf("; %s applied live", strings.Join(c.Live, ", "))
	}
	r.Recorder.Event(s.cluster, corev1.EventTypeNormal, ReasonConfigRestart, msg)
	s.conf.condition = configured(s, metav1.ConditionFalse, ConfiguredRestartRequired, msg)
}

// setConfigured sets the Configured condition: what act decided, else Restarted once the
// roll a restart-only change started is over.
func setConfigured(st *redisv1alpha1.RedisClusterStatus, s *scope) {
	if c := s.conf.condition; c != nil {
		meta.SetStatusCondition(&st.ClusterConditions, *c)
		return
	}
	if s.specErr != nil && refusalReason(s.specErr) == ReasonConfigRefused {
		meta.SetStatusCondition(&st.ClusterConditions, *configured(s, metav1.ConditionFalse, ConfiguredRefused, s.specErr.Error()))
		return
	}
	old := meta.FindStatusCondition(st.ClusterConditions, ConditionConfigured)
	if old != nil && old.Reason == ConfiguredRestartRequired && st.Phase == redisv1alpha1.PhaseRunning && !restartPending(s) {
		meta.SetStatusCondition(&st.ClusterConditions, *configured(s, metav1.ConditionTrue, ConfiguredRestarted,
			"every pod restarted with the new redis.conf"))
	}
}

// restartPending reports whether pods still run an older pod template.
func restartPending(s *scope) bool {
	return s.templateChanged || podsOutdated(s)
}

func configured(s *scope, status metav1.ConditionStatus, reason, msg string) *metav1.Condition {
	return &metav1.Condition{Type: ConditionConfigured, Status: status, Reason: reason, Message: msg, ObservedGeneration: s.cluster.Generation}
}

// renderedConf is the redis.conf of the rendered ConfigMap.
func renderedConf(s *scope) (string, bool) {
	for _, o := range s.rendered {
		if o.GetKind() == "ConfigMap" && o.GetName() == configMapName(s.cluster.Name) {
			conf, ok, _ := unstructured.NestedString(o.Object, "data", "redis.conf")
			return conf, ok
		}
	}
	return "", false
}

// liveSettings are redis.conf's live directives, but maxmemory when the pods' env sets
// MAXMEMORY: its --maxmemory argument wins over redis.conf at every start.
func liveSettings(rc *redisv1alpha1.RedisCluster, conf string) map[string]string {
	want := topology.LiveSettings(conf)
	for _, e := range rc.Spec.PodTemplate().Env {
		if e.Name == "MAXMEMORY" {
			delete(want, "maxmemory")
		}
	}
	return want
}

// appliedLive are the live settings last given to every node (status.liveConfig).
func appliedLive(s *scope) map[string]string {
	if lc := s.original.LiveConfig; lc != nil && lc.Settings != nil {
		return lc.Settings
	}
	return map[string]string{}
}

// liveTargets are the addresses of the reachable members whose pod is not in had, and
// the pods that have the settings once those are set: the reachable ones.
func liveTargets(s *scope, had []string) (targets, nodes []string) {
	for i := range s.redis.Members {
		m := &s.redis.Members[i]
		if !m.Reachable() {
			continue
		}
		id := podIdentity(s, m.Pod)
		if !slices.Contains(had, id) {
			targets = append(targets, m.Addr)
		}
		nodes = append(nodes, id)
	}
	return targets, nodes
}

// podIdentity is POD/UID/RESTARTS: it changes when the pod is replaced or its redis
// container restarts, the two ways a node comes back with redis.conf read afresh.
func podIdentity(s *scope, pod string) string {
	for _, p := range s.pods {
		if p == nil || p.Name != pod {
			continue
		}
		restarts := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == "redis" {
				restarts = c.RestartCount
			}
		}
		uid := string(p.UID)
		return fmt.Sprintf("%s/%s/%d", pod, uid[:min(8, len(uid))], restarts)
	}
	return pod
}

func firstReachable(s *scope) (string, bool) {
	if s.redis == nil {
		return "", false
	}
	for i := range s.redis.Members {
		if s.redis.Members[i].Reachable() {
			return s.redis.Members[i].Addr, true
		}
	}
	return "", false
}

// confSource names where redis.conf's live settings come from, for a refusal.
func confSource(s *scope) string {
	if name := s.cluster.Spec.PodTemplate().ConfigMap; name != "" {
		return fmt.Sprintf("spec.pod[0].configmap (ConfigMap %s, key redis.conf)", name)
	}
	return "redis.conf"
}

func settingsText(cmds []redis.Setting) string {
	parts := make([]string, len(cmds))
	for i, c := range cmds {
		parts[i] = fmt.Sprintf("%s %q", c.Name, c.Value)
	}
	return strings.Join(parts, ", ")
}

// nodeTimeout is the cluster-node-timeout in force: the shorter of what the applied
// ConfigMap and the rendered one give (while pods roll from one to the other, some run
// each), the template's default when neither says. MIGRATE's timeout is half of it.
func nodeTimeout(s *scope) time.Duration {
	d := time.Duration(0)
	take := func(conf string) {
		if v, ok := topology.ConfNodeTimeout(conf); ok && (d == 0 || v < d) {
			d = v
		}
	}
	if conf, ok := renderedConf(s); ok {
		take(conf)
	}
	if cm, ok := s.live["ConfigMap/"+configMapName(s.cluster.Name)].(*corev1.ConfigMap); ok {
		take(cm.Data["redis.conf"])
	}
	if d == 0 {
		return redis.NodeTimeout
	}
	return d
}
