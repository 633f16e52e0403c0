package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// learnServers fills in what each reachable member runs (INFO server), read once per Redis
// process: the answer is remembered by the pod's UID and the redis container's ID, which a
// restart or a new image changes, so an idle reconcile reads nothing more and an upgraded
// node is read again. Best effort: a node that does not answer stays unknown.
func (r *Reconciler) learnServers(ctx context.Context, f redis.Factory, s *scope, st *topology.ClusterState) {
	known := r.memory(s.cluster).servers
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
	r.memory(s.cluster).servers = next
}

// knownServers are what the cluster's instances said they run (INFO server), as
// learnServers last remembered them: this reconcile's answers when Redis answered, the
// last ones when it did not.
func (r *Reconciler) knownServers(s *scope) []topology.Server {
	known := r.memory(s.cluster).servers
	var out []topology.Server
	for _, srv := range known {
		if srv.Known() {
			out = append(out, srv)
		}
	}
	return out
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

// observeDowngrade refuses a spec whose image would change to a server that cannot read
// the RDB the running instances write (topology.UnreadableRDB): with their data on disk
// the restarted pods would fail to load it, and a replica on the older server could never
// sync from a master on the newer one. Only when the image's name tells the server
// (topology.ImageServer) and the instances said what they run (learnServers, kept across
// a reconcile Redis did not answer); otherwise
// the roll goes on as before. The refused template is no change for the machine to act
// on, as a spec refused before rendering: a Running cluster stays Running on its pods.
func observeDowngrade(s *scope, running []topology.Server) {
	if s.specErr != nil || s.statefulSet == nil {
		return
	}
	applied, rendered := appliedImage(s), renderedImage(s)
	if rendered == "" || rendered == applied {
		return
	}
	target, ok := topology.ImageServer(rendered)
	if !ok {
		return
	}
	why := topology.UnreadableRDB(target, running)
	if why == "" {
		return
	}
	s.specErr = &refusal{reason: ReasonDowngradeRefused, err: fmt.Errorf(
		"%s: %s cannot load the data the instances hold: %s; nothing was restarted and the cluster keeps serving on %s: set it back (going back to the older server takes a new cluster and the keys copied to it)",
		imageField(s, applied), rendered, why, applied)}
	s.templateChanged = false
}

// imageField names the spec field that makes the image.
func imageField(s *scope, applied string) string {
	spec := s.cluster.Spec
	if spec.PodTemplate().MiddlewareImage != "" {
		return "spec.pod[0].middlewareImage"
	}
	if i := strings.LastIndex(applied, ":"); i > strings.LastIndex(applied, "/") && applied[:i] != spec.Repository {
		return "spec.repository and spec.version"
	}
	return "spec.version"
}

// appliedImage is the image of the redis container the StatefulSet holds.
func appliedImage(s *scope) string {
	for _, c := range s.statefulSet.Spec.Template.Spec.Containers {
		if c.Name == "redis" {
			return c.Image
		}
	}
	return ""
}

// renderedImage is the image of the redis container the spec renders.
func renderedImage(s *scope) string {
	for _, obj := range s.rendered {
		if obj.GetKind() != "StatefulSet" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if m, ok := c.(map[string]any); ok && m["name"] == "redis" {
				image, _ := m["image"].(string)
				return image
			}
		}
	}
	return ""
}
