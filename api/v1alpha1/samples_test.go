/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/render"
)

var (
	seedSample = filepath.Join(repoRoot, "config", "samples", "seed_rediscluster.yaml")
	demoSample = filepath.Join(repoRoot, "config", "samples", "redis_v1alpha1_rediscluster.yaml")
)

func readSample(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("failed to read sample: %v", err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatalf("failed to parse sample %s: %v", path, err)
	}
	return obj
}

// TestSeedSampleIsAccepted sends the seed's CR, as written, with strict field validation
// (kubectl's default), then its status block through the status subresource.
func TestSeedSampleIsAccepted(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	seed := readSample(t, seedSample)
	status, ok := seed.Object["status"].(map[string]any)
	if !ok {
		t.Fatal("the seed sample has no status block")
	}

	obj := seed.DeepCopy()
	if err := k8sClient.Create(ctx, obj, strict); err != nil {
		t.Fatalf("the seed sample was refused: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, obj) })

	// The status subresource ignores status on create; the seed's status must also fit.
	obj.Object["status"] = status
	if err := k8sClient.Status().Update(ctx, obj, strict); err != nil {
		t.Fatalf("the seed's status block was refused: %v", err)
	}

	got := &redisv1alpha1.RedisCluster{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatalf("failed to get the seed cluster: %v", err)
	}
	if got.Spec.Version != "3.2.8" || !got.Spec.Pause || got.Spec.Finalizers != redisv1alpha1.FinalizersForeground {
		t.Errorf("spec read back wrong: version %q pause %v finalizers %q", got.Spec.Version, got.Spec.Pause, got.Spec.Finalizers)
	}
	if keys, err := got.Spec.PipelineKeys(); err != nil || keys != 100 {
		t.Errorf(`pipeline "100" read back as %d, %v`, keys, err)
	}
	if m := got.Spec.Masters(); m != 3 {
		t.Errorf("7 instances with the default replicasPerMaster give %d masters, want 3", m)
	}
	if n := len(got.Spec.UpdateStrategy.AssignStrategies); n != 2 {
		t.Errorf("assignStrategies has %d entries, want 2", n)
	}
	if v := got.Spec.PodTemplate().Volumes; v.Type != redisv1alpha1.VolumeTypeNFS || v.PersistentVolumeClaimName != "pvcName" {
		t.Errorf("volumes read back as %+v", v)
	}
	st := got.Status
	if st.Replicas != 6 || st.Phase != redisv1alpha1.PhaseCreating || st.Reason != "异常问题" || len(st.Conditions) != 1 {
		t.Fatalf("status read back wrong: %+v", st)
	}
	c := st.Conditions[0]
	if c.Name != "redis-cluster-0" || c.Instance != "10.168.78.90:6379" || c.Type != "master" ||
		c.NodeID != "allkk111snknkcs" || c.MasterNodeID != "allkk111snknkcs" || c.Slots != "1024-2048" ||
		c.HostIP != "192.168.26.122" || c.Status != "True" || c.LastTransitionTime.UTC().Format("2006-01-02T15:04:05Z") != "2019-03-25T03:10:29Z" {
		t.Errorf("condition read back wrong: %+v", c)
	}

	// The misplaced affinity key is kept (not refused), as RedisPodTemplate.Affinity says.
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(redisv1alpha1.GroupVersion.WithKind("RedisCluster"))
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), raw); err != nil {
		t.Fatalf("failed to get the seed cluster: %v", err)
	}
	pods, _, _ := unstructured.NestedSlice(raw.Object, "spec", "pod")
	affinity, _ := pods[0].(map[string]any)["affinity"].(map[string]any)
	if _, ok := affinity["requiredDuringSchedulingIgnoredDuringExecution"]; !ok {
		t.Errorf("the seed's misplaced affinity key was dropped: %v", affinity)
	}
}

