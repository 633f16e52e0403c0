//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// The upgrade suite: a template change on a formed cluster is rolled by the operator, one
// pod at a time, each master failed over to its updated replica before its pod restarts,
// while a client keeps writing.

// writer SETs upg-w-<n> through a cluster client whose slot table is rebuilt from the pods'
// current addresses (restarted pods come back at new ones) until stopped, counting failures.
type writer struct {
	mu     sync.Mutex
	ok     []string
	failed int
	errs   map[string]int
	// maxGap is the longest time between two acknowledged writes.
	maxGap time.Duration
	lastOK time.Time
}

// expectWrote fails the test unless the writer had at least min writes acknowledged: the
// key checks after a resize or a roll read back what it wrote, which is nothing when it
// could not write at all.
func (w *writer) expectWrote(t *testing.T, min int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ok) < min {
		t.Fatalf("the writer had %d writes acknowledged (%d failed: %v), fewer than %d", len(w.ok), w.failed, w.errs, min)
	}
}

func (w *writer) run(ctx context.Context, ns, name string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	// The cluster's own password (none for a disablePassword cluster): a writer whose every
	// write fails on NOAUTH proves nothing (expectWrote).
	password := pw(ctx, ns, name)
	f := redis.NewFactory(redis.Options{Password: password})
	defer f.Close()
	c := goredis.NewClusterClient(&goredis.ClusterOptions{
		Password: password,
		ClusterSlots: func(ctx context.Context) ([]goredis.ClusterSlot, error) {
			addrs, err := stack.PodAddrs(ctx, ns, selectorOf(name))
			if err != nil {
				return nil, err
			}
			return redis.ClusterSlots(ctx, f, addrs)
		},
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
	defer c.Close()
	// Bounded: at most 20 000 writes (about 7 minutes at this pace) even if never stopped.
	for i := 0; i < 20000; i++ {
		select {
		case <-stop:
			return
		default:
		}
		key := fmt.Sprintf("upg-w-%d", i)
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := c.Set(wctx, key, i, 0).Err()
		cancel()
		w.mu.Lock()
		if err != nil {
			w.failed++
			msg := err.Error()
			if len(msg) > 60 {
				msg = msg[:60]
			}
			w.errs[msg]++
		} else {
			w.ok = append(w.ok, key)
			now := time.Now()
			if !w.lastOK.IsZero() && now.Sub(w.lastOK) > w.maxGap {
				w.maxGap = now.Sub(w.lastOK)
			}
			w.lastOK = now
		}
		w.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUpgradeFailsMastersOverBeforeRestart changes the demo sample's MAXMEMORY (a pod
// template change) and expects Upgrading then Running, every pod on the new revision and
// running with the new setting, every key kept, and the failovers reported as events.
func TestUpgradeFailsMastersOverBeforeRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns, name := "e2e-upgrade", "demo"
	formDemo(ctx, t, ns, noPassword(nil))
	writeKeys(ctx, t, ns, name, "upg", upgradeKeys)

	w := &writer{errs: map[string]int{}}
	stop, done := make(chan struct{}), make(chan struct{})
	go w.run(ctx, ns, name, stop, done)
	defer func() {
		select {
		case <-done:
		default:
			close(stop)
			<-done
		}
	}()
	time.Sleep(500 * time.Millisecond)

	start := time.Now()
	// A JSON patch: a merge patch would replace the whole pod list.
	rc := getCluster(ctx, t, ns, name)
	g0 := NewWithT(t)
	g0.Expect(rc.Spec.Pod[0].Env[0].Name).To(Equal("MAXMEMORY"))
	g0.Expect(rc.Spec.Pod[0].Volumes.Type).To(Equal(redisv1alpha1.VolumeTypeHostPath))
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(framework.RedisClusterGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	patch := `[{"op":"replace","path":"/spec/pod/0/env/0/value","value":"32mb"}]`
	g0.Expect(kubeClient(t).Patch(ctx, u, client.RawPatch(types.JSONPatchType, []byte(patch)))).To(Succeed())
	if err := stack.WaitForPhase(ctx, ns, name, "Upgrading", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := stack.WaitForPhase(ctx, ns, name, "Running", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	close(stop)
	<-done

	g := NewWithT(t)
	eventuallyFormed(ctx, t, ns, name)
	sts := &appsv1.StatefulSet{}
	g.Expect(kubeClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	g.Expect(sts.Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteStatefulSetStrategyType))
	pods, err := stack.Pods(ctx, ns, selectorOf(name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(6))
	for _, p := range pods {
		g.Expect(p.Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(sts.Status.UpdateRevision), "revision of %s", p.Name)
		c := framework.NodeClient(p.Status.PodIP, "")
		v, err := c.ConfigGet(ctx, "maxmemory").Result()
		c.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v).To(HaveLen(2))
		g.Expect(v[1]).To(Equal("33554432"), "maxmemory on %s", p.Name)
	}
	w.expectWrote(t, 20)
	expectKeys(ctx, t, ns, name, "upg", upgradeKeys, w.ok)

	evs, err := stack.Events(ctx, getCluster(ctx, t, ns, name))
	g.Expect(err).NotTo(HaveOccurred())
	var failovers, restarts []string
	for _, e := range evs {
		switch {
		case e.Reason == "Upgrade" && strings.HasPrefix(e.Message, "Failing over"):
			failovers = append(failovers, e.Message)
		case e.Reason == "Upgrade" && strings.HasPrefix(e.Message, "Restarting"):
			restarts = append(restarts, e.Message)
		}
	}
	g.Expect(failovers).To(HaveLen(3), "one failover per master")
	g.Expect(failovers).To(HaveEach(HaveSuffix("before its restart")))
	g.Expect(restarts).To(HaveLen(6), "one restart per pod")
	t.Logf("upgrade: Upgrading then Running %.1fs after the patch; writes during it: %d ok, %d failed %v, longest write gap %s",
		took.Seconds(), len(w.ok), w.failed, w.errs, w.maxGap.Round(time.Millisecond))
	t.Logf("events: %v; %v", failovers, restarts)
	g.Expect(getCluster(ctx, t, ns, name).Status.Phase).To(Equal(redisv1alpha1.PhaseRunning))
}

const upgradeKeys = 200
