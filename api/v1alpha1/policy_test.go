package v1alpha1_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// The sample admission policy a platform team applies to forbid tenants hostPath, root and
// Services reachable from outside (config/policy) is sent to a real API server: each thing
// it forbids is refused naming the field, and a plain cluster passes. Its binding is
// narrowed to the test's namespace so the package's other tests are not judged by it.
func TestTenantPolicyRefuses(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	const ns = "tenant-policy"
	installPolicy(ctx, t, ns, "tenant-restrictions.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "ValidatingAdmissionPolicyBinding" {
			sel := map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}}
			if err := unstructured.SetNestedField(o.Object, sel, "spec", "matchResources", "namespaceSelector"); err != nil {
				t.Fatal(err)
			}
		}
	})

	hostPath := func(rc *redisv1alpha1.RedisCluster) {
		rc.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{Volumes: redisv1alpha1.RedisVolumes{Type: redisv1alpha1.VolumeTypeHostPath}})
	}
	// The policy takes effect once the API server has loaded it: wait for its first refusal.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := create(ctx, ns, "probe", hostPath)
		if err != nil && strings.Contains(err.Error(), "hostPath is not allowed") {
			break
		}
		if err == nil {
			_ = k8sClient.Delete(ctx, &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}})
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy never refused hostPath: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	sc := func(s corev1.PodSecurityContext) func(*redisv1alpha1.RedisCluster) {
		return func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{SecurityContext: &s})
		}
	}
	refused := []struct {
		name   string
		mutate func(*redisv1alpha1.RedisCluster)
		want   string
	}{
		{"hostPath", hostPath, "spec.pod[0].volumes.type"},
		{"root", sc(corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}), "spec.pod[0].securityContext"},
		{"runAsNonRoot false", sc(corev1.PodSecurityContext{RunAsNonRoot: ptr.To(false)}), "spec.pod[0].securityContext"},
		{"seccomp off", sc(corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}), "spec.pod[0].securityContext"},
		{"SELinux options", sc(corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Level: "s0:c1"}}), "spec.pod[0].securityContext"},
		{"sysctls", sc(corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.core.somaxconn", Value: "4096"}}}), "spec.pod[0].securityContext"},
		{"a NodePort client Service", func(rc *redisv1alpha1.RedisCluster) { rc.Spec.ClientService.Type = corev1.ServiceTypeNodePort }, "spec.clientService.type"},
		{"a LoadBalancer client Service", func(rc *redisv1alpha1.RedisCluster) { rc.Spec.ClientService.Type = corev1.ServiceTypeLoadBalancer }, "spec.clientService.type"},
		{"external access", func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalNodePort}
		}, "spec.externalAccess"},
		{"a system priority class", func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{PriorityClassName: "system-node-critical"})
		}, "spec.pod[0].priorityClassName"},
		{"another repository", func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Repository = "example.org/redis" }, "spec.repository"},
		{"another image", func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{MiddlewareImage: "example.org/redis:7.0"})
		}, "middlewareImage"},
	}
	for i, tc := range refused {
		err := create(ctx, ns, fmt.Sprintf("refused-%d", i), tc.mutate)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want refused naming %s", tc.name, err, tc.want)
		}
	}

	allowed := []struct {
		name   string
		mutate func(*redisv1alpha1.RedisCluster)
	}{
		{"the defaults", func(*redisv1alpha1.RedisCluster) {}},
		{"a claim per pod, non-root, Valkey", func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Repository, rc.Spec.Version = "valkey/valkey", "9.1"
			rc.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{
				Volumes:         redisv1alpha1.RedisVolumes{Type: redisv1alpha1.VolumeTypeVolumeClaimTemplate},
				SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](999), RunAsNonRoot: ptr.To(true)},
				MonitorImage:    "oliver006/redis_exporter:v1.88.0",
			})
		}},
	}
	for i, tc := range allowed {
		if err := create(ctx, ns, fmt.Sprintf("allowed-%d", i), tc.mutate); err != nil {
			t.Errorf("%s: refused: %v", tc.name, err)
		}
	}
}

// create sends a valid cluster, changed by mutate, to namespace ns.
func create(ctx context.Context, ns, name string, mutate func(*redisv1alpha1.RedisCluster)) error {
	rc := validCluster(name)
	rc.Namespace = ns
	mutate(rc)
	return k8sClient.Create(ctx, rc)
}

// policyObjects reads a policy and its binding from config/policy.
func policyObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	out := sampleObjects(t, filepath.Join(repoRoot, "config", "policy", file))
	if len(out) != 2 {
		t.Fatalf("config/policy/%s: %d objects, want the policy and its binding", file, len(out))
	}
	return out
}

// installPolicy makes namespace ns and creates the objects of config/policy/file, each
// passed to adjust first, deleting them when the test ends.
func installPolicy(ctx context.Context, t *testing.T, ns, file string, adjust func(*unstructured.Unstructured)) {
	t.Helper()
	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, o := range policyObjects(t, file) {
		adjust(o)
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatalf("the API server refused %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, o) })
	}
}
