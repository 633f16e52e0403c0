package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-redis/redis/v8"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	opredis "github.com/hc-middleware/redis-cluster-operator/redis"
)

// Pods lists the pods matching a label selector (e.g. "app.kubernetes.io/instance=NAME"), by name.
func (s *Stack) Pods(ctx context.Context, ns, selector string) ([]corev1.Pod, error) {
	c, err := s.Client()
	if err != nil {
		return nil, err
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("failed to parse selector %q: %w", selector, err)
	}
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("failed to list pods: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// PodAddrs returns "podIP:6379" of every pod matching selector that has an address.
func (s *Stack) PodAddrs(ctx context.Context, ns, selector string) ([]string, error) {
	pods, err := s.Pods(ctx, ns, selector)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, p := range pods {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			addrs = append(addrs, net.JoinHostPort(p.Status.PodIP, "6379"))
		}
	}
	return addrs, nil
}

// Password is the password of RedisCluster ns/name as a client needs it: Secret
// NAME-auth's key password, which holds the password the instances have (the one the
// operator generated for a cluster without spec.passwordSecret, or spec.passwordSecret's).
// "" when the cluster has no NAME-auth (spec.disablePassword, or a cluster an older
// operator formed without a password).
func (s *Stack) Password(ctx context.Context, ns, name string) (string, error) {
	c, err := s.Client()
	if err != nil {
		return "", err
	}
	sec := &corev1.Secret{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-auth"}, sec); {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", err
	}
	return string(sec.Data["password"]), nil
}

// passwordOf is password, or when it is "" the password of the cluster whose pods
// selector selects (its instance label), as Password reads it.
func (s *Stack) passwordOf(ctx context.Context, ns, selector, password string) (string, error) {
	if password != "" {
		return password, nil
	}
	for _, kv := range strings.Split(selector, ",") {
		if name, ok := strings.CutPrefix(kv, "app.kubernetes.io/instance="); ok {
			return s.Password(ctx, ns, name)
		}
	}
	return "", nil
}

// RedisClient is a cluster-aware go-redis client seeded with the pods' addresses; it
// follows MOVED/ASK to any pod, since every pod address is reachable on loopback. A
// password "" is the cluster's own (Password).
func (s *Stack) RedisClient(ctx context.Context, ns, selector, password string) (*ClusterClient, error) {
	addrs, err := s.PodAddrs(ctx, ns, selector)
	if err != nil {
		return nil, err
	}
	if password, err = s.passwordOf(ctx, ns, selector, password); err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no pod with an address matches %s in %s", selector, ns)
	}
	return NewClusterClient(addrs, password), nil
}

// ClusterClient is a go-redis cluster client with the node clients that build its slot table.
type ClusterClient struct {
	*redis.ClusterClient
	nodes opredis.Factory
}

// Close closes the cluster client and the node clients.
func (c *ClusterClient) Close() error {
	_ = c.nodes.Close()
	return c.ClusterClient.Close()
}

// NewClusterClient is a cluster-aware client seeded with addrs. go-redis v8 cannot parse
// Redis 7's CLUSTER SLOTS reply, so its slot table is built from CLUSTER NODES.
func NewClusterClient(addrs []string, password string) *ClusterClient {
	f := opredis.NewFactory(opredis.Options{Password: password})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: password,
		ClusterSlots: func(ctx context.Context) ([]redis.ClusterSlot, error) { return opredis.ClusterSlots(ctx, f, addrs) }})
	return &ClusterClient{ClusterClient: cc, nodes: f}
}

// NodeClient is a plain client for one pod.
func NodeClient(podIP, password string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: net.JoinHostPort(podIP, "6379"), Password: password})
}

// DeletePod deletes a pod as `kubectl delete pod` does (graceful).
func (s *Stack) DeletePod(ctx context.Context, ns, name string) error {
	cs, err := s.Clientset()
	if err != nil {
		return err
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("failed to delete pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// PodPID is the host PID of a pod's redis-server: the process of its redis container, found
// by the container's ID in the kubelet's cgroups (the container runs in the pod's own PID
// namespace; this is its PID on the host).
func (s *Stack) PodPID(ns, name string) (int, error) {
	cs, err := s.Clientset()
	if err != nil {
		return 0, err
	}
	pod, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("failed to get pod %s/%s: %w", ns, name, err)
	}
	var id string
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == "redis" && c.State.Running != nil {
			_, id, _ = strings.Cut(c.ContainerID, "://")
		}
	}
	if id == "" {
		return 0, fmt.Errorf("pod %s/%s has no running redis container", ns, name)
	}
	pids, err := containerPIDs(id)
	if err != nil {
		return 0, fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	for _, pid := range pids {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(cmdline), "redis-server") {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("pod %s/%s has no running redis-server (container %s, processes %v)", ns, name, id, pids)
}

// RedisServerPIDs are the host PIDs of every redis-server in a pod of the devcluster's nodes,
// read from the kubelets' cgroups without asking the API server.
func RedisServerPIDs() []int {
	var out []int
	matches, _ := filepath.Glob("/sys/fs/cgroup/pids/rcop-*")
	for _, root := range matches {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" || !strings.Contains(path, "/kubepods") {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					continue
				}
				if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.HasPrefix(string(cmdline), "redis-server") {
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// containerPIDs are the processes in the cgroup named after a container ID, which the kubelet
// (cgroupfs driver) makes below the pod's cgroup in every hierarchy; pids is one of them.
func containerPIDs(id string) ([]int, error) {
	const root = "/sys/fs/cgroup/pids"
	var dir string
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == id {
			dir = path
			return filepath.SkipAll
		}
		return nil
	})
	if dir == "" {
		return nil, fmt.Errorf("no cgroup for container %s under %s", id, root)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// KillPodProcess SIGKILLs a pod's redis-server, as a crash would; the kubelet restarts the
// container (restartPolicy Always) in the same pod, on the same address, and counts the restart.
func (s *Stack) KillPodProcess(ns, name string) error {
	pid, err := s.PodPID(ns, name)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("failed to kill redis-server of pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// Events lists the events about an object (matched by UID), oldest first.
func (s *Stack) Events(ctx context.Context, obj client.Object) ([]corev1.Event, error) {
	cs, err := s.Clientset()
	if err != nil {
		return nil, err
	}
	list, err := cs.CoreV1().Events(obj.GetNamespace()).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(obj.GetUID())})
	if err != nil {
		return nil, fmt.Errorf("failed to list events: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) })
	return list.Items, nil
}

// CreateNamespace creates a namespace for one test and returns a func that deletes it.
func (s *Stack) CreateNamespace(ctx context.Context, name string) (func(), error) {
	cs, err := s.Clientset()
	if err != nil {
		return nil, err
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to create namespace %s: %w", name, err)
	}
	return func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) }, nil
}
