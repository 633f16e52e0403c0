package main

import (
	"context"
	"fmt"
	"log"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/retry"
)

func everything() labels.Selector { return labels.Everything() }

// pickNode chooses a node for a pod: the nodes whose labels satisfy its nodeSelector, the one
// with the fewest pods first (by name on a tie). It returns "" and why when none fits.
// Affinity, taints and resources are not considered (see docs/devcluster.md).
func pickNode(pod *corev1.Pod, nodes []*corev1.Node, load map[string]int) (string, string) {
	var fit []string
	for _, n := range nodes {
		if labels.SelectorFromSet(pod.Spec.NodeSelector).Matches(labels.Set(n.Labels)) {
			fit = append(fit, n.Name)
		}
	}
	if len(fit) == 0 {
		return "", fmt.Sprintf("0/%d nodes are available: %d node(s) didn't match Pod's node affinity/selector %v.", len(nodes), len(nodes), pod.Spec.NodeSelector)
	}
	sort.Slice(fit, func(i, j int) bool {
		if load[fit[i]] != load[fit[j]] {
			return load[fit[i]] < load[fit[j]]
		}
		return fit[i] < fit[j]
	})
	return fit[0], ""
}

// schedule binds pending pods to the agent's nodes, every second, as the default scheduler would.
func schedule(ctx context.Context, cs kubernetes.Interface, pods corelisters.PodLister, nodeLister corelisters.NodeLister) {
	for {
		scheduleOnce(ctx, cs, pods, nodeLister)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func scheduleOnce(ctx context.Context, cs kubernetes.Interface, pods corelisters.PodLister, nodeLister corelisters.NodeLister) {
	nodes, _ := nodeLister.List(labels.SelectorFromSet(labels.Set{agentLabel: "true"}))
	all, _ := pods.List(everything())
	load := map[string]int{}
	for _, p := range all {
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			load[p.Spec.NodeName]++
		}
	}
	// Oldest first, then by name: creation times have a resolution of one second, and the
	// pods of a StatefulSet created in one burst then bind in ordinal order, not at random.
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	for _, p := range all {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		if s := p.Spec.SchedulerName; s != "" && s != corev1.DefaultSchedulerName {
			continue
		}
		name, why := pickNode(p, nodes, load)
		if name == "" {
			markUnschedulable(ctx, cs, p, why)
			continue
		}
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
			Target: corev1.ObjectReference{Kind: "Node", Name: name}}
		if err := cs.CoreV1().Pods(p.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
			log.Printf("Failed to bind pod %s/%s: %v", p.Namespace, p.Name, err)
			continue
		}
		load[name]++
		log.Printf("Bound pod %s/%s to %s", p.Namespace, p.Name, name)
	}
}

func markUnschedulable(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, why string) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == why {
			return
		}
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Phase = corev1.PodPending
		setPodCondition(&cur.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: why})
		_, err = cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !strings.Contains(err.Error(), "not found") {
		log.Printf("Failed to mark pod %s/%s unschedulable: %v", p.Namespace, p.Name, err)
	}
}

// setPodCondition replaces or adds a condition, keeping lastTransitionTime when the status is unchanged.
func setPodCondition(s *corev1.PodStatus, c corev1.PodCondition) {
	now := metav1.Now()
	for i := range s.Conditions {
		if s.Conditions[i].Type == c.Type {
			c.LastTransitionTime = s.Conditions[i].LastTransitionTime
			if s.Conditions[i].Status != c.Status {
				c.LastTransitionTime = now
			}
			s.Conditions[i] = c
			return
		}
	}
	c.LastTransitionTime = now
	s.Conditions = append(s.Conditions, c)
}
