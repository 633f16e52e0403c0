package controller

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// learnServers fills in what each reachable member runs (INFO server), read once per Redis
// process: the answer is remembered by the pod's UID and the redis container's ID, which a
// restart or a new image changes, so an idle reconcile reads nothing more and an upgraded
// node is read again. Best effort: a node that does not answer stays unknown.
func (r *Reconciler) learnServers(ctx context.Context, f redis.Factory, s *scope, st *topology.ClusterState) {
	key := client.ObjectKeyFromObject(s.cluster)
	prev, _ := r.servers.Load(key)
	known, _ := prev.(map[string]topology.Server)
	next := map[string]topology.Server{}
	pods := map[string]*corev1.Pod{}
	for _, p := range s.pods {
		if p != nil {
			pods[p.Name] = p
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range st.Members {
		m := &st.Members[i]
		p := pods[m.Pod]
		if !m.Reachable() || p == nil {
			continue
		}
		id := processID(p)
		if srv, ok := known[id]; ok {
			m.Server = srv
			mu.Lock() // goroutines of earlier members write next too
			next[id] = srv
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv, err := f.For(m.Addr).Server(ctx)
			if err != nil {
				return
			}
			m.Server = srv
			mu.Lock()
			next[id] = srv
			mu.Unlock()
		}()
	}
	wg.Wait()
	r.servers.Store(key, next)
}

// processID names one run of a pod's Redis: the pod's UID and the redis container's ID.
func processID(p *corev1.Pod) string {
	id := string(p.UID)
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "redis" {
			id += "/" + c.ContainerID
		}
	}
	return id
}
