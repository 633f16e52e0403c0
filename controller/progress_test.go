package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// progressScope is a scope deciding phase with the stored progress prev.
func progressScope(phase fsm.Phase, prev *redisv1alpha1.OperationProgress, now time.Time) *scope {
	return &scope{cluster: &redisv1alpha1.RedisCluster{}, now: now, decision: fsm.Decision{Phase: phase},
		original: redisv1alpha1.RedisClusterStatus{Progress: prev}}
}

// Steps add up; the total follows the plan left after each migration step, the rate and
// the estimate follow the last step; Running marks it finished and keeps the figures.
func TestProgressAddsStepsAndFinishes(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	s := progressScope(fsm.Scaling, nil, t0)
	p := progressOf(s)
	g.Expect(p.Summary).To(Equal("preparing"))
	g.Expect(p.StartTime.Time).To(Equal(t0))

	s = progressScope(fsm.Scaling, p, t0.Add(3*time.Second))
	s.step = &scaleStep{progress: redis.ScaleProgress{Phase: redis.PhaseMigrating, MovedSlots: 1000, MovedKeys: 20000, Remaining: 3096}, took: 2 * time.Second}
	p = progressOf(s)
	g.Expect(p.SlotsMoved).To(BeEquivalentTo(1000))
	g.Expect(p.SlotsToMove).To(BeEquivalentTo(4096))
	g.Expect(p.KeysPerSecond).To(BeEquivalentTo(10000))
	g.Expect(*p.EstimatedSecondsLeft).To(BeEquivalentTo(6)) // 3096 slots at 500 a second
	g.Expect(p.Summary).To(Equal("1000/4096 slots"))
	g.Expect(milestone(p)).To(Equal(2))

	s = progressScope(fsm.Scaling, p, t0.Add(4*time.Second))
	s.cluster.Spec.Pause = true
	p = progressOf(s)
	g.Expect(p.Summary).To(Equal("paused at 1000/4096 slots"))
	g.Expect(p.StartTime.Time).To(Equal(t0), "the same operation goes on")

	p = progressOf(progressScope(fsm.Running, p, t0.Add(14*time.Second)))
	g.Expect(p.FinishTime).NotTo(BeNil())
	g.Expect(p.Paused).To(BeFalse())
	g.Expect(p.Summary).To(Equal("done in 14s"))
	g.Expect(p.SlotsMoved).To(BeEquivalentTo(1000))
	g.Expect(progressOf(progressScope(fsm.Running, p, t0.Add(time.Hour)))).To(Equal(p), "a finished progress is not written again")

	next := progressOf(progressScope(fsm.Scaling, p, t0.Add(time.Hour)))
	g.Expect(next.SlotsMoved).To(BeZero(), "the next operation starts a new progress")
	g.Expect(next.StartTime).To(Equal(metav1.NewTime(t0.Add(time.Hour))))
}
