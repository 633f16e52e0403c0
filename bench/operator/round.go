package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/hc-middleware/redis-cluster-operator/bench/internal/formbench"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

const pods = 6

var redisClusters = schema.GroupVersionResource{Group: "redis.middleware.hc.cn", Version: "v1alpha1", Resource: "redisclusters"}

// operatorResult is one operator round. The issue times from T0, all pods Ready; the
// operator starts forming the cluster as soon as the pods run and Redis answers (before
// the readiness probe's initial delay is over), so the like-for-like point beside
// redis-cli's "processes accept connections" is TUp, all pods running with an address.
type operatorResult struct {
	formbench.Result                  // from T0; 0 when reached before every pod was Ready
	FromUp           formbench.Result // from TUp
	Running          time.Duration    // from T0 until status.phase is Running
	PodsReady        time.Duration    // from the apply to T0, for context
}

// operatorRound applies the sample into a new namespace ns and times the operator forming it,
// then deletes the namespace and waits until its pods are gone.
func operatorRound(ctx context.Context, s *framework.Stack, sample, ns string, poll time.Duration) (operatorResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	obj, err := sampleIn(sample, ns)
	if err != nil {
		return operatorResult{}, err
	}
	deleteNS, err := s.CreateNamespace(ctx, ns)
	if err != nil {
		return operatorResult{}, err
	}
	res, err := measureOperator(ctx, s, obj, ns, poll)
	deleteNS()
	if gerr := waitPodsGone(ctx, s, ns); gerr != nil && err == nil {
		err = gerr
	}
	return res, err
}

// measureOperator watches the pods and the RedisCluster from before the apply, so no
// transition is missed, and takes every time from its own clock.
func measureOperator(ctx context.Context, s *framework.Stack, obj, ns string, poll time.Duration) (operatorResult, error) {
	cs, err := s.Clientset()
	if err != nil {
		return operatorResult{}, fmt.Errorf("failed to create a clientset: %w", err)
	}
	cfg, err := s.RESTConfig()
	if err != nil {
		return operatorResult{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return operatorResult{}, fmt.Errorf("failed to create a dynamic client: %w", err)
	}
	podW, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return operatorResult{}, fmt.Errorf("failed to watch pods in %s: %w", ns, err)
	}
	defer podW.Stop()
	rcW, err := dyn.Resource(redisClusters).Namespace(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return operatorResult{}, fmt.Errorf("failed to watch redisclusters in %s: %w", ns, err)
	}
	defer rcW.Stop()

	if _, err := s.ApplyYAML(ctx, ns, obj); err != nil {
		return operatorResult{}, err
	}
	applied := time.Now()

	seen := map[string]*corev1.Pod{}
	var tUp, t0, running time.Time
	var phase, reason string
	type polled struct {
		ok, agreed time.Time
		err        error
	}
	redisDone := make(chan polled, 1)
	var got *polled
	for got == nil || running.IsZero() || t0.IsZero() {
		select {
		case <-ctx.Done():
			return operatorResult{}, fmt.Errorf("demo in %s not formed: %d/%d pods ready, phase %q (reason %q), redis polled: %v: %w",
				ns, readyCount(seen), pods, phase, reason, got != nil, ctx.Err())
		case ev, open := <-podW.ResultChan():
			if !open || ev.Type == watch.Error {
				return operatorResult{}, fmt.Errorf("failed to watch pods in %s: watch ended (%v)", ns, ev.Object)
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(seen, p.Name)
			} else {
				seen[p.Name] = p
			}
			if tUp.IsZero() && len(seen) == pods && upCount(seen) == pods {
				tUp = time.Now()
				// Poll Redis from TUp on, beside the watches, by pod IP.
				go func(members []topology.Member) {
					ok, agreed, err := formbench.Poll(ctx, members, poll)
					redisDone <- polled{ok, agreed, err}
				}(members(seen))
			}
			if t0.IsZero() && len(seen) == pods && readyCount(seen) == pods {
				t0 = time.Now()
			}
		case ev, open := <-rcW.ResultChan():
			if !open || ev.Type == watch.Error {
				return operatorResult{}, fmt.Errorf("failed to watch redisclusters in %s: watch ended (%v)", ns, ev.Object)
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
			reason, _, _ = unstructured.NestedString(u.Object, "status", "reason")
			if phase == "Running" && running.IsZero() {
				running = time.Now()
			}
			if phase == "Failed" {
				return operatorResult{}, fmt.Errorf("demo in %s is Failed: %s", ns, reason)
			}
		case p := <-redisDone:
			if p.err != nil {
				return operatorResult{}, p.err
			}
			got = &p
		}
	}
	return operatorResult{
		Result:    formbench.Result{OK: max(0, got.ok.Sub(t0)), Agreed: max(0, got.agreed.Sub(t0))},
		FromUp:    formbench.Result{OK: got.ok.Sub(tUp), Agreed: got.agreed.Sub(tUp)},
		Running:   running.Sub(t0),
		PodsReady: t0.Sub(applied),
	}, nil
}

// sampleIn returns the sample RedisCluster as YAML with its namespace set to ns (the sample
// names "default", which ApplyYAML would keep).
func sampleIn(path, ns string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("failed to read the sample: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		return "", fmt.Errorf("failed to parse the sample %s: %w", path, err)
	}
	u.SetNamespace(ns)
	out, err := yaml.Marshal(u.Object)
	if err != nil {
		return "", fmt.Errorf("failed to encode the sample: %w", err)
	}
	return string(out), nil
}

func readyCount(seen map[string]*corev1.Pod) int {
	n := 0
	for _, p := range seen {
		if framework.PodReady(p) {
			n++
		}
	}
	return n
}

// upCount counts the pods that run with an address.
func upCount(seen map[string]*corev1.Pod) int {
	n := 0
	for _, p := range seen {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			n++
		}
	}
	return n
}

// members are the pods by name, reached by pod IP (the devcluster has no Service routing).
func members(seen map[string]*corev1.Pod) []topology.Member {
	var out []topology.Member
	for _, p := range seen {
		out = append(out, topology.Member{Pod: p.Name, Addr: net.JoinHostPort(p.Status.PodIP, "6379")})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out
}

// waitPodsGone waits until the namespace has no pod and no RedisCluster left: the next round
// starts on an idle machine, and the operator, still running, has removed its finalizer, so
// the namespace does not stay Terminating once the operator is stopped.
func waitPodsGone(ctx context.Context, s *framework.Stack, ns string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	cs, err := s.Clientset()
	if err != nil {
		return fmt.Errorf("failed to create a clientset: %w", err)
	}
	cfg, err := s.RESTConfig()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to create a dynamic client: %w", err)
	}
	left := "unknown"
	for {
		podList, perr := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		rcList, rerr := dyn.Resource(redisClusters).Namespace(ns).List(ctx, metav1.ListOptions{})
		if perr == nil && rerr == nil {
			if len(podList.Items) == 0 && len(rcList.Items) == 0 {
				return nil
			}
			left = fmt.Sprintf("%d pods, %d redisclusters", len(podList.Items), len(rcList.Items))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s not emptied (%s left): %w", ns, left, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
