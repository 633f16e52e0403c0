/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
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

// TestKubectl runs the real kubectl: explain documents the fields, apply accepts both
// samples and refuses a bad CR with the field named.
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

	for _, sample := range []string{seedSample, demoSample} {
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
