package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// The sample policy that holds the operator's Secret writes to its own (config/policy/
// operator-secret-writes.yaml) is sent to a real API server, and requests are made as the
// operator's ServiceAccount (impersonated): NAME-auth as the operator writes it is
// created and applied again; a Secret of another name or without the owner or labels is
// refused, a Secret someone else made under the name NAME-auth is not taken over by an
// apply that adds the owner, and a delete is refused. Others' writes are not judged.
func TestOperatorSecretWritePolicy(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	const ns = "secret-policy"
	var username string
	installPolicy(ctx, t, ns, "operator-secret-writes.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "ValidatingAdmissionPolicy" {
			conds := o.Object["spec"].(map[string]any)["matchConditions"].([]any)
			expr := conds[0].(map[string]any)["expression"].(string)
			username = strings.Trim(strings.TrimPrefix(expr, "request.userInfo.username == "), "'")
		}
	})
	if !strings.HasPrefix(username, "system:serviceaccount:") {
		t.Fatalf("the policy's matchCondition names %q, want the operator's ServiceAccount", username)
	}
	cfg := rest.CopyConfig(testEnv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: username, Groups: []string{"system:masters", "system:authenticated"}}
	operator, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	rc := validCluster("demo")
	rc.Namespace = ns
	if err := k8sClient.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	// authSecret is NAME-auth as the controller applies it (controller/auth.go writeAuthSecret).
	authSecret := func(name, cluster string) *corev1ac.SecretApplyConfiguration {
		return corev1ac.Secret(name, ns).
			WithLabels(map[string]string{
				redisv1alpha1.LabelName: "redis-cluster", redisv1alpha1.LabelInstance: cluster,
				redisv1alpha1.LabelManagedBy: redisv1alpha1.ManagedBy,
			}).
			WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(redisv1alpha1.GroupVersion.String()).
				WithKind("RedisCluster").WithName(cluster).WithUID(rc.UID).WithController(true).WithBlockOwnerDeletion(true)).
			WithType(corev1.SecretTypeOpaque).
			WithData(map[string][]byte{"password": []byte("pw")})
	}
	apply := func(s *corev1ac.SecretApplyConfiguration) error {
		return operator.Apply(ctx, s, client.FieldOwner(redisv1alpha1.ManagedBy), client.ForceOwnership)
	}

	// The policy takes effect once the API server has loaded it: wait for its first refusal.
	stray := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stray"}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := operator.Create(ctx, stray.DeepCopy())
		if err != nil && strings.Contains(err.Error(), "writes only Secret NAME-auth") {
			break
		}
		if err == nil {
			_ = k8sClient.Delete(ctx, stray.DeepCopy())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy never refused the operator a stray Secret: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	if err := apply(authSecret("demo-auth", "demo")); err != nil {
		t.Fatalf("the operator was refused NAME-auth: %v", err)
	}
	if err := apply(authSecret("demo-auth", "demo").WithData(map[string][]byte{"password": []byte("pw2")})); err != nil {
		t.Fatalf("the operator was refused an apply of its own NAME-auth: %v", err)
	}

	// A store pod's key pair, as the controller writes it (controller/storepod.go
	// writeStoreSecret): owned by the backup, or by the restoring cluster, it is named after.
	storeSecret := func(name, pod, kind, owner string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{redisv1alpha1.LabelName: "redis-backup-store", redisv1alpha1.LabelInstance: pod,
				redisv1alpha1.LabelManagedBy: redisv1alpha1.ManagedBy},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: redisv1alpha1.GroupVersion.String(), Kind: kind, Name: owner,
				UID: rc.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: []byte("c"), corev1.TLSPrivateKeyKey: []byte("k")}}
	}
	for _, sec := range []*corev1.Secret{storeSecret("nightly-backup-store-tls", "nightly-backup-store", "RedisClusterBackup", "nightly"),
		storeSecret("demo-restore-store-tls", "demo-restore-store", "RedisCluster", "demo")} {
		if err := operator.Create(ctx, sec); err != nil {
			t.Fatalf("the operator was refused the store pod's key pair %s: %v", sec.Name, err)
		}
		patch := client.MergeFrom(sec.DeepCopy())
		sec.Data[corev1.TLSCertKey] = []byte("c2")
		if err := operator.Patch(ctx, sec, patch); err != nil {
			t.Fatalf("the operator was refused a new key pair in %s: %v", sec.Name, err)
		}
	}
	unlabelled := storeSecret("weekly-backup-store-tls", "weekly-backup-store", "RedisClusterBackup", "weekly")
	delete(unlabelled.Labels, redisv1alpha1.LabelName)

	// Someone's Secret under the name NAME-auth of another cluster.
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-auth"}, Data: map[string][]byte{"token": []byte("theirs")}}
	if err := k8sClient.Create(ctx, theirs); err != nil {
		t.Fatalf("a user was refused a Secret (the policy judges only the operator): %v", err)
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"another name", apply(authSecret("demo-password", "demo")), "writes only Secret NAME-auth"},
		{"no owner", operator.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-auth",
			Labels: map[string]string{redisv1alpha1.LabelInstance: "web", redisv1alpha1.LabelManagedBy: redisv1alpha1.ManagedBy}}}),
			"writes only Secret NAME-auth"},
		{"taking over someone's Secret", apply(authSecret("shop-auth", "shop")), "does not take over a Secret it does not own"},
		{"delete", operator.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-auth"}}), "never deletes a Secret"},
		{"a key pair named after another backup", operator.Create(ctx, storeSecret("other-backup-store-tls", "other-backup-store", "RedisClusterBackup", "nightly")),
			"writes only Secret NAME-auth"},
		{"a backup's key pair owned by a cluster", operator.Create(ctx, storeSecret("web-backup-store-tls", "web-backup-store", "RedisCluster", "web")),
			"writes only Secret NAME-auth"},
		{"a key pair not labelled as a store's", operator.Create(ctx, unlabelled), "writes only Secret NAME-auth"},
		{"a store's key pair deleted", operator.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly-backup-store-tls"}}), "never deletes a Secret"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: got %v, want a refusal %q", c.name, c.err, c.want)
		}
	}
	got := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(theirs), got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != theirs.ResourceVersion {
		t.Error("someone's Secret shop-auth was changed")
	}
}
