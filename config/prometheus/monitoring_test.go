// Package prometheus_test checks the opt-in monitoring of config/prometheus: every alert
// expression and every dashboard query parses as PromQL and names only metrics the
// operator registers (controller.Collectors, read through Describe) or redis_exporter
// exposes (testdata/redis_exporter_metrics.txt, pinned from its source); docs/metrics.md
// lists every operator metric; and the kustomize component renders monitors that select
// what the operator renders (the metrics Service, the Redis pods' exporter port).
package prometheus_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/controller"
	"github.com/hc-middleware/redis-cluster-operator/render"
)

// operatorMetrics are the names of every metric the operator registers, from Describe.
func operatorMetrics(t *testing.T) map[string]bool {
	t.Helper()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for _, c := range controller.Collectors() {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no fqName in %s", d)
			}
			names[m[1]] = true
		}
	}
	if len(names) < 10 {
		t.Fatalf("only %d operator metrics described: %v", len(names), names)
	}
	return names
}

// exporterMetrics are redis_exporter's names from the pinned list.
func exporterMetrics(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("testdata/redis_exporter_metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			names["redis_"+line] = true
		}
	}
	return names
}

// metricNames parses expr and lists the metric names its selectors use; a selector
// without a name fails the test.
func metricNames(t *testing.T, where, expr string) []string {
	t.Helper()
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				t.Errorf("%s: a selector without a metric name in %q", where, expr)
			}
			names = append(names, vs.Name)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("%s: %q names no metric", where, expr)
	}
	return names
}

// expectKnown fails for each name neither the operator nor redis_exporter exposes.
func expectKnown(t *testing.T, where string, names []string, known ...map[string]bool) {
	t.Helper()
	for _, n := range names {
		if !slices.ContainsFunc(known, func(k map[string]bool) bool { return k[n] }) {
			t.Errorf("%s: metric %q is neither the operator's nor redis_exporter's", where, n)
		}
	}
}

type ruleFile struct {
	Spec struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert  string
				Expr   string
				For    string
				Labels map[string]string
			}
		}
	}
}

func TestAlertsNameRealMetrics(t *testing.T) {
	op, exp := operatorMetrics(t), exporterMetrics(t)
	data, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(data, &struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       any            `json:"spec"`
	}{}); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rf); err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range rf.Spec.Groups {
		for _, r := range g.Rules {
			expectKnown(t, "alert "+r.Alert, metricNames(t, "alert "+r.Alert, r.Expr), op, exp)
			if r.For == "" || r.Labels["severity"] == "" {
				t.Errorf("alert %s: needs a for duration and a severity label", r.Alert)
			}
			alerts = append(alerts, r.Alert)
		}
	}
	// The alerts docs/metrics.md promises.
	for _, a := range []string{"RedisClusterNotRunning", "RedisClusterSlotsNotCovered", "RedisClusterMasterWithoutReplica",
		"RedisClusterMigrationStalled", "RedisReplicationLag", "RedisMemoryNearMaxmemory"} {
		if !slices.Contains(alerts, a) {
			t.Errorf("alert %s is missing; have %v", a, alerts)
		}
	}
}

// grafanaVariables are the dashboard's template variables, replaced by plain values so
// the queries parse as PromQL.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "${datasource}", "x", "$namespace", "x", "$name", "x")