// TestDemoSampleIsAccepted sends the demo sample with strict field validation.
func TestDemoSampleIsAccepted(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	obj := readSample(t, demoSample)
	if err := k8sClient.Create(ctx, obj, strict); err != nil {
		t.Fatalf("the demo sample was refused: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, obj) })
	got := &redisv1alpha1.RedisCluster{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatalf("failed to get the demo cluster: %v", err)
	}
	if got.Spec.Masters() != 3 || got.Spec.Image() != "library/redis:7.0" ||
		got.Spec.PodTemplate().Volumes.Type != redisv1alpha1.VolumeTypeHostPath {
		t.Errorf("demo read back as masters %d, image %s, volumes %+v", got.Spec.Masters(), got.Spec.Image(), got.Spec.PodTemplate().Volumes)
	}
}

// TestKubectl runs the real kubectl: explain documents the fields, apply accepts every
// sample and refuses a bad CR with the field named.
func TestKubectl(t *testing.T) {
	needAPIServer(t)
	user, err := testEnv.ControlPlane.AddUser(envtest.User{Name: "kubectl-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("failed to add a kubectl user: %v", err)
	}
	kubectl, err := user.Kubectl()
	if err != nil {
		t.Fatalf("failed to configure kubectl: %v", err)
	}
	kubectl.Path = filepath.Join(testEnv.BinaryAssetsDirectory, "kubectl")
	run := func(stdin string, args ...string) (string, error) {
		t.Helper()
		if stdin != "" {
			f := filepath.Join(t.TempDir(), "cr.yaml")
			if err := os.WriteFile(f, []byte(stdin), 0o600); err != nil {
				t.Fatalf("failed to write CR: %v", err)
			}
			args = append(args, "-f", f)
		}
		stdout, stderr, err := kubectl.Run(args...)
		out, _ := io.ReadAll(stdout)
		errOut, _ := io.ReadAll(stderr)
		return string(out) + string(errOut), err
	}

	// envtest waits until the CRD is served, not until its OpenAPI is published: retry.
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if out, err = run("", "explain", "rec.spec.updateStrategy"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("kubectl explain failed: %v\n%s", err, out)
	}
	for _, want := range []string{"AutoReceive", "AssignReceive", "pipeline", "assignStrategies", "MIGRATE"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl explain rec.spec.updateStrategy does not mention %q:\n%s", want, out)
		}
	}

	for _, sample := range sampleFiles(t) {
		out, err := run("", "apply", "--dry-run=server", "-f", sample)
		if err != nil {
			t.Errorf("kubectl apply -f %s refused it: %v\n%s", sample, err, out)
		}
	}

	bad := `apiVersion: redis.middleware.hc.cn/v1alpha1
kind: RedisCluster
metadata:
  name: too-small
  namespace: default
spec:
  replicas: 4
  version: "7.2"
`
	out, err = run(bad, "apply", "--dry-run=server")
	if err == nil || !strings.Contains(out, "spec.replicas: 4 instances with replicasPerMaster 1 give 2 masters; a Redis Cluster needs at least 3") {
		t.Errorf("kubectl apply of 4 instances: err %v, output:\n%s", err, out)
	}

	typo := strings.Replace(bad, "replicas: 4", "replicas: 6\n  replicaz: 1", 1)
	out, err = run(typo, "apply", "--dry-run=server")
	if err == nil || !strings.Contains(out, `unknown field "spec.replicaz"`) {
		t.Errorf("kubectl apply of an unknown field: err %v, output:\n%s", err, out)
	}
}

// sampleFiles is every YAML file of config/samples but kustomize's own, so a sample added
// there is checked without being listed here.
func sampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var samples []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			samples = append(samples, f)
		}
	}
	if len(samples) < 2 {
		t.Fatalf("found %d samples in config/samples", len(samples))
	}
	return samples
}

// sampleObjects decodes every document of a sample file.
func sampleObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("failed to parse %s: %v", path, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// TestEverySampleIsAccepted sends every object of every file in config/samples to the API
// server (a server-side dry run, with kubectl's strict field validation), so a sample that
// the CRD's schema or rules refuse, or that names a field the API does not have, fails here.
// Each RedisCluster, as the API server defaulted it, is also rendered by the operator's
// templates (with the redis.conf of a ConfigMap in the same file), so a sample that passes
// the API server but that the operator could not turn into objects fails too. Every sample
// starts with a comment saying what it is for.
func TestEverySampleIsAccepted(t *testing.T) {
	needAPIServer(t)
	r, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range sampleFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(data, []byte("# ")) {
				t.Errorf("%s does not start with a comment saying what it is for", path)
			}
			objs := sampleObjects(t, path)
			if len(objs) == 0 {
				t.Fatalf("%s holds no object", path)
			}
			var clusters []*redisv1alpha1.RedisCluster
			userConf := map[string]string{}
			for _, obj := range objs {
				if obj.GetNamespace() == "" {
					t.Errorf("%s %s has no namespace: kubectl apply -n would move only part of the sample", obj.GetKind(), obj.GetName())
				}
				if obj.GetKind() == "ConfigMap" {
					conf, _, _ := unstructured.NestedString(obj.Object, "data", "redis.conf")
					userConf[obj.GetName()] = conf
				}
				sent := obj.DeepCopy()
				if err := k8sClient.Create(context.Background(), sent, strict, client.DryRunAll); err != nil {
					t.Errorf("%s %s was refused: %v", obj.GetKind(), obj.GetName(), err)
					continue
				}
				if sent.GetKind() == "RedisCluster" {
					rc := &redisv1alpha1.RedisCluster{}
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sent.Object, rc); err != nil {
						t.Fatalf("failed to convert %s: %v", obj.GetName(), err)
					}
					clusters = append(clusters, rc)
				}
			}
			for _, rc := range clusters {
				if rc.Spec.Pause {
					continue // the seed: the operator leaves a paused cluster alone
				}
				conf := ""
				if name := rc.Spec.PodTemplate().ConfigMap; name != "" {
					var ok bool
					if conf, ok = userConf[name]; !ok {
						t.Errorf("RedisCluster %s names ConfigMap %s, which the sample does not hold", rc.Name, name)
					}
				}
				if _, err := r.Render(rc, conf); err != nil {
					t.Errorf("RedisCluster %s does not render: %v", rc.Name, err)
				}
			}
		})
	}
}

