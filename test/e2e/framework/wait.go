package framework

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RedisClusterGVK is the operator's custom resource, read as unstructured.
var RedisClusterGVK = schema.GroupVersionKind{Group: "redis.middleware.hc.cn", Version: "v1alpha1", Kind: "RedisCluster"}

// GetRedisCluster reads a RedisCluster as unstructured.
func (s *Stack) GetRedisCluster(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	c, err := s.Client()
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(RedisClusterGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return nil, fmt.Errorf("failed to get rediscluster %s/%s: %w", ns, name, err)
	}
	return u, nil
}

// WaitForPhase polls .status.phase of a RedisCluster until it equals phase; on timeout the
// error says the last phase and reason seen.
func (s *Stack) WaitForPhase(ctx context.Context, ns, name, phase string, timeout time.Duration) error {
	return s.waitForPhase(ctx, ns, name, phase, false, timeout)
}

// WaitForObservedPhase waits until the RedisCluster is in phase having acted on its
// current spec (status.observedGeneration equal to metadata.generation). After a spec
// change this is the phase the change led to, however briefly the phases in between
// lasted: a scale-in of a few hundred keys can be Scaling for less than one poll.
func (s *Stack) WaitForObservedPhase(ctx context.Context, ns, name, phase string, timeout time.Duration) error {
	return s.waitForPhase(ctx, ns, name, phase, true, timeout)
}

func (s *Stack) waitForPhase(ctx context.Context, ns, name, phase string, observed bool, timeout time.Duration) error {
	var last, reason string
	var gen, seen int64
	err := poll(ctx, timeout, func() (bool, error) {
		u, err := s.GetRedisCluster(ctx, ns, name)
		if err != nil {
			return false, nil
		}
		last, _, _ = unstructured.NestedString(u.Object, "status", "phase")
		reason, _, _ = unstructured.NestedString(u.Object, "status", "reason")
		seen, _, _ = unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		gen = u.GetGeneration()
		return last == phase && (!observed || seen == gen), nil
	})
	switch {
	case err != nil && observed:
		return fmt.Errorf("rediscluster %s/%s not in phase %s with generation %d observed after %s (phase %q, observed %d, reason %q): %w",
			ns, name, phase, gen, timeout, last, seen, reason, err)
	case err != nil:
		return fmt.Errorf("rediscluster %s/%s not in phase %s after %s (phase %q, reason %q): %w", ns, name, phase, timeout, last, reason, err)
	}
	return nil
}

// WaitForPodsReady waits until count pods match selector and all are Ready.
func (s *Stack) WaitForPodsReady(ctx context.Context, ns, selector string, count int, timeout time.Duration) error {
	var seen string
	err := poll(ctx, timeout, func() (bool, error) {
		pods, err := s.Pods(ctx, ns, selector)
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, p := range pods {
			if PodReady(&p) {
				ready++
			}
		}
		seen = fmt.Sprintf("%d pods, %d ready", len(pods), ready)
		return len(pods) == count && ready == count, nil
	})
	if err != nil {
		return fmt.Errorf("pods %s in %s not ready after %s (%s): %w", selector, ns, timeout, seen, err)
	}
	return nil
}

// PodReady reports whether a pod (not being deleted) has Ready=True.
func PodReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// poll calls cond every 500ms until it returns true, an error, or the timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// NodeReady reports whether a node has Ready=True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