func TestDashboardNamesRealMetrics(t *testing.T) {
	op, exp := operatorMetrics(t), exporterMetrics(t)
	data, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name       string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	queries := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			expectKnown(t, "panel "+p.Title, metricNames(t, "panel "+p.Title, grafanaVariables.Replace(q.Expr)), op, exp)
			queries++
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+), \w+\)$`)
	for _, v := range dash.Templating.List {
		if v.Definition == "" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, v.Definition)
			continue
		}
		expectKnown(t, "variable "+v.Name, metricNames(t, "variable "+v.Name, grafanaVariables.Replace(m[1])), op)
	}
	t.Logf("%d panels, %d queries", len(dash.Panels), queries)
}

// TestMetricsDocumented: docs/metrics.md has a row for every operator metric.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range operatorMetrics(t) {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !strings.Contains(string(doc), "| `"+n+"` |") {
			t.Errorf("docs/metrics.md has no table row for %s", n)
		}
	}
}

// TestComponentSelectsRenderedObjects renders config/monitored (config/default plus this
// component) with the pinned kubectl, and checks that the ServiceMonitor selects the
// operator's metrics Service by its labels and port, and that the PodMonitor selects the
// pods and the exporter port a RedisCluster with monitorImage renders.
func TestComponentSelectsRenderedObjects(t *testing.T) {
	kubectl, err := filepath.Abs("../../bin/kubectl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("bin/kubectl is missing: run 'make tools' (%v)", err)
	}
	out, err := exec.Command(kubectl, "kustomize", "../monitored").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize config/monitored: %v: %s", err, out)
	}
	objs := map[string]*unstructured.Unstructured{}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(out)), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		objs[u.GetKind()+"/"+u.GetName()] = u
	}
	svc := mustGet(t, objs, "Service/redis-operator-controller-manager-metrics")
	sm := mustGet(t, objs, "ServiceMonitor/redis-operator-controller-manager")
	pm := mustGet(t, objs, "PodMonitor/redis-operator-redis-clusters")
	mustGet(t, objs, "PrometheusRule/redis-operator-alerts")
	cm := mustGet(t, objs, "ConfigMap/redis-operator-grafana-dashboard")
	if dash, _, _ := unstructured.NestedString(cm.Object, "data", "redis-cluster.json"); !json.Valid([]byte(dash)) || dash == "" {
		t.Errorf("the dashboard ConfigMap does not hold the dashboard JSON")
	}

	expectSelects(t, "ServiceMonitor", nestedMap(sm, "spec", "selector", "matchLabels"), svc.GetLabels())
	smPort := str(t, sm, "spec", "endpoints", 0, "port")
	if !slices.Contains(portNames(t, svc.Object, "spec", "ports"), smPort) {
		t.Errorf("the ServiceMonitor scrapes port %q, the Service has %v", smPort, portNames(t, svc.Object, "spec", "ports"))
	}
	if sm.GetNamespace() != svc.GetNamespace() {
		t.Errorf("ServiceMonitor in %q, the Service in %q", sm.GetNamespace(), svc.GetNamespace())
	}

	sts := renderedStatefulSet(t)
	podLabels, _, _ := unstructured.NestedStringMap(sts.Object, "spec", "template", "metadata", "labels")
	expectSelects(t, "PodMonitor", nestedMap(pm, "spec", "selector", "matchLabels"), podLabels)
	pmPort := str(t, pm, "spec", "podMetricsEndpoints", 0, "port")
	containers, _, _ := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "containers")
	var exporterPorts []string
	for _, c := range containers {
		if c.(map[string]any)["name"] == "exporter" {
			exporterPorts = portNames(t, c.(map[string]any), "ports")
		}
	}
	if !slices.Contains(exporterPorts, pmPort) {
		t.Errorf("the PodMonitor scrapes port %q, the exporter container has %v", pmPort, exporterPorts)
	}
}

func renderedStatefulSet(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	r, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	rcs, err := render.ReadFile("../samples/redis_v1alpha1_rediscluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc := rcs[0]
	if len(rc.Spec.Pod) == 0 {
		rc.Spec.Pod = []redisv1alpha1.RedisPodTemplate{{}}
	}
	rc.Spec.Pod[0].MonitorImage = "oliver006/redis_exporter:v1.88.0"
	objs, err := r.Render(rc, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "StatefulSet" {
			return o
		}
	}
	t.Fatal("no StatefulSet rendered")
	return nil
}

func mustGet(t *testing.T, objs map[string]*unstructured.Unstructured, key string) *unstructured.Unstructured {
	t.Helper()
	o, ok := objs[key]
	if !ok {
		var have []string
		for k := range objs {
			have = append(have, k)
		}
		sort.Strings(have)
		t.Fatalf("%s not rendered; have %v", key, have)
	}
	return o
}

func nestedMap(u *unstructured.Unstructured, path ...string) map[string]string {
	m, _, _ := unstructured.NestedStringMap(u.Object, path...)
	return m
}

// str reads a string at a path of map keys and list indexes.
func str(t *testing.T, u *unstructured.Unstructured, path ...any) string {
	t.Helper()
	var cur any = u.Object
	for _, p := range path {
		switch k := p.(type) {
		case string:
			cur = cur.(map[string]any)[k]
		case int:
			cur = cur.([]any)[k]
		}
	}
	s, _ := cur.(string)
	return s
}

func portNames(t *testing.T, obj map[string]any, path ...string) []string {
	t.Helper()
	ports, _, _ := unstructured.NestedSlice(obj, path...)
	var names []string
	for _, p := range ports {
		if n, ok := p.(map[string]any)["name"].(string); ok {
			names = append(names, n)
		}
	}
	return names
}

func expectSelects(t *testing.T, what string, selector, labels map[string]string) {
	t.Helper()
	if len(selector) == 0 {
		t.Errorf("%s has an empty selector", what)
	}
	for k, v := range selector {
		if labels[k] != v {
			t.Errorf("%s selects %s=%s; the labels are %v", what, k, v, labels)
		}
	}
}