// samplePath matches a sample's file name where a document names one.
var samplePath = regexp.MustCompile(`(?:config/samples/)?\b((?:redis_v1alpha1_|seed_)[A-Za-z0-9_.-]*\.yaml)`)

// TestDocsNameOnlyExistingSamples reads every Markdown file of the repository: each sample
// it names (config/samples/FILE, or FILE alone) must exist.
func TestDocsNameOnlyExistingSamples(t *testing.T) {
	named := 0
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != repoRoot && (strings.HasPrefix(n, ".") || n == "bin" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range samplePath.FindAllStringSubmatch(string(data), -1) {
			named++
			if _, err := os.Stat(filepath.Join(repoRoot, "config", "samples", m[1])); err != nil {
				t.Errorf("%s names sample %s, which config/samples does not have", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if named == 0 {
		t.Error("no document names a sample: the pattern is wrong")
	}
}

// TestCertManagerSampleIssuesTheTLSSecret: config/samples/cert-manager/tls-certificates.yaml
// needs cert-manager's CRDs, which the test bed has not, so it is not applied; this checks it
// against the TLS sample instead: a Certificate writes the Secret the TLS sample's
// spec.tls.secretName names, in its namespace, with the usages the instances need (server
// auth, and client auth since they present it to each other and the operator presents it
// to them), issued by an Issuer of the file that signs with a CA Certificate of the file.
func TestCertManagerSampleIssuesTheTLSSecret(t *testing.T) {
	tlsCluster := readSample(t, filepath.Join(repoRoot, "config", "samples", "redis_v1alpha1_rediscluster_tls.yaml"))
	secret, _, _ := unstructured.NestedString(tlsCluster.Object, "spec", "tls", "secretName")
	if secret == "" {
		t.Fatal("the TLS sample has no spec.tls.secretName")
	}
	path := filepath.Join(repoRoot, "config", "samples", "cert-manager", "tls-certificates.yaml")
	if data, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(data, []byte("# ")) {
		t.Errorf("%s does not start with a comment saying what it is for (%v)", path, err)
	}
	certs := map[string]*unstructured.Unstructured{} // by secretName
	issuers := map[string]*unstructured.Unstructured{}
	for _, obj := range sampleObjects(t, path) {
		if obj.GetAPIVersion() != "cert-manager.io/v1" {
			t.Errorf("%s %s: apiVersion %s, want cert-manager.io/v1", obj.GetKind(), obj.GetName(), obj.GetAPIVersion())
		}
		if obj.GetNamespace() != tlsCluster.GetNamespace() {
			t.Errorf("%s %s is in namespace %q, the TLS sample in %q", obj.GetKind(), obj.GetName(), obj.GetNamespace(), tlsCluster.GetNamespace())
		}
		switch obj.GetKind() {
		case "Certificate":
			name, _, _ := unstructured.NestedString(obj.Object, "spec", "secretName")
			certs[name] = obj
		case "Issuer":
			issuers[obj.GetName()] = obj
		default:
			t.Errorf("unexpected kind %s", obj.GetKind())
		}
	}
	cert := certs[secret]
	if cert == nil {
		t.Fatalf("no Certificate of %s writes Secret %s, which the TLS sample names", path, secret)
	}
	usages, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "usages")
	for _, want := range []string{"server auth", "client auth"} {
		if !slices.Contains(usages, want) {
			t.Errorf("Certificate %s: usages %v lack %q", cert.GetName(), usages, want)
		}
	}
	issuerName, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	issuer := issuers[issuerName]
	if issuer == nil {
		t.Fatalf("Certificate %s is issued by %q, no Issuer of the file", cert.GetName(), issuerName)
	}
	caSecret, _, _ := unstructured.NestedString(issuer.Object, "spec", "ca", "secretName")
	ca := certs[caSecret]
	if ca == nil {
		t.Fatalf("Issuer %s signs with Secret %q, which no Certificate of the file writes", issuerName, caSecret)
	}
	if isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA"); !isCA {
		t.Errorf("Certificate %s (the CA Issuer's) is not isCA", ca.GetName())
	}
	// With clientAuth Required, applications need a client certificate from the same CA.
	var client bool
	for name, c := range certs {
		u, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "usages")
		by, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "name")
		if name != secret && slices.Contains(u, "client auth") && by == issuerName {
			client = true
		}
	}
	if !client {
		t.Error("no client Certificate from the instances' CA: the TLS sample's clientAuth Required refuses clients without one")
	}
}
