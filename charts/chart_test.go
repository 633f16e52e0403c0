// Package charts_test checks the Helm chart (charts/redis-cluster-operator) and the one-file
// installer (make build-installer) with the pinned helm and kubectl in bin/: helm lint, what
// helm template renders for the chart's main value combinations, the values it refuses, and
// that the chart and the installer carry exactly what config/ generates. Applying them to a
// real API server is the end-to-end suite's part (test/e2e/install_test.go).
package charts_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "redis-cluster-operator"
	release     = "rco"
	releaseNS   = "rco-system"
	fullname    = "rco-redis-cluster-operator"
	generatedCR = "../config/crd/bases/redis.middleware.hc.cn_redisclusters.yaml"
)

// tool is bin/NAME, the pinned build `make tools` installs; a missing one fails the test
// rather than skipping it, so a CI that forgot to build it cannot pass by testing nothing.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("bin/%s is missing: run 'make tools' (%v)", name, err)
	}
	return p
}

func run(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// combos are the chart's main value combinations, as --set flags.
var combos = map[string][]string{
	"defaults":                       nil,
	"namespaced RBAC, two ns":        {"--set", "rbac.scope=namespaced", "--set", "watchNamespaces={team-a,team-b}"},
	"leader election, 2 pods":        {"--set", "leaderElection.enabled=true", "--set", "replicaCount=2"},
	"no leader election, no metrics": {"--set", "leaderElection.enabled=false", "--set", "metrics.enabled=false"},
	"plain metrics":                  {"--set", "metrics.secure=false"},
}

func template(t *testing.T, set ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	args := append([]string{"template", release, chartDir, "--namespace", releaseNS}, set...)
	out, err := run(t, tool(t, "helm"), args...)
	if err != nil {
		return nil, errors.New(out)
	}
	return decode(t, out), nil
}

func decode(t *testing.T, manifests string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("failed to decode manifests: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// index keys objects by "Kind namespace/name".
func index(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = o
	}
	return m
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		t.Fatal("object missing")
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("failed to convert %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// fileRules reads the rules of a Role or ClusterRole manifest in config/rbac.
func fileRules(t *testing.T, path string) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatalf("failed to parse %s: %v", path, err)
	}
	if len(role.Rules) == 0 {
		t.Fatalf("%s has no rules", path)
	}
	return role.Rules
}

func TestChartLints(t *testing.T) {
	for name, set := range combos {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chartDir}, set...)
			if out, err := run(t, tool(t, "helm"), args...); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
		})
	}
}

