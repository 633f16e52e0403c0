package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// TestPlainPortRuleLetsOlderClustersGo: a RedisCluster made before the rule that
// spec.tls.disablePlainPort be true with spec.externalAccess (it was, on main, between the
// external TLS hostnames and the rule) is not stuck. The API server ratchets a rule whose
// node (spec) is unchanged (CRDValidationRatcheting, on by default from Kubernetes 1.30,
// the oldest the operator supports), so its labels, its status, its finalizer's removal
// and its deletion pass; a spec change is refused until it sets disablePlainPort, which it
// may; nothing else about it is refused.
func TestPlainPortRuleLetsOlderClustersGo(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	older := clusterBeforePlainPortRule(t, "plain-port-before-the-rule")

	rc := &redisv1alpha1.RedisCluster{}
	get := func() *redisv1alpha1.RedisCluster {
		t.Helper()
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(older), rc); err != nil {
			t.Fatal(err)
		}
		return rc
	}
	get().Labels = map[string]string{"team": "shop"}
	if err := k8sClient.Update(ctx, rc, strict); err != nil {
		t.Errorf("a label on the older cluster: %v", err)
	}
	get().Status.Phase = redisv1alpha1.PhaseRunning
	if err := k8sClient.Status().Update(ctx, rc); err != nil {
		t.Errorf("its status: %v", err)
	}
	get().Spec.Replicas = 8
	requireRefused(t, k8sClient.Update(ctx, rc, strict), "spec.tls.disablePlainPort", "must be true with spec.externalAccess")
	get().Spec.TLS.DisablePlainPort = true
	if err := k8sClient.Update(ctx, rc, strict); err != nil {
		t.Errorf("setting spec.tls.disablePlainPort: %v", err)
	}
	if err := k8sClient.Delete(ctx, get()); err != nil {
		t.Fatalf("delete: %v", err)
	}
	get().Finalizers = nil
	if err := k8sClient.Update(ctx, rc, strict); err != nil {
		t.Errorf("removing its finalizer once deleted: %v", err)
	}
}

// TestPlainPortRuleRatchetsMetadataAndDeletion is the stuck case itself: an older cluster
// still violating the rule (no spec change at all) loses its finalizer and goes.
func TestPlainPortRuleRatchetsMetadataAndDeletion(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	older := clusterBeforePlainPortRule(t, "plain-port-deleted")
	rc := &redisv1alpha1.RedisCluster{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(older), rc); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Delete(ctx, rc); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(older), rc); err != nil {
		t.Fatal(err)
	}
	rc.Finalizers = nil
	if err := k8sClient.Update(ctx, rc, strict); err != nil {
		t.Fatalf("removing the finalizer of the older cluster, deleted: %v", err)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(older), rc); err == nil {
		t.Errorf("the older cluster is still there after its finalizer was removed")
	}
}

// clusterBeforePlainPortRule creates RedisCluster name (with a finalizer) with TLS,
// externalAccess and the plain port open while the CRD lacks the disablePlainPort rule, then
// puts the rule back and waits until a new such cluster is refused.
func clusterBeforePlainPortRule(t *testing.T, name string) *redisv1alpha1.RedisCluster {
	t.Helper()
	ctx := context.Background()
	restoreRule := dropSpecRule(t, "self.tls.disablePlainPort")
	older := validCluster(name)
	older.Finalizers = []string{"example.com/hold"}
	older.Spec.TLS = &redisv1alpha1.TLSSpec{SecretName: "demo-cert"}
	older.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalNodePort, Hostname: "{{pod}}.redis.example.com"}
	retry(t, "create before the rule", func() error { return k8sClient.Create(ctx, older.DeepCopy(), strict) })
	restoreRule()
	probe := older.DeepCopy()
	probe.Name, probe.Finalizers = name+"-probe", nil
	retry(t, "the rule back in force", func() error {
		if err := k8sClient.Create(ctx, probe.DeepCopy(), strict); err == nil {
			_ = k8sClient.Delete(ctx, probe)
			return errString("a new cluster with the plain port open is still accepted")
		}
		return nil
	})
	return older
}

type errString string

func (e errString) Error() string { return string(e) }

// retry runs f until it succeeds (a CRD change takes a moment to reach the handlers).
func retry(t *testing.T, what string, f func() error) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	}); err != nil {
		t.Fatalf("%s: %v", what, last)
	}
}

// dropSpecRule removes the RedisCluster CRD's spec rule containing text, as a CRD made
// before the rule; the returned func puts the CRD back as it was (also at cleanup).
func dropSpecRule(t *testing.T, text string) func() {
	t.Helper()
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(testEnv.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Name: "redisclusters.redis.middleware.hc.cn"}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, key, crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	original := spec.XValidations
	var kept apiextensionsv1.ValidationRules
	for _, r := range original {
		if !strings.Contains(r.Rule, text) {
			kept = append(kept, r)
		}
	}
	if len(kept) != len(original)-1 {
		t.Fatalf("%d spec rules contain %q, want 1", len(original)-len(kept), text)
	}
	set := func(rules apiextensionsv1.ValidationRules) {
		if err := c.Get(ctx, key, crd); err != nil {
			t.Fatal(err)
		}
		s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		s.XValidations = rules
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = s
		if err := c.Update(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	set(kept)
	restored := false
	restore := func() {
		if !restored {
			restored = true
			set(original)
		}
	}
	t.Cleanup(restore)
	return restore
}
