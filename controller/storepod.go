package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
)

// A PersistentVolumeClaim destination is served by a store pod: the operator's own image
// running `manager backup-store` with the claim mounted at /backup (redis/backup's
// StoreHandler over a Dir), which the operator reaches over HTTP with a token of the
// pod's own. The token lives in the operator's memory only (storeTokens); the pod's spec
// holds its SHA-256, which lets no one in, so no Secret is written for it. After an
// operator restart the token is new and the pod is replaced. The cut, the upload, the manifest, the restore and the deletion of
// the objects are the operator's, exactly as for S3: only the Store differs. The pod is
// owned by what uses it (the backup, or the restoring cluster) and deleted once done.

// storeBindTimeout is how long a store pod may wait for its claim or its start before
// the reason says what is wrong (PVCNotBound, StorePodNotReady).
const storeBindTimeout = 2 * time.Minute

// storeUID is the store pod's user and group: distroless's nonroot, as the operator's image.
const storeUID = 65532

// +kubebuilder:rbac:groups="",resources=pods,verbs=create
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get
// A backup's store pod is owned by the backup with blockOwnerDeletion, which the
// OwnerReferencesPermissionEnforcement admission plugin (on in OpenShift) allows only
// with update on the owner's finalizers (redisclusters/finalizers is reconciler.go's).
// +kubebuilder:rbac:groups=redis.middleware.hc.cn,resources=redisclusterbackups/finalizers,verbs=update

// storePod is a client of the ready store pod name for d's claim, created (with its token
// Secret, both owned by owner) if missing; a reason not empty says why it is not usable
// yet, naming the field.
func (r *Reconciler) storePod(ctx context.Context, owner client.Object, name string, d destination) (backup.Store, string, string, error) {
	ns, claim, field := owner.GetNamespace(), d.pvc.ClaimName, d.field+".claimName"
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, ReasonPVCNotFound, fmt.Sprintf("%s: no PersistentVolumeClaim %q in namespace %s", field, claim, ns), nil
		}
		return nil, "", "", err
	}
	if pvc.DeletionTimestamp != nil {
		return nil, ReasonPVCNotFound, fmt.Sprintf("%s: PersistentVolumeClaim %q in namespace %s is being deleted", field, claim, ns), nil
	}
	image, err := r.storeImage(ctx)
	if err != nil || image == "" {
		return nil, ReasonStoreImageUnset, fmt.Sprintf("%s: the operator does not know its image to run the store pod with (--backup-store-image, or its own pod's): %v", field, err), nil
	}
	if reason, msg, err := r.ensureStorePolicy(ctx, owner, name, field); err != nil || reason != "" {
		return nil, reason, msg, err
	}
	token := r.storeTokens.token(ns, name)
	pod := &corev1.Pod{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); client.IgnoreNotFound(err) != nil {
		return nil, "", "", err
	} else if err == nil && !metav1.IsControlledBy(pod, owner) {
		return nil, ReasonStorePodRefused, fmt.Sprintf("%s: a pod named %s exists that the operator did not create for %s; rename or delete it", field, name, owner.GetName()), nil
	} else if err == nil && (podDigest(pod) != backup.TokenDigest(token) || podEnded(pod)) {
		// Made before the operator restarted (another token), or ended: replaced.
		uid := pod.UID
		if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return nil, "", "", err
		}
		return nil, ReasonStoreStarting, fmt.Sprintf("store pod %s replaced (a new token, or it had ended)", name), nil
	} else if err != nil {
		pod = storePodSpec(ns, name, claim, image, backup.TokenDigest(token))
		if err := controllerutil.SetControllerReference(owner, pod, r.Client.Scheme()); err != nil {
			return nil, "", "", err
		}
		if err := r.Client.Create(ctx, pod); apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			// Pod Security admission, a quota, a LimitRange: said in the status, looked at again.
			return nil, ReasonStorePodRefused, fmt.Sprintf("%s: the store pod %s that mounts PersistentVolumeClaim %s was refused: %v", field, name, claim, err), nil
		} else if client.IgnoreAlreadyExists(err) != nil {
			return nil, "", "", fmt.Errorf("creating the store pod %s: %w", name, err)
		}
		return nil, ReasonStoreStarting, fmt.Sprintf("store pod %s created to mount PersistentVolumeClaim %s", name, claim), nil
	}
	if podReady(pod) && pod.Status.PodIP != "" {
		url := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(backup.StorePort))
		return &backup.Remote{URL: url, Token: token, Claim: "PersistentVolumeClaim " + claim}, "", "", nil
	}
	return nil, storeNotReady(pod, pvc), storeNotReadyMessage(pod, pvc, field), nil
}

// storeNotReady is the reason a store pod that exists is not ready: its claim not Bound,
// or the pod itself failing, once storeBindTimeout has passed; starting before.
func storeNotReady(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) string {
	switch {
	case time.Since(pod.CreationTimestamp.Time) < storeBindTimeout:
		return ReasonStoreStarting
	case pvc.Status.Phase != corev1.ClaimBound:
		return ReasonPVCNotBound
	}
	return ReasonStorePodNotReady
}

