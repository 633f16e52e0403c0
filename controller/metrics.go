package controller

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// The operator's own metrics, served with controller-runtime's on the manager's metrics
// endpoint. Every name starts with redis_operator_, so none clashes with redis_exporter's
// redis_*. docs/metrics.md is the table of them; config/prometheus/ alerts on them, and
// TestAlertsNameRealMetrics and TestDashboardNamesRealMetrics (config/prometheus) check every
// name used there against Collectors.

// clusterLabels are the labels of every per-cluster series: the RedisCluster's namespace and name.
var clusterLabels = []string{"namespace", "name"}

var (
	clusterPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "redis_operator_cluster_phase",
		Help: "1 for the RedisCluster's current phase, 0 for the others.",
	}, append(clusterLabels, "phase"))
	clusterMasters = clusterGauge("redis_operator_cluster_masters",
		"Masters holding slots, as the Redis nodes say.")
	clusterReplicasDesired = clusterGauge("redis_operator_cluster_replicas_desired",
		"Replicas the spec asks for: masters times spec.replicasPerMaster.")
	clusterReplicasReady = clusterGauge("redis_operator_cluster_replicas_ready",
		"Replicas following a master that holds slots, connected to every node and flagged failing by none.")
	clusterSlotsCovered = clusterGauge("redis_operator_cluster_slots_covered",
		"Slots (of 16384) that a reachable master claims.")
	clusterOpenSlots = clusterGauge("redis_operator_cluster_open_slots",
		"Slots some node has migrating or importing.")
	clusterMastersWithoutReplica = clusterGauge("redis_operator_cluster_masters_without_replica",
		"Masters holding slots that no replica follows.")
	migrationSlots = clusterCounter("redis_operator_migration_slots_moved_total",
		"Slots the operator moved between masters while resizing.")
	migrationKeys = clusterCounter("redis_operator_migration_keys_moved_total",
		"Keys the operator moved between masters while resizing.")
	migrationRate = clusterGauge("redis_operator_migration_keys_per_second",
		"Keys per second of the last migration step; 0 outside Scaling.")
	failovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redis_operator_failovers_total",
		Help: "Failovers the operator sent, by kind: force and takeover (a lost master's replica promoted), manual (CLUSTER FAILOVER before an upgrade restarts a master).",
	}, append(clusterLabels, "kind"))
	healActions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redis_operator_heal_actions_total",
		Help: "Redis writes made by healing, by kind (Meet, Replicate, Forget, Failover, FixSlot).",
	}, append(clusterLabels, "kind"))
	refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redis_operator_refusals_total",
		Help: "Warnings about something the operator would not or could not do (a refused spec, a change Redis refused), by event reason; each counted once, when its Warning event is emitted.",
	}, append(clusterLabels, "reason"))
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redis_operator_reconcile_errors_total",
		Help: "Reconciles that ended in an error, by the step that failed (finalizer, observe, decide, act, status).",
	}, append(clusterLabels, "reason"))
	backupLastSuccess = clusterGauge("redis_operator_backup_last_success_timestamp_seconds",
		"When the newest Succeeded RedisClusterBackup of the cluster completed (Unix seconds); rebuilt from the backups' status at start.")
	backupLastDuration = clusterGauge("redis_operator_backup_last_duration_seconds",
		"How long the newest Succeeded backup of the cluster took, from its cut to its manifest.")
	backupLastSize = clusterGauge("redis_operator_backup_last_size_bytes",
		"Bytes of the newest Succeeded backup of the cluster (its shards' objects).")
	backupsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redis_operator_backups_total",
		Help: "Backups of the cluster that ended in this operator process, by result (succeeded, failed).",
	}, append(clusterLabels, "result"))
	backupScheduleInterval = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "redis_operator_backup_schedule_interval_seconds",
		Help: "spec.every of each RedisClusterBackupSchedule of the cluster, by schedule: the alert RedisClusterBackupsNotSucceeding compares the last success with it.",
	}, append(clusterLabels, "schedule"))
)

func clusterGauge(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, clusterLabels)
}

func clusterCounter(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, clusterLabels)
}

// clusterGauges are the gauges set from each reconcile's observation.
var clusterGauges = []*prometheus.GaugeVec{clusterMasters, clusterReplicasReady, clusterSlotsCovered, clusterOpenSlots, clusterMastersWithoutReplica}

// Collectors are every metric the operator registers besides controller-runtime's.
func Collectors() []prometheus.Collector {
	out := []prometheus.Collector{clusterPhase, clusterReplicasDesired, migrationSlots, migrationKeys, migrationRate, failovers, healActions, refusals, reconcileErrors,
		backupLastSuccess, backupLastDuration, backupLastSize, backupsEnded, backupScheduleInterval}
	for _, g := range clusterGauges {
		out = append(out, g)
	}
	return out
}

func init() {
	ctrlmetrics.Registry.MustRegister(Collectors()...)
}

// phases are the values of redis_operator_cluster_phase's phase label.
var phases = []fsm.Phase{fsm.None, fsm.Creating, fsm.Running, fsm.Scaling, fsm.Upgrading, fsm.Failed, fsm.Deleting}

