package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

const notEmulated = "NotEmulated"

// notEmulatedContainers lists the containers the agent does not run, as "name (image)".
func notEmulatedContainers(pod *corev1.Pod, idx int) []string {
	var out []string
	for _, c := range pod.Spec.InitContainers {
		out = append(out, fmt.Sprintf("init container %s (%s)", c.Name, c.Image))
	}
	for i, c := range pod.Spec.Containers {
		if i != idx {
			out = append(out, fmt.Sprintf("%s (%s)", c.Name, c.Image))
		}
	}
	return out
}

// emitNotEmulated records, once per pod, a Warning event naming the containers the agent does
// not run, so nobody mistakes the devcluster for a full kubelet.
func (w *worker) emitNotEmulated(ctx context.Context, pod *corev1.Pod, idx int) {
	missing := notEmulatedContainers(pod, idx)
	if len(missing) == 0 || w.st.EventSent {
		return
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: pod.Name + "." + rand.String(10), Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Reason:         notEmulated, Type: corev1.EventTypeWarning,
		Message:        "The devcluster node agent runs only redis-server containers; not run: " + strings.Join(missing, ", "),
		Source:         corev1.EventSource{Component: "devcluster-nodeagent", Host: pod.Spec.NodeName},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if _, err := w.a.cs.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		log.Printf("Failed to record event for pod %s/%s: %v", pod.Namespace, pod.Name, err)
		return
	}
	w.st.EventSent = true
	w.save()
}

func notEmulatedStatus(c corev1.Container) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: notEmulated, Message: "the devcluster node agent runs only redis-server containers; image " + c.Image + " is not run"}}}
}

// buildStatus is the pod status from what the worker observed; times are kept stable so an
// unchanged pod is not written again.
func (w *worker) buildStatus(pod *corev1.Pod, idx int) corev1.PodStatus {
	s := *pod.Status.DeepCopy()
	s.HostIP = pod.Status.HostIP
	s.HostIPs = []corev1.HostIP{{IP: s.HostIP}}
	s.PodIP = w.st.IP
	s.PodIPs = []corev1.PodIP{{IP: w.st.IP}}
	if s.StartTime == nil {
		t := metav1.NewTime(time.Now().Truncate(time.Second))
		s.StartTime = &t
	}
	s.QOSClass = corev1.PodQOSBestEffort
	if pod.Status.QOSClass != "" {
		s.QOSClass = pod.Status.QOSClass
	}
	s.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		s.InitContainerStatuses = append(s.InitContainerStatuses, notEmulatedStatus(c))
	}
	s.ContainerStatuses = nil
	running := false
	for i, c := range pod.Spec.Containers {
		if i != idx {
			s.ContainerStatuses = append(s.ContainerStatuses, notEmulatedStatus(c))
			continue
		}
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "devcluster://usr/bin/redis-server",
			RestartCount: w.st.RestartCount, Ready: w.ready()}
		if w.proc != nil && w.proc.alive() {
			running = true
			cs.ContainerID = fmt.Sprintf("devcluster://%d", w.proc.pid)
			cs.Started = ptrBool(true)
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(w.proc.startedAt.Truncate(time.Second))}
		} else {
			cs.Started = ptrBool(false)
			waiting := w.waiting
			if waiting == nil {
				waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
			}
			cs.State.Waiting = waiting
		}
		if w.lastTerm != nil {
			t := *w.lastTerm
			t.StartedAt, t.FinishedAt = metav1.NewTime(t.StartedAt.Truncate(time.Second)), metav1.NewTime(t.FinishedAt.Truncate(time.Second))
			cs.LastTerminationState.Terminated = &t
		}
		s.ContainerStatuses = append(s.ContainerStatuses, cs)
	}
	s.Phase = corev1.PodPending
	if running || w.st.RestartCount > 0 {
		s.Phase = corev1.PodRunning
	}
	missing := notEmulatedContainers(pod, idx)
	note := ""
	if len(missing) > 0 {
		note = "not emulated by the devcluster node agent: " + strings.Join(missing, ", ")
	}
	if w.readiness != nil && w.readiness.unsupported != "" {
		note = strings.TrimPrefix(note+"; readiness probe: "+w.readiness.unsupported+", readiness is the process running", "; ")
	}
	if len(w.notes) > 0 {
		note = strings.TrimPrefix(note+"; "+strings.Join(w.notes, "; "), "; ")
	}
	ready := corev1.ConditionFalse
	reason := "ContainersNotReady"
	if w.ready() {
		ready, reason = corev1.ConditionTrue, ""
	}
	setPodCondition(&s, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
	setPodCondition(&s, corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue})
	setPodCondition(&s, corev1.PodCondition{Type: corev1.ContainersReady, Status: ready, Reason: reason, Message: note})
	setPodCondition(&s, corev1.PodCondition{Type: corev1.PodReady, Status: ready, Reason: reason, Message: note})
	return s
}

func ptrBool(b bool) *bool { return &b }
