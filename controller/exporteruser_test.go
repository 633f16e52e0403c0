package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// The exporter sidecar gets an ACL user of the operator's making, never the cluster's
// password: with a password and a monitorImage, NAME-auth holds a password of its own
// (exporter-password, not the cluster's) and auth.conf a user operator-exporter with
// redis.ExporterRules, which cannot CONFIG GET masterauth. A NAME-auth written by an
// older operator gains both, keeping its application users; a spec.users entry named
// exporter is an ordinary application user.
func TestOperatorMakesTheExporterUser(t *testing.T) {
	const pw = "cluster-pw"
	isController := true
	for _, c := range []struct {
		name   string
		before map[string][]byte // NAME-auth before, nil for none
	}{
		{"new cluster", nil},
		{"NAME-auth of an older operator", map[string][]byte{
			authPasswordKey: []byte(pw),
			authConfKey: []byte(redis.AuthConf(pw, redis.ClusterUsers(redis.PasswordHash(pw))) +
				redis.User{Name: "app", Hashes: []string{redis.PasswordHash("app-pw")}, Rules: []string{"+get"}}.ConfLine() + "\n"),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "uid-1"}}
			rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "pw", Key: "password"}
			rc.Spec.DisablePassword = false
			rc.Spec.Pod = []redisv1alpha1.RedisPodTemplate{{MonitorImage: "oliver006/redis_exporter:v1.88.0"}}
			rc.Spec.Users = []redisv1alpha1.RedisUser{{Name: "exporter", PasswordSecret: redisv1alpha1.SecretKeyReference{Name: "exp-pw", Key: "password"}, Rules: "+@all ~*"}}
			objs := []client.Object{
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pw"}, Data: map[string][]byte{"password": []byte(pw)}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "exp-pw"}, Data: map[string][]byte{"password": []byte("user-exporter-pw")}},
			}
			if c.before != nil {
				objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-auth",
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "redis.middleware.hc.cn/v1alpha1", Kind: "RedisCluster", Name: "demo", UID: "uid-1", Controller: &isController}}},
					Data: c.before})
			}
			kc := fake.NewClientBuilder().WithScheme(testScheme).WithObjects(objs...).Build()
			r := &Reconciler{Client: kc, APIReader: kc, Recorder: record.NewFakeRecorder(100), redis: newRedisClients(RedisClientOptions{})}
			s := &scope{cluster: rc}
			ctx := context.Background()
			if err := r.observeAuth(ctx, s); err != nil {
				t.Fatal(err)
			}
			if s.specErr != nil {
				t.Fatal(s.specErr)
			}
			if err := r.ensureAuthSecret(ctx, s); err != nil {
				t.Fatal(err)
			}
			sec := &corev1.Secret{}
			if err := kc.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-auth"}, sec); err != nil {
				t.Fatal(err)
			}
			exp := string(sec.Data[authExporterKey])
			if len(exp) < 32 || exp == pw {
				t.Fatalf("exporter-password %q: want a password of its own", exp)
			}
			conf := string(sec.Data[authConfKey])
			want := redis.User{Name: redis.ExporterUser, Hashes: []string{redis.PasswordHash(exp)}, Rules: redis.ExporterRules()}.ConfLine()
			if !strings.Contains(conf, want+"\n") {
				t.Errorf("auth.conf lacks the exporter user %q:\n%s", want, conf)
			}
			for _, rule := range redis.ExporterRules() {
				if strings.Contains(rule, "config") || strings.HasPrefix(rule, "~") || strings.HasPrefix(rule, "%") || strings.HasPrefix(rule, "+@") || rule == "allkeys" || rule == "allcommands" {
					t.Errorf("exporter rule %q may run CONFIG or read keys", rule)
				}
			}
			if c.before != nil && !strings.Contains(conf, "\nuser app ") {
				t.Errorf("auth.conf lost the application user app:\n%s", conf)
			}
			var names []string
			for _, u := range s.auth.users {
				names = append(names, u.Name)
			}
			if strings.Join(names, ",") != "exporter,"+redis.ExporterUser {
				t.Errorf("users applied: %v, want the spec's exporter then %s", names, redis.ExporterUser)
			}
			// A second look reads the password back and writes nothing new.
			s2 := &scope{cluster: rc}
			if err := r.observeAuth(ctx, s2); err != nil {
				t.Fatal(err)
			}
			if s2.auth.exporter != exp || s2.auth.exporterMissing {
				t.Errorf("second look: exporter password %q (missing %v), want %q kept", s2.auth.exporter, s2.auth.exporterMissing, exp)
			}
		})
	}
}
