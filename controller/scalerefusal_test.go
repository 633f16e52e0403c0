package controller

import (
	"fmt"
	"strings"
	"testing"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Each refusal redis/ reports in its own terms is worded with the CR field to change.
func TestScaleRefusalNamesTheField(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{Spec: redisv1alpha1.RedisClusterSpec{Replicas: 6}}
	wrap := func(err error) error { return fmt.Errorf("%w: %w", topology.ErrRefused, err) }
	cases := []struct {
		err              error
		current, desired int
		reason           string
		want             []string
	}{
		{wrap(&topology.AssignError{Index: 2, Field: "fromReplicas", Problem: `"x" is not an existing master`}), 8, 8, ReasonInvalidSpec,
			[]string{`spec.updateStrategy.assignStrategies[2].fromReplicas: "x" is not an existing master`, "nothing moved"}},
		{wrap(&topology.AssignError{Index: -1, Problem: "5 entries, but this scale-out adds 1 masters"}), 8, 8, ReasonInvalidSpec,
			[]string{"spec.updateStrategy.assignStrategies: 5 entries"}},
		{&topology.CapacityError{Pod: "demo-0", Projected: 10 << 20, MaxMemory: 10 << 20, Limit: 8 << 20, Dataset: 24 << 20, KeptMaxMemory: 30 << 20, Masters: 3}, 8, 6, ReasonRedisError,
			[]string{"spec.replicas: 6 instances (3 masters) cannot hold the data", "demo-0 would use 10.0 MiB of its maxmemory 10.0 MiB (at most 8.0 MiB)", "keeps serving at 8 instances"}},
		{wrap(&redis.KeysError{Pod: "demo-6", Addr: "10.0.0.7:6379", Keys: 500}), 8, 8, ReasonRedisError,
			[]string{"pod demo-6 (10.0.0.7:6379) holds 500 keys"}},
	}
	for _, c := range cases {
		reason, msg := scaleRefusal(rc, c.err, c.current, c.desired)
		if reason != c.reason {
			t.Errorf("%v: reason %s, want %s", c.err, reason, c.reason)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("message %q lacks %q", msg, w)
			}
		}
	}
}

// A pair whose migrations the servers failed is worded with its pods, the count, the
// server's own message and when the operator tries again.
func TestAtomicFailedReasonNamesThePods(t *testing.T) {
	members := []topology.Member{{Pod: "demo-0", Addr: "10.0.0.1:6379"}, {Pod: "demo-6", Addr: "10.0.0.7:6379"}}
	got := atomicFailedReason(members, &redis.AtomicMigrationError{Source: "10.0.0.1:6379", Target: "10.0.0.7:6379", Failures: 3,
		Message: "Ran out of memory (OOM) during slot import"})
	for _, want := range []string{"from demo-0 to demo-6", "failed 3 times", "CLUSTER MIGRATESLOTS", "Ran out of memory (OOM) during slot import",
		"next try in " + redis.AtomicRetryAfter.String()} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}