func clusterValues(rc client.Object) []string { return []string{rc.GetNamespace(), rc.GetName()} }

// observeMetrics sets the per-cluster gauges from what the reconcile observed and decided.
// A cluster with no member reachable reports 0 masters, slots and replicas.
func observeMetrics(s *scope) {
	phase := s.decision.Phase
	if phase == "" || s.released {
		return
	}
	ns, name := s.cluster.Namespace, s.cluster.Name
	for _, p := range phases {
		v := 0.0
		if p == phase {
			v = 1
		}
		clusterPhase.WithLabelValues(ns, name, string(p)).Set(v)
	}
	values := []int{0, 0, 0, 0, 0}
	if st := s.redis; st != nil {
		values = []int{st.Masters(), st.ReadyReplicas(), st.SlotsCovered(), st.OpenSlots(), len(st.MastersWithoutReplica())}
	}
	for i, g := range clusterGauges {
		g.WithLabelValues(ns, name).Set(float64(values[i]))
	}
	spec := s.cluster.Spec
	clusterReplicasDesired.WithLabelValues(ns, name).Set(float64(spec.Masters() * spec.ReplicasPerMasterOrDefault()))
	if phase != fsm.Scaling {
		migrationRate.WithLabelValues(ns, name).Set(0)
	}
}

// forgetMetrics removes every series of a RedisCluster that is gone.
func forgetMetrics(key client.ObjectKey) {
	match := prometheus.Labels{"namespace": key.Namespace, "name": key.Name}
	for _, c := range Collectors() {
		switch v := c.(type) {
		case *prometheus.GaugeVec:
			v.DeletePartialMatch(match)
		case *prometheus.CounterVec:
			v.DeletePartialMatch(match)
		}
	}
}

// countMigrated adds one migration step's moves and sets the rate from its duration.
func countMigrated(rc *redisv1alpha1.RedisCluster, slots, keys int, took time.Duration) {
	if slots == 0 && keys == 0 {
		return
	}
	migrationSlots.WithLabelValues(clusterValues(rc)...).Add(float64(slots))
	migrationKeys.WithLabelValues(clusterValues(rc)...).Add(float64(keys))
	if took > 0 {
		migrationRate.WithLabelValues(clusterValues(rc)...).Set(float64(keys) / took.Seconds())
	}
}

// countHealed counts healing's writes by kind, and the replicas it promoted as failovers.
func countHealed(rc *redisv1alpha1.RedisCluster, acts []topology.Action) {
	for _, a := range acts {
		if a.Refresh {
			continue // a re-announcing MEET: no change
		}
		healActions.WithLabelValues(rc.Namespace, rc.Name, string(a.Kind)).Inc()
		if a.Kind == topology.ActionFailover {
			countFailover(rc, strings.ToLower(a.Mode))
		}
	}
}

// Kinds of redis_operator_failovers_total.
const failoverManual = "manual"

// countFailover counts one failover the operator sent.
func countFailover(rc *redisv1alpha1.RedisCluster, kind string) {
	failovers.WithLabelValues(rc.Namespace, rc.Name, kind).Inc()
}

// countRefusal counts one Warning about something the operator would not or could not do.
func countRefusal(rc *redisv1alpha1.RedisCluster, reason string) {
	refusals.WithLabelValues(rc.Namespace, rc.Name, reason).Inc()
}

// countReconcileError counts a reconcile that failed at step.
func countReconcileError(rc *redisv1alpha1.RedisCluster, step string) {
	reconcileErrors.WithLabelValues(rc.Namespace, rc.Name, step).Inc()
}

// lastBackups is, per cluster, the completion time of the newest Succeeded backup the
// backup gauges show.
var lastBackups sync.Map // client.ObjectKey -> time.Time

// observeBackupSucceeded sets the cluster's backup gauges from a Succeeded backup when it
// is the newest seen: at its end, and for every Succeeded backup the operator finds at
// start, so a restart does not lose the last success.
func observeBackupSucceeded(b *redisv1alpha1.RedisClusterBackup) {
	st := b.Status
	if st.Phase != redisv1alpha1.BackupSucceeded || st.CompletedAt == nil {
		return
	}
	key := client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}
	done := st.CompletedAt.Time
	if prev, ok := lastBackups.Load(key); ok && !prev.(time.Time).Before(done) {
		return
	}
	lastBackups.Store(key, done)
	var size int64
	for _, sh := range st.Shards {
		size += sh.Size
	}
	backupLastSuccess.WithLabelValues(key.Namespace, key.Name).Set(float64(done.Unix()))
	backupLastSize.WithLabelValues(key.Namespace, key.Name).Set(float64(size))
	if st.CutStartedAt != nil {
		backupLastDuration.WithLabelValues(key.Namespace, key.Name).Set(done.Sub(st.CutStartedAt.Time).Seconds())
	}
}

// countBackupEnded counts a backup that ended in this process.
func countBackupEnded(b *redisv1alpha1.RedisClusterBackup, result string) {
	backupsEnded.WithLabelValues(b.Namespace, b.Spec.ClusterName, result).Inc()
}