// TestChartRendersValueCombinations checks each combination renders the objects it should,
// with the generated RBAC rules and the flags that carry the values to the operator.
func TestChartRendersValueCombinations(t *testing.T) {
	managerRules := fileRules(t, "../config/rbac/role.yaml")
	leaderRules := fileRules(t, "../config/rbac/leader_election_role.yaml")
	metricsAuthRules := fileRules(t, "../config/rbac/metrics_auth_role.yaml")
	metricsReaderRules := fileRules(t, "../config/rbac/metrics_reader_role.yaml")
	sa := rbacv1.Subject{Kind: "ServiceAccount", Name: fullname, Namespace: releaseNS}
	common := []string{
		"ServiceAccount " + releaseNS + "/" + fullname,
		"Deployment " + releaseNS + "/" + fullname,
	}
	leader := []string{
		"Role " + releaseNS + "/" + fullname + "-leader-election",
		"RoleBinding " + releaseNS + "/" + fullname + "-leader-election",
	}
	metrics := []string{"Service " + releaseNS + "/" + fullname + "-metrics"}
	// The metrics endpoint's authentication: cluster-scoped even for a namespaced install.
	metricsAuth := []string{"ClusterRole /" + fullname + "-metrics-auth", "ClusterRoleBinding /" + fullname + "-metrics-auth",
		"ClusterRole /" + fullname + "-metrics-reader"}
	clusterRBAC := []string{"ClusterRole /" + fullname + "-manager", "ClusterRoleBinding /" + fullname + "-manager"}
	nsRBAC := []string{
		"Role team-a/" + fullname + "-manager", "RoleBinding team-a/" + fullname + "-manager",
		"Role team-b/" + fullname + "-manager", "RoleBinding team-b/" + fullname + "-manager",
	}
	cases := []struct {
		name     string
		want     []string
		replicas int32
		args     []string // flags the manager must get
		noArgs   []string // flag prefixes it must not get
	}{
		{"defaults", slices.Concat(common, leader, metrics, metricsAuth, clusterRBAC), 1,
			[]string{"--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081"}, []string{"--namespaces", "--metrics-secure"}},
		{"namespaced RBAC, two ns", slices.Concat(common, leader, metrics, metricsAuth, nsRBAC), 1,
			[]string{"--leader-elect", "--namespaces=team-a,team-b"}, nil},
		{"leader election, 2 pods", slices.Concat(common, leader, metrics, metricsAuth, clusterRBAC), 2,
			[]string{"--leader-elect"}, []string{"--namespaces"}},
		{"no leader election, no metrics", slices.Concat(common, clusterRBAC), 1,
			[]string{"--metrics-bind-address=0"}, []string{"--leader-elect", "--metrics-secure"}},
		{"plain metrics", slices.Concat(common, leader, metrics, clusterRBAC), 1,
			[]string{"--metrics-bind-address=:8443", "--metrics-secure=false"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs, err := template(t, combos[c.name]...)
			if err != nil {
				t.Fatal(err)
			}
			got := index(objs)
			want := slices.Clone(c.want)
			sort.Strings(want)
			if !reflect.DeepEqual(keys(got), want) {
				t.Fatalf("rendered objects:\n  %s\nwant:\n  %s", strings.Join(keys(got), "\n  "), strings.Join(want, "\n  "))
			}
			for key, o := range got {
				switch o.GetKind() {
				case "ClusterRole":
					r := convert[rbacv1.ClusterRole](t, o)
					switch {
					case strings.HasSuffix(r.Name, "-metrics-auth"):
						expectRules(t, key, r.Rules, metricsAuthRules)
					case strings.HasSuffix(r.Name, "-metrics-reader"):
						expectRules(t, key, r.Rules, metricsReaderRules)
					default:
						expectRules(t, key, r.Rules, managerRules)
					}
				case "Role":
					r := convert[rbacv1.Role](t, o)
					if strings.HasSuffix(r.Name, "-leader-election") {
						expectRules(t, key, r.Rules, leaderRules)
					} else {
						expectRules(t, key, r.Rules, managerRules)
					}
				case "ClusterRoleBinding":
					expectSubjects(t, key, convert[rbacv1.ClusterRoleBinding](t, o).Subjects, sa)
				case "RoleBinding":
					expectSubjects(t, key, convert[rbacv1.RoleBinding](t, o).Subjects, sa)
				}
			}
			d := convert[appsv1.Deployment](t, got["Deployment "+releaseNS+"/"+fullname])
			if *d.Spec.Replicas != c.replicas {
				t.Errorf("replicas = %d, want %d", *d.Spec.Replicas, c.replicas)
			}
			args := d.Spec.Template.Spec.Containers[0].Args
			for _, a := range c.args {
				if !slices.Contains(args, a) {
					t.Errorf("manager args %v lack %s", args, a)
				}
			}
			for _, p := range c.noArgs {
				for _, a := range args {
					if strings.HasPrefix(a, p) {
						t.Errorf("manager args %v have %s", args, a)
					}
				}
			}
			expectRestricted(t, &d.Spec.Template.Spec)
		})
	}
}

func expectRules(t *testing.T, what string, got, want []rbacv1.PolicyRule) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s rules differ from config/rbac:\n got  %+v\n want %+v", what, got, want)
	}
}

func expectSubjects(t *testing.T, what string, got []rbacv1.Subject, want rbacv1.Subject) {
	t.Helper()
	if len(got) != 1 || got[0] != want {
		t.Errorf("%s subjects = %+v, want [%+v]", what, got, want)
	}
}

