package controller

import (
	"context"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/fsm"
)

// A failed upgrade and its way back.
//
// A pod that does not come up on the new template (crash-looping, unschedulable, its image
// not pulled, or not Ready for longer than notReadyBound) stops the roll: no further pod is
// deleted, the status names the pod and why, and a Warning is emitted once. The pods still
// on the old template keep serving.
//
// The user then fixes the template or sets the spec back. The StatefulSet's update
// revision moves on (back to the old revision, when the spec is set back), and the failing
// pod now runs a revision that is no longer current. The normal roll cannot replace it:
// it restarts one pod at a time and only while the cluster is whole, and the failing pod
// is what keeps the cluster from being whole. So a second rule, the rollback rule, may
// delete a pod while the cluster is not whole, when all of these hold:
//
//  1. the pod runs a revision other than the update revision, so it comes back on the
//     current template, not on the one that failed;
//  2. the pod is failing as above, not merely starting (a pod within its start bound is
//     left to come up by itself);
//  3. deleting it cannot lose data: the pod is not a master holding slots in the view of
//     any member that answers, unless its Redis does not run and its data is persistent
//     (the volume outlives the pod: the delete only restarts a process that cannot start
//     anyway). A master holding slots whose Redis answers is never deleted by this rule
//     (it is failed over first, by the normal roll), nor one whose data is in an
//     emptyDir: Redis' own failover must first promote its replica, after which the node
//     is a replica and rule 3 holds. A pod with no Redis running as a replica, or never
//     scheduled, holds nothing its master does not also hold;
//  4. spec.pod[0].updateStrategy is not OnDelete, and one pod is deleted per reconcile.
//
// The rule leaves every other safeguard in place: pods that are Ready are only ever
// restarted by the normal roll, once the cluster is whole and every replica caught up.
//
// A roll that stays stopped outlives --upgrade-timeout and the cluster goes Failed, which
// starts no operation and holds the pod template. Setting the spec back must still work
// then: once the spec changed since the failure, Failed applies the pod template too
// (revertingFailed) and applies the rollback rule, with the same safeguards; once the
// failing pod is back and the cluster healthy, Failed recovers to Running, which starts
// Upgrading if pods are still on an older revision.

const (
	// crashLoopRestarts is how many restarts of a container mark a pod that is not Ready
	// as crash-looping. One: a container that exited before its pod was ever Ready has
	// failed to start, and counting more would let the report flap between the crash and
	// the short run that follows each back-off. A pod that then becomes Ready is not
	// failing any more, and the roll goes on.
	crashLoopRestarts = 1
	// notReadyBound is how long a pod may stay not Ready before it counts as failing. A
	// Redis pod is Ready once redis-server listens, seconds after it starts (it listens
	// before it loads its data), so two minutes covers a slow image pull and volume mount.
	notReadyBound = 2 * time.Minute
)

// failingWaits are container waiting reasons that do not clear by themselves.
var failingWaits = map[string]string{
	"ErrImagePull":               "cannot pull its image",
	"ImagePullBackOff":           "cannot pull its image",
	"InvalidImageName":           "has an invalid image name",
	"CreateContainerConfigError": "cannot create its container (CreateContainerConfigError)",
	"CreateContainerError":       "cannot create its container (CreateContainerError)",
	"RunContainerError":          "cannot run its container (RunContainerError)",
}

// failingPod returns the first pod, in ordinal order, that is failing and runs the
// revision rev (onRev) or another one (!onRev), with why in words.
func failingPod(s *scope, rev string, onRev bool) (*corev1.Pod, string) {
	for _, p := range s.pods {
		if p == nil || (podRevision(p) == rev) != onRev {
			continue
		}
		if why := podFailure(p, s.now); why != "" {
			return p, why
		}
	}
	return nil, ""
}

