package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// Rules the CRD's check let by but Redis reads as a password or on/off rule (upper case,
// a tab, quotes, escapes) are refused when the operator reads the spec: a spec error naming
// spec.users[i].rules (a status reason and a Warning, nothing applied), which never holds
// the password written in the rules.
func TestUsersRulesBypassesAreRefused(t *testing.T) {
	for _, rules := range []string{"+@all ~* NOPASS", "+@all ~*\t>hunter2", `+@all ~* "\x3ehunter2"`, `+@all ~* no"pass"`} {
		rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "uid-1"}}
		rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "pw", Key: "password"}
		rc.Spec.DisablePassword = false
		rc.Spec.Users = []redisv1alpha1.RedisUser{
			{Name: "app", PasswordSecret: redisv1alpha1.SecretKeyReference{Name: "app-pw", Key: "password"}, Rules: "+@read ~*"},
			{Name: "evil", PasswordSecret: redisv1alpha1.SecretKeyReference{Name: "app-pw", Key: "password"}, Rules: rules},
		}
		kc := fake.NewClientBuilder().WithScheme(testScheme).WithObjects(
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pw"}, Data: map[string][]byte{"password": []byte("pw")}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app-pw"}, Data: map[string][]byte{"password": []byte("app")}},
		).Build()
		r := &Reconciler{Client: kc, APIReader: kc, Recorder: record.NewFakeRecorder(100), redis: newRedisClients(RedisClientOptions{})}
		s := &scope{cluster: rc}
		if err := r.observeAuth(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if s.specErr == nil || !strings.HasPrefix(s.specErr.Error(), "spec.users[1].rules: ") {
			t.Errorf("rules %q: spec error %v, want a refusal naming spec.users[1].rules", rules, s.specErr)
			continue
		}
		if refusalReason(s.specErr) != ReasonInvalidSpec || strings.Contains(s.specErr.Error(), "hunter2") {
			t.Errorf("rules %q: refusal %s %q, want InvalidSpec without the password", rules, refusalReason(s.specErr), s.specErr)
		}
	}
}
