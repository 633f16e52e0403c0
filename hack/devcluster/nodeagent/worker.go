package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// podState is what the agent keeps on disk per pod so a restarted agent adopts the process.
type podState struct {
	UID          types.UID `json:"uid"`
	IP           string    `json:"ip"`
	PID          int       `json:"pid"`
	StartedAt    time.Time `json:"startedAt"`
	RestartCount int32     `json:"restartCount"`
	EventSent    bool      `json:"eventSent"`
}

// worker runs one pod (one UID) on a node: its process, probes and status.
type worker struct {
	a         *agent
	ns, name  string
	uid       types.UID
	dir       string
	st        podState
	proc      *proc
	lastTerm  *corev1.ContainerStateTerminated
	waiting   *corev1.ContainerStateWaiting
	nextStart time.Time
	backoff   time.Duration
	readiness *prober
	liveness  *prober
	env       []string
	notes     []string
	volumesAt time.Time
	poke      chan struct{}
}

func (a *agent) podDir(pod *corev1.Pod) string {
	return filepath.Join(a.stateDir, "pods", pod.Namespace, pod.Name)
}

func (a *agent) newWorker(pod *corev1.Pod) *worker {
	w := &worker{a: a, ns: pod.Namespace, name: pod.Name, uid: pod.UID, dir: a.podDir(pod), poke: make(chan struct{}, 1)}
	_ = os.MkdirAll(w.dir, 0o755)
	var old podState
	if b, err := os.ReadFile(filepath.Join(w.dir, "state.json")); err == nil && json.Unmarshal(b, &old) == nil {
		if old.UID == pod.UID {
			w.st = old
			if old.IP != "" {
				a.alloc.reserve(old.IP)
			}
			if old.PID > 0 && pidRunsRedis(old.PID) {
				log.Printf("Adopting redis-server pid %d of pod %s/%s", old.PID, w.ns, w.name)
				w.proc = &proc{pid: old.PID, startedAt: old.StartedAt}
			}
		} else if old.PID > 0 && pidRunsRedis(old.PID) {
			// A process of an earlier pod of the same name: it must not outlive its pod.
			(&proc{pid: old.PID}).stop(2 * time.Second)
		}
	}
	w.st.UID = pod.UID
	return w
}

func (w *worker) save() {
	b, _ := json.Marshal(w.st)
	_ = os.WriteFile(filepath.Join(w.dir, "state.json"), b, 0o644)
}

func (w *worker) run(ctx context.Context) {
	defer w.a.forget(w.uid)
	for {
		pod, err := w.a.pods.Pods(w.ns).Get(w.name)
		if err != nil || pod.UID != w.uid {
			// Gone without a graceful deletion (force delete): confirm with the server, then stop.
			live, gerr := w.a.cs.CoreV1().Pods(w.ns).Get(ctx, w.name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) || (gerr == nil && live.UID != w.uid) {
				w.terminate(2 * time.Second)
				return
			}
		} else if pod.DeletionTimestamp != nil {
			grace := time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 30)) * time.Second
			log.Printf("Stopping pod %s/%s (grace %s)", w.ns, w.name, grace)
			w.terminate(grace)
			err := w.a.cs.CoreV1().Pods(w.ns).Delete(ctx, w.name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
				Preconditions: &metav1.Preconditions{UID: &w.uid}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				log.Printf("Failed to finalise deletion of pod %s/%s: %v", w.ns, w.name, err)
			}
			return
		} else if err := w.sync(ctx, pod); err != nil {
			log.Printf("Failed to sync pod %s/%s: %v", w.ns, w.name, err)
		}
		select {
		case <-ctx.Done():
			return // the process keeps running: the next agent adopts it
		case <-w.poke:
		case <-time.After(time.Second):
		}
	}
}

// terminate stops the process and removes what belonged to this pod UID (not the data kept by name).
func (w *worker) terminate(grace time.Duration) {
	if w.proc != nil {
		w.proc.stop(grace)
	}
	if w.st.IP != "" {
		w.a.alloc.release(w.st.IP)
	}
	_ = os.RemoveAll(filepath.Join(w.dir, "uid-"+string(w.uid)))
	_ = os.Remove(filepath.Join(w.dir, "state.json"))
	_ = os.Remove(filepath.Join(w.dir, "redis.pid"))
}

// redisContainer returns the index of the container the agent can run: command redis-server
// (or no command and args starting with redis-server, as the redis image's entrypoint allows).
func redisContainer(pod *corev1.Pod) int {
	for i, c := range pod.Spec.Containers {
		if len(c.Command) > 0 && filepath.Base(c.Command[0]) == "redis-server" {
			return i
		}
		if len(c.Command) == 0 && len(c.Args) > 0 && filepath.Base(c.Args[0]) == "redis-server" {
			return i
		}
	}
	return -1
}

func (w *worker) sync(ctx context.Context, pod *corev1.Pod) error {
	if w.st.IP == "" {
		ip, err := w.a.alloc.allocate()
		if err != nil {
			return err
		}
		w.st.IP = ip
		w.save()
	}
	// The kubelet knows the sandbox address before it starts containers; so does the agent.
	pod = pod.DeepCopy()
	pod.Status.PodIP = w.st.IP
	pod.Status.HostIP = w.a.nodes[pod.Spec.NodeName].HostIP
	idx := redisContainer(pod)
	w.emitNotEmulated(ctx, pod, idx)
	if idx >= 0 {
		w.runContainer(ctx, pod, &pod.Spec.Containers[idx])
	}
	return w.updateStatus(ctx, pod, idx)
}

