package main

import (
	"context"
	"fmt"
	"log"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const agentLabel = "devcluster.local/node-agent"

// node is one of the Nodes this agent stands in for.
type node struct {
	Name   string
	HostIP string
}

func nodeNames(n int) []node {
	var out []node
	for i := 1; i <= n; i++ {
		out = append(out, node{Name: fmt.Sprintf("devnode-%d", i), HostIP: fmt.Sprintf("127.1.0.%d", i)})
	}
	return out
}

// heartbeat registers the nodes and keeps them Ready: the Lease every 10s, the status with it,
// as a kubelet does, so the control plane never sees them go away.
func heartbeat(ctx context.Context, cs kubernetes.Interface, nodes []node) {
	for {
		for _, n := range nodes {
			if err := syncNode(ctx, cs, n); err != nil {
				log.Printf("Failed to sync node %s: %v", n.Name, err)
			}
			if err := renewLease(ctx, cs, n.Name); err != nil {
				log.Printf("Failed to renew lease of node %s: %v", n.Name, err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}

func syncNode(ctx context.Context, cs kubernetes.Interface, n node) error {
	existing, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{
			"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", agentLabel: "true",
		}}}
		if existing, err = cs.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("failed to create node: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("failed to get node: %w", err)
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("50Gi"),
	}
	existing.Status.Capacity = capacity
	existing.Status.Allocatable = capacity
	existing.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.HostIP}, {Type: corev1.NodeHostName, Address: n.Name}}
	existing.Status.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion: "v1.36.3", OperatingSystem: "linux", Architecture: "amd64",
		ContainerRuntimeVersion: "devcluster-nodeagent://1", OSImage: "devcluster node agent (host redis-server processes)",
	}
	existing.Status.Conditions = []corev1.NodeCondition{
		nodeCondition(existing, corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "devcluster node agent is posting ready status", now),
		nodeCondition(existing, corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "", now),
		nodeCondition(existing, corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "", now),
		nodeCondition(existing, corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "", now),
		nodeCondition(existing, corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated", "loopback", now),
	}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, existing, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("failed to update node status: %w", err)
	}
	return nil
}

// nodeCondition keeps lastTransitionTime when the status did not change.
func nodeCondition(n *corev1.Node, t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string, now metav1.Time) corev1.NodeCondition {
	c := corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	for _, old := range n.Status.Conditions {
		if old.Type == t && old.Status == s {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	return c
}

func renewLease(ctx context.Context, cs kubernetes.Interface, name string) error {
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now}}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}
