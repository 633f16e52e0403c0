package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
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
	if err := r.observePassword(ctx, s); err != nil {
		return err
	}
	userConf, err := r.observeUserConfig(ctx, s)
	if err != nil {
		return err
	}
	if s.specErr != nil {
		// Nothing is rendered, so nothing is applied: in particular the pods are never
		// re-rendered without the password or configuration the spec names.
		return nil
	}
	objs, err := r.Renderer.Render(s.cluster, userConf)
	if err != nil {
		s.specErr = err
		return nil
	}
	s.rendered = objs
	return nil
}

// observePassword reads the password spec.passwordSecret names. When the Secret or its key
// is missing the operator does not fall back to no password: it keeps the one it last
// used for this cluster (if it has one), renders nothing and says what is missing.
func (r *Reconciler) observePassword(ctx context.Context, s *scope) error {
	rc := s.cluster
	ref := rc.Spec.PasswordSecret
	if ref == nil {
		return nil
	}
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
		s.specErr = fmt.Errorf("spec.passwordSecret.name: Secret %q not found in namespace %s; %s", ref.Name, rc.Namespace, r.keepPassword(s))
	case len(secret.Data[key]) == 0:
		s.specErr = fmt.Errorf("spec.passwordSecret.key: Secret %q has no key %q; %s", ref.Name, key, r.keepPassword(s))
	default:
		s.password = string(secret.Data[key])
	}
	return nil
}

// keepPassword sets s.password to the one the operator last used for this cluster and
// says so, for the reason of a missing password Secret.
func (r *Reconciler) keepPassword(s *scope) string {
	pw, ok := r.redis.lastPassword(client.ObjectKeyFromObject(s.cluster))
	if !ok {
		return "the operator has not read a password for this cluster since it started, and changes nothing until the Secret is back"
	}
	s.password = pw
	return "the operator keeps speaking to Redis with the password it last read and re-renders nothing until the Secret is back"
}

// observeUserConfig reads the redis.conf of the ConfigMap spec.pod[0].configmap names. A
// ConfigMap a RedisCluster renders (this one's NAME-config, or another's) is refused: the
// operator would feed its own output back as the user's input, and overwrite it.
func (r *Reconciler) observeUserConfig(ctx context.Context, s *scope) (string, error) {
	rc := s.cluster
	name := rc.Spec.PodTemplate().ConfigMap
	if name == "" {
		return "", nil
	}
	if name == configMapName(rc.Name) {
		s.specErr = fmt.Errorf("spec.pod[0].configmap: %q is the ConfigMap the operator renders for this RedisCluster (NAME-config); name a ConfigMap of your own", name)
		return "", nil
	}
	cm := &corev1.ConfigMap{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: name}, cm)
	switch {
	case client.IgnoreNotFound(err) != nil:
		return "", fmt.Errorf("failed to get ConfigMap %s: %w", name, err)
	case err != nil:
		s.specErr = fmt.Errorf("spec.pod[0].configmap: ConfigMap %q not found in namespace %s", name, rc.Namespace)
		return "", nil
	}
	if owner := metav1.GetControllerOf(cm); owner != nil && owner.Kind == "RedisCluster" {
		s.specErr = fmt.Errorf("spec.pod[0].configmap: ConfigMap %q is rendered by RedisCluster %s; name a ConfigMap of your own", name, owner.Name)
		return "", nil
	}
	return cm.Data["redis.conf"], nil
}

