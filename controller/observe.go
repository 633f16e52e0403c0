package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// redisPort is the client port of every Redis container (docs/architecture.md).
const redisPort = 6379

// observe fills the scope with facts: the spec's rendering, the Kubernetes objects and
// pods, and Redis' own view. It only reads: it never looks at the stored phase and never
// edits the rendered objects (decide derives the desired objects from them).
func (r *Reconciler) observe(ctx context.Context, s *scope) error {
	if err := r.observeSpec(ctx, s); err != nil {
		return err
	}
	if err := r.observeKubernetes(ctx, s); err != nil {
		return err
	}
	r.observeRedis(ctx, s)
	r.observeLiveConfig(s)
	return nil
}

// observeSpec reads what the spec refers to (password Secrets, NAME-auth, user ConfigMap) and renders
// the objects. A problem the user must fix lands in s.specErr, not in the returned error,
// so the cluster keeps serving and the status says what to change.
func (r *Reconciler) observeSpec(ctx context.Context, s *scope) error {
	if err := r.observeAuth(ctx, s); err != nil {
		return err
	}
	if err := r.observeTLS(ctx, s); err != nil {
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
	rc := s.cluster
	if s.noPassword == noPasswordLegacy {
		// Rendered as it was formed, without a password, as if spec.disablePassword said so.
		rc = rc.DeepCopy()
		rc.Spec.DisablePassword = true
	}
	objs, err := r.Renderer.Render(rc, userConf)
	if err != nil {
		s.specErr = err
		return nil
	}
	s.rendered = objs
	return nil
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

// observeKubernetes reads the StatefulSet, the pods and the live copy of every rendered
// object from the cache. An object with a rendered name that this
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
	s.appliedSize = appliedSize(s)
	// Pods beyond the applied size (a StatefulSet scaled out by hand, until it is put back)
	// are no members: they are never met, joined or given slots.
	s.members = members(s.pods[:min(len(s.pods), int(s.appliedSize))])
	if err := r.compareTemplate(s); err != nil {
		return err
	}
	s.live = map[string]client.Object{}
	for _, desired := range s.rendered {
		live, err := r.liveObject(ctx, desired)
		if err != nil {
			return err
		}
		if live == nil {
			continue
		}
		if why := notOurs(desired.GetKind(), live, rc); why != "" {
			if desired.GetKind() != "StatefulSet" { // said above
				foreign = append(foreign, why)
			}
			continue
		}
		s.live[objectKey(desired)] = live
	}
	observeExternal(s)
	if len(foreign) > 0 && s.specErr == nil {
		s.specErr = &refusal{reason: ReasonNotOwner, err: errors.New(strings.Join(foreign, "; "))}
	}
	if err := r.observeUnrendered(ctx, s); err != nil {
		return err
	}
	return r.observeNameClashes(ctx, s)
}

// appliedSize is the size the operator last gave the StatefulSet, whatever its live size:
// spec.replicas until the cluster is formed; then the size the operator last applied
// (the server's managed fields say so while the operator owns spec.replicas; once another
// field manager took it, status.statefulSetReplicas remembers). It is a fact about the
// objects; the size the StatefulSet is held at in the decided phase is heldSize's.
func appliedSize(s *scope) int32 {
	rc := s.cluster
	if !formedOnce(&rc.Status) {
		return rc.Spec.Replicas
	}
	live, ours := appliedReplicas(s.statefulSet)
	switch {
	case ours:
		return live
	case rc.Status.StatefulSetReplicas > 0:
		return rc.Status.StatefulSetReplicas
	case s.statefulSet != nil && s.statefulSet.Spec.Replicas != nil:
		// Formed by an operator that kept no record: its live size is all there is.
		return *s.statefulSet.Spec.Replicas
	}
	return rc.Spec.Replicas
}

// compareTemplate sets s.templateChanged when the rendered pod template differs from the
// one last applied.
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

// observeBudget bounds observing Redis in one reconcile: every member is read in
// parallel and each command has its own timeouts (redis.NewFactory), so this only cuts
// short a node that answers slowly command after command. A cluster whose nodes hang
// costs its reconcile this long at most, holding one worker of MaxConcurrentReconciles.
const observeBudget = 5 * time.Second

// observeRedis reads CLUSTER NODES and CLUSTER INFO from every member. A member that does
// not answer is recorded in the state, not an error.
func (r *Reconciler) observeRedis(ctx context.Context, s *scope) {
	if len(s.members) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, observeBudget)
	defer cancel()
	f := r.factoryFor(s)
	addrs := make([]string, len(s.members))
	for i, m := range s.members {
		addrs[i] = m.Addr
	}
	f.Retain(addrs)
	st, err := redis.Observe(ctx, f, s.members)
	if err != nil {
		s.redisErr = err
		// Redis did not answer this time: the servers the instances said they run last
		// time still judge the image, or one slow reconcile would let a refused
		// downgrade through.
		observeDowngrade(s, r.knownServers(s))
		return
	}
	s.redis = st
	// A terminating pod is no member, but the others still see it at its external
	// address; the hand-over looks for it at its pod address.
	aliases := map[string]string{}
	for _, p := range terminatingPods(s) {
		if e, ok := s.external[p.Name]; ok {
			aliases[e.addr()] = net.JoinHostPort(p.Status.PodIP, strconv.Itoa(clientPort(p)))
		}
	}
	st.Internalize(aliases)
	r.learnServers(ctx, f, s, st)
	// Before anything reads templateChanged: a refused image is no change of template.
	observeDowngrade(s, r.knownServers(s))
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
func members(pods []*corev1.Pod) []topology.Member {
	var out []topology.Member
	for _, p := range pods {
		if p == nil || p.DeletionTimestamp != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		out = append(out, topology.Member{
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
