package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	goredis "github.com/go-redis/redis/v8"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// A cluster made by an older operator, whose operator user may not run MSET or ACL DRYRUN
// (its NAME-auth and its nodes have the older rules), gets this operator's rules on every
// node and in NAME-auth at the next reconcile of its users, its application users' lines
// kept; the next reconcile changes nothing.
func TestOlderOperatorsUserRulesAreRenewed(t *testing.T) {
	const pw = "cluster-pw"
	hash := redis.PasswordHash(pw)
	older := slices.DeleteFunc(redis.OperatorRules(), func(r string) bool { return r == "+mset" || r == "+acl|dryrun" })
	app := redis.User{Name: "app", Hashes: []string{redis.PasswordHash("app-pw")}, Rules: []string{"+get", "~*"}}.ConfLine()
	conf := redis.AuthConf(pw, []redis.User{
		{Name: redis.DefaultUser, Hashes: []string{hash}, Rules: redis.DefaultRules()},
		{Name: redis.OperatorUser, Hashes: []string{hash}, Rules: older},
	}) + app + "\n"
	servers := redistest.Start(t, 2, redistest.Config{Password: pw, AuthConf: conf})

	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "uid-1"}}
	rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "pw", Key: "password"}
	isController := true
	kc := fake.NewClientBuilder().WithScheme(testScheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pw"}, Data: map[string][]byte{"password": []byte(pw)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-auth",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "redis.middleware.hc.cn/v1alpha1", Kind: "RedisCluster", Name: "demo", UID: "uid-1", Controller: &isController}}},
			Data: map[string][]byte{authPasswordKey: []byte(pw), authConfKey: []byte(conf)}},
	).Build()
	rec := record.NewFakeRecorder(100)
	r := &Reconciler{Client: kc, APIReader: kc, Recorder: rec, redis: newRedisClients(RedisClientOptions{})}
	ctx := context.Background()
	renew := func() {
		t.Helper()
		s := &scope{cluster: rc}
		if err := r.observeAuth(ctx, s); err != nil {
			t.Fatal(err)
		}
		for _, srv := range servers {
			s.members = append(s.members, topology.Member{Addr: srv.Addr})
		}
		if err := r.renewClusterUsers(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	mayMSET := func() bool {
		t.Helper()
		for _, srv := range servers {
			c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, Password: pw})
			ok, err := c.Do(ctx, "ACL", "DRYRUN", redis.OperatorUser, "MSET", "k", "v").Text()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			if ok != "OK" {
				return false
			}
		}
		return true
	}
	if mayMSET() {
		t.Fatal("the older rules already allow MSET")
	}
	renew()
	if !mayMSET() {
		t.Fatal("after the renewal the operator user may still not run MSET")
	}
	sec := &corev1.Secret{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-auth"}, sec); err != nil {
		t.Fatal(err)
	}
	got := string(sec.Data[authConfKey])
	if !strings.HasPrefix(got, redis.AuthConf(pw, redis.ClusterUsers(hash))) || !strings.Contains(got, app+"\n") {
		t.Fatalf("NAME-auth after the renewal:\n%s", got)
	}
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d events, want the renewal's", n)
	}
	<-rec.Events
	renew()
	if n := len(rec.Events); n != 0 {
		t.Fatalf("a second reconcile renewed again: %s", <-rec.Events)
	}
}
