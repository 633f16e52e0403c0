package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// watched are the resources the operator writes (and events, which it creates): any
// change to one in a fleet namespace during the idle window is an API write. Pods are
// left out: the node agent writes their status.
var watched = []schema.GroupVersionResource{
	{Group: "redis.middleware.hc.cn", Version: "v1alpha1", Resource: "redisclusters"},
	{Group: "apps", Version: "v1", Resource: "statefulsets"},
	{Version: "v1", Resource: "services"},
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "secrets"},
	{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	{Version: "v1", Resource: "events"},
}

// writeWatch records the changes the watches saw.
type writeWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	seen   []string
}

// watchWrites watches every resource of watched cluster-wide from its current resource
// version (so nothing that existed before counts) until stop.
func watchWrites(ctx context.Context, s *framework.Stack) (*writeWatch, error) {
	cfg, err := s.RESTConfig()
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create a dynamic client: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &writeWatch{cancel: cancel}
	for _, gvr := range watched {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("failed to list %s: %w", gvr.Resource, err)
		}
		wi, err := dyn.Resource(gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("failed to watch %s: %w", gvr.Resource, err)
		}
		w.wg.Add(1)
		go w.record(ctx, gvr.Resource, wi)
	}
	return w, nil
}

func (w *writeWatch) record(ctx context.Context, resource string, wi watch.Interface) {
	defer w.wg.Done()
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			if !isObj || ev.Type == watch.Bookmark || !strings.HasPrefix(u.GetNamespace(), "fleet-") {
				continue
			}
			w.mu.Lock()
			w.seen = append(w.seen, describeWrite(resource, u))
			w.mu.Unlock()
		}
	}
}

// describeWrite names a change by what it is and who made it, without the object's
// name: an Event by its reason and reporting component, any other object by the field
// manager of its newest managedFields entry.
func describeWrite(resource string, u *unstructured.Unstructured) string {
	if resource == "events" {
		reason, _, _ := unstructured.NestedString(u.Object, "reason")
		by, _, _ := unstructured.NestedString(u.Object, "source", "component")
		if by == "" {
			by, _, _ = unstructured.NestedString(u.Object, "reportingComponent")
		}
		kind, _, _ := unstructured.NestedString(u.Object, "involvedObject", "kind")
		return fmt.Sprintf("event %s on a %s by %s", reason, kind, by)
	}
	manager := "?"
	var newest time.Time
	for _, m := range u.GetManagedFields() {
		if m.Time != nil && !m.Time.Time.Before(newest) {
			newest, manager = m.Time.Time, m.Manager
		}
	}
	return fmt.Sprintf("%s by %s", resource, manager)
}

// byOperator splits the changes into the operator's (events it reported, objects it
// applied under its field manager, or updated as the binary "manager") and everyone
// else's: on the devcluster, kube-controller-manager's endpoint controllers retry every
// Service's Endpoints, which the API server refuses for the loopback pod IPs.
func byOperator(seen []string) (ours, others []string) {
	for _, s := range seen {
		if strings.HasSuffix(s, " by "+redisv1alpha1.ManagedBy) || strings.HasSuffix(s, " by manager") {
			ours = append(ours, s)
		} else {
			others = append(others, s)
		}
	}
	return ours, others
}

// countWrites groups the changes seen, "what by whom" -> count, most frequent first.
func countWrites(seen []string) string {
	counts := map[string]int{}
	for _, s := range seen {
		counts[s]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return strings.Join(parts, "; ")
}

// stop ends the watches and returns the changes seen.
func (w *writeWatch) stop() []string {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}