func (w *worker) runContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container) {
	now := time.Now()
	if w.proc != nil && !w.proc.alive() {
		code := w.proc.exitCode
		reason := "Error"
		if w.proc.done == nil {
			code, reason = 255, "ExitedWhileAdopted"
		} else if code == 0 {
			reason = "Completed"
		}
		w.lastTerm = &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason,
			StartedAt: metav1.NewTime(w.proc.startedAt), FinishedAt: metav1.NewTime(now)}
		log.Printf("Container %s of pod %s/%s exited with %d", c.Name, w.ns, w.name, code)
		w.proc = nil
		w.st.RestartCount++
		w.backoff = min(max(2*w.backoff, time.Second), 10*time.Second)
		w.nextStart = now.Add(w.backoff)
		w.save()
	}
	if w.proc == nil && now.Before(w.nextStart) {
		w.waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: fmt.Sprintf("back-off %s restarting failed container", w.backoff)}
		return
	}
	if w.proc == nil || now.Sub(w.volumesAt) > 10*time.Second {
		mounts, err := w.prepare(ctx, pod, c)
		if err != nil {
			w.waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating", Message: err.Error()}
			if strings.Contains(err.Error(), "env") {
				w.waiting.Reason = "CreateContainerConfigError"
			}
			return
		}
		if w.proc == nil {
			w.start(pod, c, mounts)
		}
	}
	if w.proc != nil {
		w.probe(ctx, pod, c, now)
	}
}

// prepare materialises volumes and resolves env; it returns the mounts of the container.
func (w *worker) prepare(ctx context.Context, pod *corev1.Pod, c *corev1.Container) ([]mount, error) {
	dirs, notes, err := w.a.volumeDirs(ctx, pod)
	if err != nil {
		return nil, err
	}
	w.notes = notes
	vars, err := resolveEnv(ctx, w.a.cs, pod, c)
	if err != nil {
		return nil, fmt.Errorf("failed to resolve env: %w", err)
	}
	lookup := map[string]string{}
	w.env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=" + pod.Name}
	for _, v := range vars {
		lookup[v.Name] = v.Value
		w.env = append(w.env, v.Name+"="+v.Value)
	}
	var mounts []mount
	for _, vm := range c.VolumeMounts {
		src, ok := dirs[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume %s of mount %s is not defined", vm.Name, vm.MountPath)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr, func(k string) (string, bool) { v, ok := lookup[k]; return v, ok })
		}
		if sub != "" {
			src = filepath.Join(src, sub)
			if _, err := os.Stat(src); os.IsNotExist(err) {
				_ = os.MkdirAll(src, 0o755) // the kubelet creates a missing subPath as a directory
			}
		}
		mounts = append(mounts, mount{Src: src, Dst: vm.MountPath, ReadOnly: vm.ReadOnly})
	}
	w.volumesAt = time.Now()
	return mounts, nil
}

func (w *worker) start(pod *corev1.Pod, c *corev1.Container, mounts []mount) {
	lookup := func(k string) (string, bool) {
		for _, e := range w.env {
			if name, v, _ := strings.Cut(e, "="); name == k {
				return v, true
			}
		}
		return "", false
	}
	argv := append(append([]string{}, c.Command...), c.Args...)
	for i := range argv {
		argv[i] = expand(argv[i], lookup)
	}
	argv[0] = "/usr/bin/redis-server"
	workDir := c.WorkingDir
	if workDir == "" {
		workDir = "/"
	}
	p, err := startProcess(w.dir, argv, w.env, mounts, workDir, fmt.Sprintf("starting container %s of pod UID %s on %s", c.Name, pod.UID, w.st.IP))
	if err != nil {
		w.waiting = &corev1.ContainerStateWaiting{Reason: "RunContainerError", Message: err.Error()}
		return
	}
	log.Printf("Started redis-server pid %d for pod %s/%s on %s", p.pid, w.ns, w.name, w.st.IP)
	w.proc, w.waiting = p, nil
	w.readiness, w.liveness = nil, nil
	w.st.PID, w.st.StartedAt = p.pid, p.startedAt
	w.save()
}

func (w *worker) probe(ctx context.Context, pod *corev1.Pod, c *corev1.Container, now time.Time) {
	if c.ReadinessProbe != nil && w.readiness == nil {
		w.readiness = &prober{probe: c.ReadinessProbe}
	}
	if c.LivenessProbe != nil && w.liveness == nil {
		w.liveness = &prober{probe: c.LivenessProbe, passing: true}
	}
	for _, p := range []*prober{w.readiness, w.liveness} {
		if p != nil && p.due(w.proc.startedAt, now) {
			p.record(runProbe(ctx, p.probe, c, w.st.IP, w.proc.pid, w.env), now)
		}
	}
	if w.liveness != nil && !w.liveness.passing {
		log.Printf("Liveness probe of pod %s/%s failed; restarting the container", w.ns, w.name)
		w.proc.stop(time.Duration(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30)) * time.Second)
		w.liveness = nil
	}
}

// ready is the redis container's readiness: its probe, or running when it has none.
func (w *worker) ready() bool {
	if w.proc == nil || !w.proc.alive() {
		return false
	}
	return w.readiness == nil || w.readiness.passing
}

func (w *worker) updateStatus(ctx context.Context, pod *corev1.Pod, idx int) error {
	cur, err := w.a.pods.Pods(w.ns).Get(w.name)
	if err != nil || cur.UID != w.uid {
		return nil
	}
	status := w.buildStatus(pod, idx)
	if equality.Semantic.DeepEqual(cur.Status, status) {
		return nil
	}
	upd := cur.DeepCopy()
	upd.Status = status
	if _, err := w.a.cs.CoreV1().Pods(w.ns).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to update pod status: %w", err)
	}
	return nil
}