func storeNotReadyMessage(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim, field string) string {
	age := time.Since(pod.CreationTimestamp.Time).Round(time.Second)
	why := string(pod.Status.Phase)
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Waiting != nil && c.State.Waiting.Reason != "" {
			why += ", " + c.State.Waiting.Reason + ": " + c.State.Waiting.Message
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue && c.Message != "" {
			why += ", " + c.Message
		}
	}
	return fmt.Sprintf("%s: PersistentVolumeClaim %s is %s; its store pod %s is not ready after %v (%s)",
		field, pvc.Name, pvcPhase(pvc), pod.Name, age, why)
}

func pvcPhase(pvc *corev1.PersistentVolumeClaim) string {
	if pvc.Status.Phase == "" {
		return string(corev1.ClaimPending)
	}
	return string(pvc.Status.Phase)
}

// storeTokens are the store pods' tokens, by namespace/name, in memory only.
type storeTokens struct {
	mu     sync.Mutex
	tokens map[string]string
}

// token is pod ns/name's token, a new random one the first time.
func (t *storeTokens) token(ns, name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tokens == nil {
		t.tokens = map[string]string{}
	}
	key := ns + "/" + name
	if t.tokens[key] == "" {
		raw := make([]byte, 32)
		_, _ = rand.Read(raw)
		t.tokens[key] = hex.EncodeToString(raw)
	}
	return t.tokens[key]
}

func (t *storeTokens) forget(ns, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.tokens, ns+"/"+name)
}

// podDigest is the token digest a store pod was given.
func podDigest(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == backup.StoreTokenEnv {
				return e.Value
			}
		}
	}
	return ""
}

func podEnded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// releaseStore deletes the store pod name, then its NetworkPolicy, if they are the
// operator's (their labels: a user's object of that name is left alone), and forgets its
// token. The pod stops listening once told to stop, so the policy going right after it
// opens nothing that still serves.
func (r *Reconciler) releaseStore(ctx context.Context, ns, name string) error {
	r.storeTokens.forget(ns, name)
	for _, obj := range []client.Object{&corev1.Pod{}, &networkingv1.NetworkPolicy{}} {
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			continue
		}
		if !hasLabels(obj, storeLabels()) {
			continue
		}
		uid := obj.GetUID()
		if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// hasLabels tells whether obj carries every label of want.
func hasLabels(obj client.Object, want map[string]string) bool {
	for k, v := range want {
		if obj.GetLabels()[k] != v {
			return false
		}
	}
	return true
}

// storeImage is the image store pods run: --backup-store-image, else the operator's own
// pod's (POD_NAME and POD_NAMESPACE, set by the Downward API), looked up once.
func (r *Reconciler) storeImage(ctx context.Context) (string, error) {
	r.ownImage.Lock()
	defer r.ownImage.Unlock()
	if r.Options.StoreImage != "" {
		return r.Options.StoreImage, nil
	}
	name, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if name == "" || ns == "" {
		return "", fmt.Errorf("not running in a pod (POD_NAME, POD_NAMESPACE unset)")
	}
	own := &corev1.Pod{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, own); err != nil {
		return "", err
	}
	r.Options.StoreImage = own.Spec.Containers[0].Image
	return r.Options.StoreImage, nil
}

// storeLabels mark the store pods and their NetworkPolicies as the operator's.
func storeLabels() map[string]string {
	return map[string]string{redisv1alpha1.LabelName: "redis-backup-store", redisv1alpha1.LabelManagedBy: redisv1alpha1.ManagedBy}
}

// storePodLabels are store pod name's: storeLabels and its own name as instance, which
// its NetworkPolicy selects it by.
func storePodLabels(name string) map[string]string {
	labels := storeLabels()
	labels[redisv1alpha1.LabelInstance] = name
	return labels
}

// storePodSpec is the store pod: restricted (non-root, no privilege escalation, no
// capability, RuntimeDefault seccomp, read-only root), no ServiceAccount token, the claim
// at /backup, ready once it serves.
func storePodSpec(ns, name, claim, image, digest string) *corev1.Pod {
	port := intstr.FromInt32(backup.StorePort)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: storePodLabels(name)},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(storeUID)), RunAsGroup: ptr.To(int64(storeUID)),
				FSGroup: ptr.To(int64(storeUID)), FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "store", Image: image,
				Args:           []string{"backup-store", "--dir=/backup"},
				Ports:          []corev1.ContainerPort{{Name: "store", ContainerPort: backup.StorePort}},
				Env:            []corev1.EnvVar{{Name: backup.StoreTokenEnv, Value: digest}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: port}}, PeriodSeconds: 1},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "backup", MountPath: "/backup"}},
			}},
			Volumes: []corev1.Volume{{Name: "backup", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
}
