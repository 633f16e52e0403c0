package controller

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// redisPort is the client port of every Redis container (docs/architecture.md).
const redisPort = 6379

// observe fills the scope: the spec's rendering, the Kubernetes objects and pods, and
// Redis' own view. Only reads.
func (r *Reconciler) observe(ctx context.Context, s *scope) error {
	if err := r.observeSpec(ctx, s); err != nil {
		return err
	}
	if err := r.observeKubernetes(ctx, s); err != nil {
		return err
	}
	r.observeRedis(ctx, s)
	return nil
}

// observeSpec reads what the spec refers to (password Secret, user ConfigMap) and renders
// the objects. A problem the user must fix lands in s.specErr, not in the returned error,
// so the cluster keeps serving and the status says what to change.
func (r *Reconciler) observeSpec(ctx context.Context, s *scope) error {
	rc := s.cluster
	if ref := rc.Spec.PasswordSecret; ref != nil {
		secret := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: ref.Name}, secret)
		key := ref.Key
		if key == "" {
			key = "password"
		}
		switch {
		case client.IgnoreNotFound(err) != nil:
			return fmt.Errorf("failed to get Secret %s: %w", ref.Name, err)
		case err != nil:
			s.specErr = fmt.Errorf("spec.passwordSecret.name: Secret %q not found in namespace %s", ref.Name, rc.Namespace)
		case len(secret.Data[key]) == 0:
			s.specErr = fmt.Errorf("spec.passwordSecret.key: Secret %q has no key %q", ref.Name, key)
		default:
			s.password = string(secret.Data[key])
		}
	}
	userConf := ""
	if name := rc.Spec.PodTemplate().ConfigMap; name != "" {
		cm := &corev1.ConfigMap{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: name}, cm)
		switch {
		case client.IgnoreNotFound(err) != nil:
			return fmt.Errorf("failed to get ConfigMap %s: %w", name, err)
		case err != nil:
			s.specErr = fmt.Errorf("spec.pod[0].configmap: ConfigMap %q not found in namespace %s", name, rc.Namespace)
		default:
			userConf = cm.Data["redis.conf"]
		}
	}
	if s.specErr != nil {
		return nil
	}
	objs, err := r.Renderer.Render(rc, userConf)
	if err != nil {
		s.specErr = err
		return nil
	}
	s.rendered = objs
	return nil
}

// observeKubernetes reads the StatefulSet and the pods from the cache and compares the
// rendered objects with what the server holds.
func (r *Reconciler) observeKubernetes(ctx context.Context, s *scope) error {
	rc := s.cluster
	sts := &appsv1.StatefulSet{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: rc.Name}, sts); {
	case err == nil:
		s.statefulSet = sts
	case client.IgnoreNotFound(err) != nil:
		return fmt.Errorf("failed to get StatefulSet %s: %w", rc.Name, err)
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(rc.Namespace), client.MatchingLabels(selectorLabels(rc.Name))); err != nil {
		return fmt.Errorf("failed to list pods of %s: %w", rc.Name, err)
	}
	s.pods = podsByOrdinal(rc.Name, pods.Items)
	s.members = members(s.pods)
	if err := r.compareTemplate(s); err != nil {
		return err
	}
	holdFormedStatefulSet(s)
	for _, desired := range s.rendered {
		setOwner(desired, rc)
		live, err := r.liveObject(ctx, desired)
		if err != nil {
			return err
		}
		if live == nil {
			s.stale = append(s.stale, desired)
			continue
		}
		same, err := ownedFieldsMatch(live, desired)
		if err != nil {
			return err
		}
		if !same {
			s.stale = append(s.stale, desired)
		}
	}
	return nil
}

// compareTemplate sets s.templateChanged when the rendered pod template differs from the
// one last applied, before holdFormedStatefulSet puts the applied one back.
func (r *Reconciler) compareTemplate(s *scope) error {
	if s.statefulSet == nil {
		return nil
	}
	for _, desired := range s.rendered {
		if desired.GetKind() != "StatefulSet" {
			continue
		}
		changed, err := podTemplateDiffers(s.statefulSet, desired)
		if err != nil {
			return err
		}
		s.templateChanged = changed
	}
	return nil
}

