package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// Every pod comes back at once at a new address with its data (nodes.conf kept): the
// reconciler in Running re-meets the nodes, without changing the phase, and the cluster
// is whole again with its keys; the reconcile after that writes nothing to Redis.
func TestRunningClusterHealsAllPodsBackAtNewAddresses(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	cfg := redistest.Config{NodeTimeout: time.Second}
	rc := newCluster(newNamespace(t), 6)
	if err := apiClient.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	h.reconcile(rc)
	h.reconcile(rc)
	servers := redistest.Start(t, 6, cfg)
	startPods(t, rc, servers)
	h.reconcileUntil(rc, redisv1alpha1.PhaseRunning, 20)

	for _, s := range servers {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr})
		err := c.Save(ctx).Err()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	redistest.StopAll(servers)
	var back []*redistest.Server
	for i, s := range servers {
		b, err := redistest.StartIn(s.Dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Stop)
		back = append(back, b)
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name = rc.Namespace, fmt.Sprintf("%s-%d", rc.Name, i)
		if err := apiClient.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	startPods(t, rc, back)
	h.events()
	h.redis.Reset()

	deadline := time.Now().Add(30 * time.Second)
	for {
		h.reconcile(rc)
		got := get(t, rc)
		if got.Status.Phase != redisv1alpha1.PhaseRunning {
			t.Fatalf("phase %s while healing: %s", got.Status.Phase, got.Status.Reason)
		}
		healthy := len(got.Status.Conditions) == 6
		for _, c := range got.Status.Conditions {
			healthy = healthy && c.Status == corev1.ConditionTrue
		}
		if healthy && !strings.Contains(got.Status.Reason, "Healing") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not healed within 30 s: %s; conditions %+v", got.Status.Reason, got.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := h.redis.Count("cluster meet"); n == 0 {
		t.Errorf("healed without a MEET: %v", h.redis.WriteNames())
	}
	if ev := strings.Join(h.events(), "\n"); !strings.Contains(ev, "Meet: Made demo-0 meet demo-1") {
		t.Errorf("events lack the MEETs:\n%s", ev)
	}
	h.reconcile(rc)
	h.redis.Reset()
	h.reconcile(rc)
	if w := h.redis.WriteNames(); len(w) != 0 {
		t.Errorf("a healed cluster got Redis writes: %v", w)
	}
}
