package controller

import (
	"context"
	"testing"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// podAuthConf is what a pod includes: the servers start from the file the operator writes
// into NAME-auth, as the pods do.
func podAuthConf(pw string) redistest.Config {
	return redistest.Config{Password: pw, AuthConf: redis.AuthConf(pw, redis.ClusterUsers(redis.PasswordHash(pw)))}
}

func authSecret(t *testing.T, rc *redisv1alpha1.RedisCluster) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := apiClient.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: rc.Name + "-auth"}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func authAs(addr, user, pw string) error {
	c := goredis.NewClient(&goredis.Options{Addr: addr, Username: user, Password: pw, MaxRetries: -1})
	defer c.Close()
	return c.Do(context.Background(), "cluster", "info").Err()
}

// A formed cluster's password Secret changes: the operator adds the new password on every
// instance, switches, sets masterauth, removes the old one and records it all in NAME-auth
// (never in the status, which shows hashes). Then spec.users: bad rules are refused
// naming spec.users[0].rules with nothing changed, good ones applied live, a removed user
// deleted.
func TestPasswordRotationAndUsers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	const oldPW, newPW = "old-pw", "new-pw"
	var secret *corev1.Secret
	rc, servers := formClusterOn(t, h, podAuthConf(oldPW), func(rc *redisv1alpha1.RedisCluster) {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: "pw"},
			Data: map[string][]byte{"password": []byte(oldPW)}}
		g.Expect(apiClient.Create(ctx, secret)).To(Succeed())
		appSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rc.Namespace, Name: "app-pw"},
			Data: map[string][]byte{"password": []byte("app-secret")}}
		g.Expect(apiClient.Create(ctx, appSecret)).To(Succeed())
		rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "pw", Key: "password"}
		rc.Spec.DisablePassword = false
	})
	kc := newKeyClient(t, servers, oldPW)
	keys := writeKeys(t, kc, 300)
	auth := authSecret(t, rc)
	g.Expect(string(auth.Data["password"])).To(Equal(oldPW))
	g.Expect(string(auth.Data["auth.conf"])).To(ContainSubstring("user operator"))
	oldHash := get(t, rc).Status.Auth.PasswordHash
	g.Expect(oldHash).To(HaveLen(16))

	secret.Data["password"] = []byte(newPW)
	g.Expect(apiClient.Update(ctx, secret)).To(Succeed())
	h.reconcile(rc)
	for _, s := range servers {
		g.Expect(authAs(s.Addr, "", newPW)).To(Succeed(), "new password on %s", s.Addr)
		g.Expect(authAs(s.Addr, redis.OperatorUser, newPW)).To(Succeed())
		g.Expect(authAs(s.Addr, "", oldPW)).NotTo(Succeed(), "old password still valid on %s", s.Addr)
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr, Password: newPW})
		ma, err := c.ConfigGet(ctx, "masterauth").Result()
		c.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ma[1]).To(Equal(newPW))
	}
	auth = authSecret(t, rc)
	g.Expect(string(auth.Data["password"])).To(Equal(newPW))
	g.Expect(auth.Data).NotTo(HaveKey("previous-password"))
	g.Expect(string(auth.Data["auth.conf"])).To(ContainSubstring(redis.PasswordHash(newPW)))
	g.Expect(string(auth.Data["auth.conf"])).NotTo(ContainSubstring(redis.PasswordHash(oldPW)))
	st := get(t, rc).Status
	g.Expect(st.Auth.PasswordHash).NotTo(Equal(oldHash))
	g.Expect(st.Auth.PreviousPasswordHash).To(BeEmpty())
	g.Expect(h.events()).To(ContainElement(ContainSubstring("Password rotated")))
	kc = newKeyClient(t, servers, newPW)
	g.Expect(lostKeys(t, kc, keys)).To(BeZero())

	// Bad rules: refused by Redis, named, nothing changed.
	cur := get(t, rc)
	cur.Spec.Users = []redisv1alpha1.RedisUser{{Name: "app", PasswordSecret: redisv1alpha1.SecretKeyReference{Name: "app-pw", Key: "password"}, Rules: "+@read +nosuchcommand ~app:*"}}
	g.Expect(apiClient.Update(ctx, cur)).To(Succeed())
	h.reconcile(rc)
	g.Expect(get(t, rc).Status.Reason).To(ContainSubstring("spec.users[0].rules"))
	g.Expect(warnings(h.events(), ReasonInvalidSpec)).To(ConsistOf(ContainSubstring("spec.users[0].rules")))
	for _, s := range servers {
		g.Expect(authAs(s.Addr, "app", "app-secret")).NotTo(Succeed())
	}

	cur = get(t, rc)
	cur.Spec.Users[0].Rules = "+@read +cluster|info ~app:*"
	g.Expect(apiClient.Update(ctx, cur)).To(Succeed())
	h.reconcile(rc)
	for _, s := range servers {
		g.Expect(authAs(s.Addr, "app", "app-secret")).To(Succeed(), "app user on %s", s.Addr)
	}
	g.Expect(get(t, rc).Status.Auth.Users).To(Equal([]string{"app"}))
	g.Expect(string(authSecret(t, rc).Data["auth.conf"])).To(ContainSubstring("user app "))
	h.redis.Reset()
	h.reconcile(rc)
	g.Expect(h.redis.Writes()).To(BeZero(), "an idle reconcile sends no ACL command")

	cur = get(t, rc)
	cur.Spec.Users = nil
	g.Expect(apiClient.Update(ctx, cur)).To(Succeed())
	h.reconcile(rc)
	for _, s := range servers {
		g.Expect(authAs(s.Addr, "app", "app-secret")).NotTo(Succeed(), "app user left on %s", s.Addr)
	}
	g.Expect(get(t, rc).Status.Auth.Users).To(BeEmpty())
	g.Expect(lostKeys(t, kc, keys)).To(BeZero())
}