// holdFormedStatefulSet keeps a formed cluster's StatefulSet at its applied size (but
// when Scaling out) and, but in Upgrading, its applied pod template. A new template (and the ConfigMap it reads) is applied only by the Upgrading phase,
// which then restarts the pods itself (the StatefulSet is OnDelete), failing each master
// over first; any other phase keeps the template so Running only decides to upgrade.
func holdFormedStatefulSet(s *scope) {
	if !formedOnce(&s.cluster.Status) || s.statefulSet == nil || s.statefulSet.Spec.Replicas == nil {
		return
	}
	upgrading := fsm.Phase(s.cluster.Status.Phase) == fsm.Upgrading
	// Scaling out applies the new size at once (the new pods are met and given slots once
	// they run); scaling in keeps it until the leaving nodes hold nothing and are forgotten
	// (reconcileScale shrinks the StatefulSet then).
	growing := fsm.Phase(s.cluster.Status.Phase) == fsm.Scaling && s.cluster.Spec.Replicas > *s.statefulSet.Spec.Replicas
	owned, err := extractOwned(s.statefulSet)
	if err != nil {
		return
	}
	appliedTemplate, found, _ := unstructured.NestedFieldCopy(owned, "spec", "template")
	kept := s.rendered[:0]
	for _, obj := range s.rendered {
		// The ConfigMap feeds the pod template (its hash is a template annotation): while
		// the template is held, so is the configuration a restarted pod would read.
		if obj.GetKind() == "ConfigMap" && s.templateChanged && !upgrading {
			continue
		}
		kept = append(kept, obj)
	}
	s.rendered = kept
	for _, obj := range s.rendered {
		if obj.GetKind() != "StatefulSet" {
			continue
		}
		if !growing {
			_ = unstructured.SetNestedField(obj.Object, int64(*s.statefulSet.Spec.Replicas), "spec", "replicas")
		}
		if found && !upgrading {
			_ = unstructured.SetNestedField(obj.Object, appliedTemplate, "spec", "template")
		}
	}
}

// podTemplateDiffers reports whether the rendered pod template differs from the applied
// one, as opposed to only the size or another StatefulSet field.
func podTemplateDiffers(live client.Object, desired *unstructured.Unstructured) (bool, error) {
	owned, err := extractOwned(live)
	if err != nil {
		return false, err
	}
	ownedTpl, _, _ := unstructured.NestedFieldNoCopy(owned, "spec", "template")
	desiredMap, err := normalise(desired.Object)
	if err != nil {
		return false, err
	}
	desiredTpl, _, _ := unstructured.NestedFieldNoCopy(desiredMap, "spec", "template")
	return !equalJSON(ownedTpl, desiredTpl), nil
}

// observeRedis reads CLUSTER NODES and CLUSTER INFO from every member. A member that does
// not answer is recorded in the state, not an error.
func (r *Reconciler) observeRedis(ctx context.Context, s *scope) {
	if len(s.members) == 0 {
		return
	}
	f := r.redis.factory(client.ObjectKeyFromObject(s.cluster), s.password)
	addrs := make([]string, len(s.members))
	for i, m := range s.members {
		addrs[i] = m.Addr
	}
	f.Retain(addrs)
	st, err := redis.Observe(ctx, f, s.members)
	if err != nil {
		s.redisErr = err
		return
	}
	s.redis = st
	if fsm.Phase(s.cluster.Status.Phase) == fsm.Upgrading {
		s.replication = observeReplication(ctx, f, st)
	}
}

// observeReplication reads INFO replication from every reachable replica. A replica that
// does not answer is left out, so it is neither a failover target nor counted in sync.
func observeReplication(ctx context.Context, f redis.Factory, st *redis.ClusterState) map[string]redis.Replication {
	out := map[string]redis.Replication{}
	for i := range st.Members {
		m := &st.Members[i]
		if self := m.Self(); self == nil || !self.Replica {
			continue
		}
		if r, err := f.For(m.Addr).Replication(ctx); err == nil {
			out[m.Pod] = r
		}
	}
	return out
}

// podsByOrdinal orders the pods by their StatefulSet ordinal; a gap is a nil entry.
func podsByOrdinal(cluster string, items []corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range items {
		ord, ok := ordinal(cluster, items[i].Name)
		if !ok {
			continue
		}
		for len(out) <= ord {
			out = append(out, nil)
		}
		out[ord] = &items[i]
	}
	return out
}

func ordinal(cluster, pod string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, cluster+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

// members are the pods Redis can be reached on: running, not terminating, with an IP.
func members(pods []*corev1.Pod) []redis.Member {
	var out []redis.Member
	for _, p := range pods {
		if p == nil || p.DeletionTimestamp != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		out = append(out, redis.Member{
			Pod:     p.Name,
			Addr:    net.JoinHostPort(p.Status.PodIP, strconv.Itoa(clientPort(p))),
			K8sNode: p.Spec.NodeName,
		})
	}
	return out
}

// clientPort is the pod's container port named "redis", 6379 when it names none.
func clientPort(p *corev1.Pod) int {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == "redis" {
				return int(port.ContainerPort)
			}
		}
	}
	return redisPort
}

// podReady reports the pod's Ready condition.
func podReady(p *corev1.Pod) bool {
	if p == nil || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
