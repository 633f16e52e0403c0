// Command nodeagent is the devcluster's stand-in for the kubelet (and the scheduler): it
// registers Ready Nodes, binds pending pods to them, and runs each pod's redis-server
// container as a real host process on its own loopback address. See docs/devcluster.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

type agent struct {
	cs       kubernetes.Interface
	stateDir string
	nodes    map[string]node
	pods     corelisters.PodLister
	alloc    *allocator

	mu      sync.Mutex
	workers map[types.UID]*worker
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the devcluster")
	stateDir := flag.String("state-dir", ".devcluster", "where pod state, volumes and logs live")
	nodeCount := flag.Int("nodes", 3, "how many nodes to register (devnode-1..N, host IPs 127.1.0.N)")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("Failed to load kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cs := kubernetes.NewForConfigOrDie(cfg)
	dir, _ := filepath.Abs(*stateDir)
	if err := os.MkdirAll(filepath.Join(dir, "agent"), 0o755); err != nil {
		log.Fatalf("Failed to create state dir: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	a := &agent{cs: cs, stateDir: dir, nodes: map[string]node{}, alloc: newAllocator(filepath.Join(dir, "agent", "next-ip")),
		workers: map[types.UID]*worker{}}
	var list []node
	for _, n := range nodeNames(*nodeCount) {
		a.nodes[n.Name] = n
		list = append(list, n)
	}
	if err := ensureStorageClass(ctx, cs); err != nil {
		log.Printf("%v", err)
	}
	factory := informers.NewSharedInformerFactory(cs, 30*time.Second)
	podInformer := factory.Core().V1().Pods()
	a.pods = podInformer.Lister()
	nodeLister := factory.Core().V1().Nodes().Lister()
	pvcLister := factory.Core().V1().PersistentVolumeClaims().Lister()
	poke := make(chan struct{}, 1)
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { nonBlocking(poke) },
		UpdateFunc: func(_, obj any) { a.pokeWorker(obj); nonBlocking(poke) },
		DeleteFunc: func(any) { nonBlocking(poke) },
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	go heartbeat(ctx, cs, list)
	a.sweepOrphans()
	go schedule(ctx, cs, a.pods, nodeLister)
	go provision(ctx, cs, pvcLister, dir)
	log.Printf("Node agent running %d nodes, state in %s", len(list), dir)
	for {
		a.dispatch(ctx)
		select {
		case <-ctx.Done():
			log.Printf("Node agent stopping; redis-server processes keep running and are adopted on restart")
			return
		case <-poke:
		case <-time.After(time.Second):
		}
	}
}

func nonBlocking(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (a *agent) pokeWorker(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		a.mu.Lock()
		w := a.workers[pod.UID]
		a.mu.Unlock()
		if w != nil {
			nonBlocking(w.poke)
		}
	}
}

// dispatch starts a worker for each pod bound to one of our nodes that has none.
func (a *agent) dispatch(ctx context.Context) {
	pods, _ := a.pods.List(everything())
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range pods {
		if _, ours := a.nodes[p.Spec.NodeName]; !ours || a.workers[p.UID] != nil {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		w := a.newWorker(p)
		a.workers[p.UID] = w
		go w.run(ctx)
	}
}

func (a *agent) forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.workers, uid)
}

// sweepOrphans stops processes recorded for pods that no longer exist (deleted while the agent
// was down), so no redis-server outlives its pod.
func (a *agent) sweepOrphans() {
	files, _ := filepath.Glob(filepath.Join(a.stateDir, "pods", "*", "*", "state.json"))
	for _, f := range files {
		var st podState
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &st) != nil {
			continue
		}
		podDir := filepath.Dir(f)
		ns, name := filepath.Base(filepath.Dir(podDir)), filepath.Base(podDir)
		if p, err := a.pods.Pods(ns).Get(name); err == nil && p.UID == st.UID {
			continue
		}
		if st.PID > 0 && pidRunsRedis(st.PID) {
			log.Printf("Stopping orphaned redis-server pid %d of deleted pod %s/%s", st.PID, ns, name)
			(&proc{pid: st.PID}).stop(5 * time.Second)
		}
		_ = os.RemoveAll(filepath.Join(podDir, "uid-"+string(st.UID)))
		_ = os.Remove(f)
		_ = os.Remove(filepath.Join(podDir, "redis.pid"))
	}
}