// observeKubernetes reads the StatefulSet and the pods from the cache and compares the
// rendered objects with what the server holds. An object with a rendered name that this
// RedisCluster does not control is never applied (server-side apply with force would
// take its fields): the spec is refused, naming the object and its owner.
func (r *Reconciler) observeKubernetes(ctx context.Context, s *scope) error {
	rc := s.cluster
	var foreign []string
	sts := &appsv1.StatefulSet{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: rc.Name}, sts); {
	case err == nil:
		if why := notOurs("StatefulSet", sts, rc); why != "" {
			foreign = append(foreign, why)
		} else {
			s.statefulSet = sts
		}
	case client.IgnoreNotFound(err) != nil:
		return fmt.Errorf("failed to get StatefulSet %s: %w", rc.Name, err)
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(rc.Namespace), client.MatchingLabels(redisv1alpha1.SelectorLabels(rc.Name))); err != nil {
		return fmt.Errorf("failed to list pods of %s: %w", rc.Name, err)
	}
	s.pods = podsByOrdinal(rc.Name, pods.Items)
	s.held = heldSize(s)
	// Pods beyond the held size (a StatefulSet scaled out by hand, until it is put back)
	// are no members: they are never met, joined or given slots.
	s.members = members(s.pods[:min(len(s.pods), int(s.held))])
	s.resized = resizedBy(s)
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
		if why := notOurs(desired.GetKind(), live, rc); why != "" {
			if desired.GetKind() != "StatefulSet" { // said above
				foreign = append(foreign, why)
			}
			continue
		}
		same, err := ownedFieldsMatch(live, desired)
		if err != nil {
			return err
		}
		if !same || (desired.GetKind() == "StatefulSet" && s.resized != "") {
			s.stale = append(s.stale, desired)
		}
	}
	if len(foreign) > 0 && s.specErr == nil {
		s.specErr = &refusal{reason: ReasonNotOwner, err: errors.New(strings.Join(foreign, "; "))}
		s.stale = nil
	}
	return r.observeNameClashes(ctx, s)
}

// heldSize is the size the StatefulSet is held at in this phase, whatever its live size:
// spec.replicas until the cluster is formed; then the size the operator last applied
// (the server's managed fields say so while the operator owns spec.replicas; once another
// field manager took it, status.statefulSetReplicas remembers); while Scaling out, the
// new size at once. Scaling in keeps the larger size until reconcileScale shrinks it.
func heldSize(s *scope) int32 {
	rc := s.cluster
	if !formedOnce(&rc.Status) {
		return rc.Spec.Replicas
	}
	held := rc.Spec.Replicas
	live, ours := appliedReplicas(s.statefulSet)
	switch {
	case ours:
		held = live
	case rc.Status.StatefulSetReplicas > 0:
		held = rc.Status.StatefulSetReplicas
	case s.statefulSet != nil && s.statefulSet.Spec.Replicas != nil:
		// Formed by an operator that kept no record: its live size is all there is.
		held = *s.statefulSet.Spec.Replicas
	}
	if fsm.Phase(rc.Status.Phase) == fsm.Scaling && rc.Spec.Replicas > held {
		held = rc.Spec.Replicas
	}
	return held
}

// resizedBy says who resized the StatefulSet away from the held size, "" when nobody
// did: the operator's own resizes keep spec.replicas in its managed fields.
func resizedBy(s *scope) string {
	sts := s.statefulSet
	if sts == nil || sts.Spec.Replicas == nil || *sts.Spec.Replicas == s.held {
		return ""
	}
	if _, ours := appliedReplicas(sts); ours {
		return ""
	}
	by := replicasManager(sts)
	if by == "" {
		by = "another field manager"
	}
	return fmt.Sprintf("StatefulSet %s was resized to %d pods outside the operator (by %s); put back to %d, the size this RedisCluster holds: resize with spec.replicas (kubectl scale rec/%s) instead",
		sts.Name, *sts.Spec.Replicas, by, s.held, s.cluster.Name)
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

// holdFormedStatefulSet keeps the StatefulSet at the held size (heldSize) and a formed
// cluster's, but in Upgrading, at its applied pod template. A new template (and the
// ConfigMap it reads) is applied only by the Upgrading phase, which then restarts the
// pods itself (the StatefulSet is OnDelete), failing each master over first; any other
// phase keeps the template so Running only decides to upgrade.
func holdFormedStatefulSet(s *scope) {
	for _, obj := range s.rendered {
		if obj.GetKind() == "StatefulSet" {
			_ = unstructured.SetNestedField(obj.Object, int64(s.held), "spec", "replicas")
		}
	}
	if !formedOnce(&s.cluster.Status) || s.statefulSet == nil {
		return
	}
	upgrading := fsm.Phase(s.cluster.Status.Phase) == fsm.Upgrading || revertingFailed(s.cluster)
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
		if obj.GetKind() == "StatefulSet" && found && !upgrading {
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