// expectRestricted checks the pod meets the restricted Pod Security Standard.
func expectRestricted(t *testing.T, spec *corev1.PodSpec) {
	t.Helper()
	psc, sc := spec.SecurityContext, spec.Containers[0].SecurityContext
	switch {
	case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
		t.Error("pod securityContext lacks runAsNonRoot: true")
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("pod securityContext lacks seccompProfile RuntimeDefault")
	case sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("container securityContext lacks readOnlyRootFilesystem: true")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("container securityContext lacks allowPrivilegeEscalation: false")
	case sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
		t.Error("container securityContext does not drop ALL capabilities")
	}
}

// TestChartRefusesBadValues: values that cannot work fail at install, naming what is wrong,
// instead of rendering an operator that fights itself or has no permissions.
func TestChartRefusesBadValues(t *testing.T) {
	cases := map[string]struct {
		set  []string
		want string
	}{
		"two replicas without leader election": {[]string{"--set", "replicaCount=2", "--set", "leaderElection.enabled=false"}, "leaderElection.enabled"},
		"namespaced RBAC without namespaces":   {[]string{"--set", "rbac.scope=namespaced"}, "watchNamespaces"},
		"an unknown RBAC scope":                {[]string{"--set", "rbac.scope=everywhere"}, "scope"},
		"a misspelt key":                       {[]string{"--set", "replicas=2"}, "replicas"},
		"a namespace that is no DNS label":     {[]string{"--set", "watchNamespaces={Team_A}"}, "watchNamespaces"},
		"a flag that is no flag":               {[]string{"--set", "extraArgs={sync-period=5m}"}, "extraArgs"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := template(t, c.set...)
			if err == nil {
				t.Fatalf("helm template %v succeeded", c.set)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error does not name %s: %v", c.want, err)
			}
		})
	}
}

