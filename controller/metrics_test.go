package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// A cluster formed on real redis-servers reports what Redis says in its gauges, and
// forgetting it removes every series it had.
func TestMetricsOfAFormedCluster(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rc, _ := formRunning(t, h, redistest.Config{})
	h.reconcile(rc)
	ns, name := rc.Namespace, rc.Name
	want := map[string]float64{
		"redis_operator_cluster_masters":                 3,
		"redis_operator_cluster_replicas_desired":        3,
		"redis_operator_cluster_replicas_ready":          3,
		"redis_operator_cluster_slots_covered":           16384,
		"redis_operator_cluster_open_slots":              0,
		"redis_operator_cluster_masters_without_replica": 0,
		"redis_operator_migration_keys_per_second":       0,
	}
	got := seriesOf(t, ns, name)
	for metric, v := range want {
		if got[metric] != v {
			t.Errorf("%s = %v, want %v", metric, got[metric], v)
		}
	}
	if got[`redis_operator_cluster_phase{phase="Running"}`] != 1 || got[`redis_operator_cluster_phase{phase="Creating"}`] != 0 {
		t.Errorf("phase series: %v", got)
	}
	forgetMetrics(client.ObjectKeyFromObject(rc))
	if left := seriesOf(t, ns, name); len(left) > 0 {
		t.Errorf("series left after forgetting the cluster: %v", left)
	}
}

// seriesOf gathers the operator's collectors and returns the series of one cluster by
// name (with the extra label, for phase).
func seriesOf(t *testing.T, ns, name string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] != ns || labels["name"] != name {
				continue
			}
			key := f.GetName()
			if p, ok := labels["phase"]; ok {
				key += `{phase="` + p + `"}`
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[key] = v
		}
	}
	return out
}