// podFailure says why a pod does not come up, "" when it is Ready, going away, or still
// within its start bound. The words stay the same while the cause does (no restart
// count, no back-off time), so the Warning naming them is emitted once.
func podFailure(p *corev1.Pod, now time.Time) string {
	if p == nil || p.DeletionTimestamp != nil || podReady(p) {
		return ""
	}
	if c := podCondition(p, corev1.PodScheduled); p.Status.Phase == corev1.PodPending && c != nil &&
		c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
		return "is Pending: it cannot be scheduled (" + c.Message + ")"
	}
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		w := cs.State.Waiting
		if (w != nil && w.Reason == "CrashLoopBackOff") || cs.RestartCount >= crashLoopRestarts {
			return fmt.Sprintf("is crash-looping (container %s%s)", cs.Name, lastExit(cs))
		}
		if w != nil && failingWaits[w.Reason] != "" {
			return fmt.Sprintf("%s (container %s)", failingWaits[w.Reason], cs.Name)
		}
	}
	since := p.CreationTimestamp.Time
	if c := podCondition(p, corev1.PodReady); c != nil && c.LastTransitionTime.After(since) {
		since = c.LastTransitionTime.Time
	}
	if !since.IsZero() && now.Sub(since) > notReadyBound {
		return fmt.Sprintf("has not been Ready for more than %s", notReadyBound)
	}
	return ""
}

func lastExit(cs corev1.ContainerStatus) string {
	if t := cs.LastTerminationState.Terminated; t != nil {
		return ", last exit code " + strconv.Itoa(int(t.ExitCode))
	}
	return ""
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// rollBackFailingPod applies the rollback rule: it deletes one failing pod on a revision
// that is no longer current, when that cannot lose data. done is true when it deleted a
// pod, or found one it must not delete yet (the reason says which and why).
func (r *Reconciler) rollBackFailingPod(ctx context.Context, s *scope, rev string) (ctrl.Result, bool, error) {
	pod, why := failingPod(s, rev, false)
	if pod == nil {
		return ctrl.Result{}, false, nil
	}
	if unsafe := rollbackUnsafe(s, pod); unsafe != "" {
		s.reason = fmt.Sprintf("Pod %s %s on an outdated revision; it is not replaced yet: %s", pod.Name, why, unsafe)
		return ctrl.Result{RequeueAfter: requeueWaiting}, true, nil
	}
	log.FromContext(ctx).Info("Deleting Pod", "Pod", klog.KObj(pod), "reason", "rollback: failing on an outdated revision")
	if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, true, fmt.Errorf("failed to delete pod %s: %w", pod.Name, err)
	}
	r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonUpgrade,
		"Replacing %s, which %s on an outdated revision, with a pod on the current template", pod.Name, why)
	s.reason = fmt.Sprintf("Replacing %s, which %s on an outdated revision", pod.Name, why)
	return ctrl.Result{RequeueAfter: requeueWaiting}, true, nil
}

// rollbackUnsafe says why deleting the pod could lose data (rule 3 above); "" when it
// cannot. The pod's Redis node is found by the pod's address in the views of the members
// that answer, and by the pod's own view when it answers.
func rollbackUnsafe(s *scope, pod *corev1.Pod) string {
	if pod.Status.PodIP == "" || s.redis == nil {
		// Never started (Pending): no Redis ever ran in it, so it holds nothing. Without
		// any observation of Redis, only such a pod is safe.
		if pod.Status.PodIP == "" {
			return ""
		}
		return "Redis could not be observed"
	}
	answers := false
	for i := range s.redis.Members {
		if m := &s.redis.Members[i]; m.Pod == pod.Name && m.Reachable() {
			answers = true
		}
	}
	slots := s.redis.SlotsHeldAt(pod.Status.PodIP, clientPort(pod))
	switch {
	case slots.Count() == 0:
		return ""
	case answers:
		return fmt.Sprintf("its Redis answers as a master holding slots %s", slots)
	case !persistentData(s.cluster):
		return fmt.Sprintf("it is a master holding slots %s and its data is in an emptyDir; waiting for Redis to fail them over to its replica", slots)
	}
	return ""
}

// revertingFailed reports whether a formed cluster is Failed and its spec was changed
// since the failure: the pod template is then applied (holdFormedStatefulSet), so a spec
// set back after a failed upgrade reaches the StatefulSet and the rollback rule can
// replace the pods that fail on the template that failed.
func revertingFailed(rc *redisv1alpha1.RedisCluster) bool {
	return fsm.Phase(rc.Status.Phase) == fsm.Failed && formedOnce(&rc.Status) && specChangedSinceFailure(rc)
}

// rollBackFromFailed applies the rollback rule in Failed once the spec was changed since
// the failure; done as rollBackFailingPod's.
func (r *Reconciler) rollBackFromFailed(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if !revertingFailed(s.cluster) || s.cluster.Spec.PodTemplate().UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return ctrl.Result{}, false, nil
	}
	rev, ok := updateRevision(s)
	if !ok {
		return ctrl.Result{}, false, nil
	}
	return r.rollBackFailingPod(ctx, s, rev)
}
