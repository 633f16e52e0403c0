package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	. "github.com/onsi/gomega"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// A slot migration the servers fail (Valkey 9.1, CLUSTER MIGRATESLOTS) is not retried
// silently: a scale-out 6 → 8 whose new masters refuse every import (their default user,
// which the sources' migration links authenticate as, may not run CLUSTER SYNCSLOTS)
// shows each failure as the status reason with a Warning event, then, after
// redis.AtomicMigrationError's three failures of a pair, a SlotMigrationFailed reason and
// Warning event, and starts no more jobs while those failures are recent. Nothing moved,
// nothing is lost, and setting the size back ends the phase at Running with 6 pods.
func TestAtomicMigrationFailureIsReportedAndNotRetried(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cfg := redistest.Config{Binary: redistest.ServerBinary(t, redistest.Image{Name: "valkey 9.1", Archive: "valkey-9.1"})}
	m := startMigrationRunOn(t, cfg, func(rc *redisv1alpha1.RedisCluster) {
		rc.Spec.Repository, rc.Spec.Version = "valkey/valkey", "9.1"
	})
	m.scaleOutTo8(nil)
	ctx := context.Background()
	for _, srv := range m.servers[6:8] {
		c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		err := c.Do(ctx, "acl", "setuser", "default", "-cluster|syncslots").Err()
		c.Close()
		g.Expect(err).NotTo(HaveOccurred())
	}
	m.reconcileInBackground()
	gaveUp := m.waitFor("SlotMigrationFailed", 3*time.Minute, func(rc *redisv1alpha1.RedisCluster) bool {
		return strings.Contains(rc.Status.Reason, "failed 3 times in a row (CLUSTER MIGRATESLOTS)")
	})
	t.Logf("reason: %s", gaveUp.Status.Reason)
	g.Expect(gaveUp.Status.Phase).To(Equal(redisv1alpha1.PhaseScaling))
	g.Expect(gaveUp.Status.Reason).To(ContainSubstring("NOPERM"), "the server's own message")

	// Every pair gives up in turn; from then on the steps start nothing while the
	// failures are recent, however often the controller reconciles.
	jobs := func() int {
		n := 0
		for _, srv := range m.servers[:6] {
			c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
			reply, err := c.Do(ctx, "cluster", "getslotmigrations").Result()
			c.Close()
			g.Expect(err).NotTo(HaveOccurred())
			js, err := redis.ParseSlotMigrations(reply)
			g.Expect(err).NotTo(HaveOccurred())
			n += len(js)
		}
		return n
	}
	g.Eventually(func() int {
		before := jobs()
		time.Sleep(2 * time.Second)
		return jobs() - before
	}, time.Minute, 0).Should(BeZero(), "jobs still started after the pairs gave up")
	events := m.h.events()
	failed, gave := 0, 0
	for _, e := range events {
		if strings.HasPrefix(e, "Warning RedisError") && strings.Contains(e, "slot migration") && strings.Contains(e, "failed") {
			failed++
		}
		if strings.HasPrefix(e, "Warning "+ReasonSlotMigrationFailed) {
			gave++
		}
	}
	t.Logf("%d Warning events for single failures, %d SlotMigrationFailed; %d jobs in the sources' logs", failed, gave, jobs())
	g.Expect(gave).To(BeNumerically(">=", 1), "a SlotMigrationFailed Warning event; events: %v", events)
	g.Expect(failed).To(BeNumerically(">=", 1), "a Warning event for a single failure; events: %v", events)
	g.Expect(get(t, m.rc).Status.Progress.SlotsMoved).To(BeZero())

	// The size set back: the new pods leave, the cluster is Running at 6 with every key.
	update(t, m.rc, func(s *redisv1alpha1.RedisClusterSpec) { s.Replicas = 6 })
	m.waitFor("Running at 6", 3*time.Minute, func(rc *redisv1alpha1.RedisCluster) bool {
		if rc.Status.Phase == redisv1alpha1.PhaseRunning {
			return true
		}
		m.shrunkTo6()
		return false
	})
	m.stopReconciling()
	m.finish("Valkey 9.1, every import refused, then the size set back", 6)
}