// TestChartMatchesConfig: the chart's CRDs are the generated ones byte for byte, no more
// and no fewer, and its default pod is the one `make deploy` runs (config/manager), but for
// names and image.
func TestChartMatchesConfig(t *testing.T) {
	bases := filepath.Dir(generatedCR)
	want, err := os.ReadDir(bases)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadDir(filepath.Join(chartDir, "crds"))
	if len(got) != len(want) {
		t.Errorf("the chart's crds/ holds %d files, config/crd/bases %d: run 'make manifests'", len(got), len(want))
	}
	for _, e := range want {
		generated, err := os.ReadFile(filepath.Join(bases, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		chartCRD, err := os.ReadFile(filepath.Join(chartDir, "crds", e.Name()))
		if err != nil || !bytes.Equal(chartCRD, generated) {
			t.Errorf("the chart's crds/%s differs from config/crd/bases (%v): run 'make manifests'", e.Name(), err)
		}
	}

	objs, err := template(t)
	if err != nil {
		t.Fatal(err)
	}
	chartPod := convert[appsv1.Deployment](t, index(objs)["Deployment "+releaseNS+"/"+fullname]).Spec.Template.Spec
	kustomize := kustomizeObjects(t, "../config/default")
	kustPod := convert[appsv1.Deployment](t, kustomize["Deployment redis-operator-system/redis-operator-controller-manager"]).Spec.Template.Spec
	for _, p := range []*corev1.PodSpec{&chartPod, &kustPod} {
		p.ServiceAccountName = ""
		p.Containers[0].Image = ""
		// The same flags, in any order.
		sort.Strings(p.Containers[0].Args)
	}
	if !reflect.DeepEqual(chartPod, kustPod) {
		a, _ := yaml.Marshal(chartPod)
		b, _ := yaml.Marshal(kustPod)
		t.Errorf("the chart's default pod differs from config/manager's:\n--- chart\n%s\n--- config\n%s", a, b)
	}
}

func kustomizeObjects(t *testing.T, dir string) map[string]*unstructured.Unstructured {
	t.Helper()
	out, err := run(t, tool(t, "kubectl"), "kustomize", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	return index(decode(t, out))
}

// TestInstallerIsKustomizeOutput runs `make build-installer` and checks the file is
// config/default's objects with the image set, and holds the CRD, the RBAC and the Deployment.
func TestInstallerIsKustomizeOutput(t *testing.T) {
	const img = "registry.example/redis-cluster-operator:v9.9.9"
	installer := filepath.Join(t.TempDir(), "install.yaml")
	cmd := exec.Command("make", "--no-print-directory", "-C", "..", "build-installer", "IMG="+img, "INSTALLER="+installer)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build-installer: %v\n%s", err, out)
	}
	data, err := os.ReadFile(installer)
	if err != nil {
		t.Fatal(err)
	}
	got := index(decode(t, string(data)))
	want := kustomizeObjects(t, "../config/default")
	dep := want["Deployment redis-operator-system/redis-operator-controller-manager"]
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	containers[0].(map[string]any)["image"] = img
	if err := unstructured.SetNestedSlice(dep.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(keys(got), keys(want)) {
		t.Fatalf("installer objects %v, kustomize's %v", keys(got), keys(want))
	}
	for k := range want {
		if !reflect.DeepEqual(got[k].Object, want[k].Object) {
			t.Errorf("%s differs from kustomize's", k)
		}
	}
	for _, k := range []string{
		"CustomResourceDefinition /redisclusters.redis.middleware.hc.cn",
		"ClusterRole /redis-operator-manager-role",
		"ClusterRoleBinding /redis-operator-manager-rolebinding",
		"ServiceAccount redis-operator-system/redis-operator-controller-manager",
		"Deployment redis-operator-system/redis-operator-controller-manager",
	} {
		if got[k] == nil {
			t.Errorf("the installer lacks %s", k)
		}
	}
	// The documented way to remove the operator alone from an installer-made install.
	for k, o := range got {
		labelled := o.GetLabels()["app.kubernetes.io/name"] == "redis-cluster-operator"
		if isCRD := o.GetKind() == "CustomResourceDefinition"; labelled == isCRD {
			t.Errorf("%s: label app.kubernetes.io/name=redis-cluster-operator present=%v: only the CRD must lack it", k, labelled)
		}
	}
	if bytes.Contains(data, []byte("controller:latest")) {
		t.Error("the installer still names the placeholder image controller:latest")
	}
}

// TestNamespacedOverlay: config/namespaced grants the generated rules (config/rbac/role.yaml,
// the one source) as a Role and RoleBinding in namespace shop, keeps no manager
// ClusterRole or ClusterRoleBinding, and narrows the operator to shop; the rest is
// config/default's.
func TestNamespacedOverlay(t *testing.T) {
	got := kustomizeObjects(t, "../config/namespaced")
	base := kustomizeObjects(t, "../config/default")
	for _, k := range []string{"ClusterRole /redis-operator-manager-role", "ClusterRoleBinding /redis-operator-manager-rolebinding"} {
		if got[k] != nil {
			t.Errorf("the namespaced overlay keeps %s", k)
		}
	}
	role := got["Role shop/redis-operator-manager-role"]
	binding := got["RoleBinding shop/redis-operator-manager-rolebinding"]
	if role == nil || binding == nil {
		t.Fatalf("the namespaced overlay has no manager Role and RoleBinding in shop: %v", keys(got))
	}
	expectRules(t, "Role shop/redis-operator-manager-role", convert[rbacv1.Role](t, role).Rules, fileRules(t, "../config/rbac/role.yaml"))
	rb := convert[rbacv1.RoleBinding](t, binding)
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != "redis-operator-manager-role" {
		t.Errorf("RoleBinding refers to %s %s", rb.RoleRef.Kind, rb.RoleRef.Name)
	}
	expectSubjects(t, "RoleBinding shop/redis-operator-manager-rolebinding", rb.Subjects,
		rbacv1.Subject{Kind: "ServiceAccount", Name: "redis-operator-controller-manager", Namespace: "redis-operator-system"})
	dep := convert[appsv1.Deployment](t, got["Deployment redis-operator-system/redis-operator-controller-manager"])
	if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--namespaces=shop") {
		t.Errorf("manager args %v lack --namespaces=shop", dep.Spec.Template.Spec.Containers[0].Args)
	}
	// Everything else is config/default's, object for object.
	for k := range base {
		switch k {
		case "ClusterRole /redis-operator-manager-role", "ClusterRoleBinding /redis-operator-manager-rolebinding",
			"Deployment redis-operator-system/redis-operator-controller-manager":
			continue
		}
		if got[k] == nil || !reflect.DeepEqual(got[k].Object, base[k].Object) {
			t.Errorf("%s differs from config/default's", k)
		}
	}
	if len(got) != len(base) {
		t.Errorf("the overlay has %d objects, config/default %d", len(got), len(base))
	}
}

// TestChartMonitoring: the Prometheus Operator objects are off by default; on, the
// ServiceMonitor selects the metrics Service by its labels and port, the PodMonitor the
// Redis pods (in watchNamespaces when set), and the PrometheusRule and dashboard are
// config/prometheus' own (the same rule groups, the same JSON).
func TestChartMonitoring(t *testing.T) {
	objs, err := template(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if strings.HasPrefix(o.GetAPIVersion(), "monitoring.coreos.com/") || strings.HasSuffix(o.GetName(), "-grafana-dashboard") {
			t.Errorf("%s %s rendered by default", o.GetKind(), o.GetName())
		}
	}
	on := []string{"--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.podMonitor.enabled=true",
		"--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.grafanaDashboard.enabled=true",
		"--set", "monitoring.labels.release=kps", "--set", "watchNamespaces={shop}"}
	objs, err = template(t, on...)
	if err != nil {
		t.Fatal(err)
	}
	m := index(objs)
	get := func(key string) *unstructured.Unstructured {
		o, ok := m[key]
		if !ok {
			t.Fatalf("%s not rendered; have %v", key, keys(m))
		}
		return o
	}
	svc := get("Service " + releaseNS + "/" + fullname + "-metrics")
	sm := get("ServiceMonitor " + releaseNS + "/" + fullname)
	pm := get("PodMonitor " + releaseNS + "/" + fullname + "-redis-clusters")
	rule := get("PrometheusRule " + releaseNS + "/" + fullname + "-alerts")
	cm := get("ConfigMap " + releaseNS + "/" + fullname + "-grafana-dashboard")

	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		if svc.GetLabels()[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s; the Service's labels are %v", k, v, svc.GetLabels())
		}
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != ports[0].(map[string]any)["name"] {
		t.Errorf("the ServiceMonitor's endpoints %v do not name the Service's port %v", endpoints, ports)
	}
	if ns, _, _ := unstructured.NestedStringSlice(pm.Object, "spec", "namespaceSelector", "matchNames"); !slices.Equal(ns, []string{"shop"}) {
		t.Errorf("the PodMonitor watches namespaces %v, want [shop]", ns)
	}
	for _, o := range []*unstructured.Unstructured{sm, pm, rule} {
		if o.GetLabels()["release"] != "kps" {
			t.Errorf("%s has no label release=kps: %v", o.GetKind(), o.GetLabels())
		}
	}

	var config struct {
		Spec struct{ Groups any } `json:"spec"`
	}
	data, err := os.ReadFile("../config/prometheus/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &config); err != nil {
		t.Fatal(err)
	}
	groups, _, _ := unstructured.NestedFieldCopy(rule.Object, "spec", "groups")
	if a, b := mustJSON(t, groups), mustJSON(t, config.Spec.Groups); a != b {
		t.Errorf("the chart's rule groups differ from config/prometheus/prometheusrule.yaml:\n%s\n%s", a, b)
	}
	dash, err := os.ReadFile("../config/prometheus/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "redis-cluster.json"); strings.TrimSpace(got) != strings.TrimSpace(string(dash)) {
		t.Error("the chart's dashboard differs from config/prometheus/grafana-dashboard.json: run 'make manifests'")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
