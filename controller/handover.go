package controller

import (
	"context"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// A master's pod deleted by someone else (kubectl delete pod, a node drain's eviction, the
// descheduler) would take its slots offline until Redis' failure detection promotes a
// replica: cluster-node-timeout and an election, seconds without writes on those slots. The
// Redis container's preStop hook (templates/statefulset.cue) holds the pod for a few seconds
// after the deletion; the operator sees the pod terminating and hands over first: a
// CLUSTER FAILOVER on an in-sync replica, which waits for the replica to have every write
// the master acknowledged, then swaps the roles. The container stops as a replica.

// terminatingPods are the cluster's pods that are being deleted and still run.
func terminatingPods(s *scope) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range s.pods {
		if p != nil && p.DeletionTimestamp != nil && p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out
}

// handOver fails over the first terminating master with an in-sync replica; acted says it
// sent a failover or waits for one, which nothing else may disturb.
func (r *Reconciler) handOver(ctx context.Context, s *scope) (acted bool, res ctrl.Result, err error) {
	if s.redis == nil {
		return false, ctrl.Result{}, nil
	}
	if inFlight, why := r.failoverInFlight(s); inFlight {
		s.reason = why
		return true, ctrl.Result{RequeueAfter: requeueFailover}, nil
	}
	for _, p := range terminatingPods(s) {
		port := clientPort(p)
		_, replicas := s.redis.ReplicasOfMasterAt(p.Status.PodIP, port)
		for _, target := range replicas {
			if tp := podNamed(s, target.Pod); tp == nil || tp.DeletionTimestamp != nil || !s.replication[target.Pod].InSync() {
				continue
			}
			m := masterMember(p, port)
			res, err := r.failOver(ctx, s, m, target, ReasonHandOver, "before its pod stops (the pod is being deleted)")
			return true, res, err
		}
	}
	return false, ctrl.Result{}, nil
}

// masterMember is the terminating master as failOver names it: the pod and its address.
func masterMember(p *corev1.Pod, port int) *topology.MemberState {
	return &topology.MemberState{Member: topology.Member{Pod: p.Name, Addr: net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)), K8sNode: p.Spec.NodeName}}
}
