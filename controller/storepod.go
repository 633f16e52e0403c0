package controller

import (
	"context"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
)

// A PersistentVolumeClaim destination is served by a store pod: the operator's own image
// running `manager backup-store` with the claim mounted at /backup (redis/backup's
// StoreHandler over a Dir), which the operator reaches over HTTPS with a token and a
// certificate of the pod's own (backup.StoreIdentity). The token lives in the operator's
// memory only (storeIdentities); the pod's spec holds its SHA-256, which lets no one in.
// The key pair goes to the pod in Secret NAME-tls, made before it; the operator trusts that
// certificate alone. After an operator restart both are new and the pod is replaced. The
// cut, the upload, the manifest, the restore and the deletion of the objects are the
// operator's, exactly as for S3: only the Store differs. The pod and its Secret are owned
// by what uses them (the backup, or the restoring cluster); the pod is deleted once done,
// the Secret goes with its owner (releaseStore says why).

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

// storePod is a client of the ready store pod name for d's claim, created (after its key
// pair's Secret, both owned by owner) if missing; a reason not empty says why it is not
// usable yet, naming the field.
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
	id, err := r.storeIdentities.identity(ns, name, owner.GetUID())
	if err != nil {
		return nil, "", "", err
	}
	pod := &corev1.Pod{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); client.IgnoreNotFound(err) != nil {
		return nil, "", "", err
	} else if err == nil && !metav1.IsControlledBy(pod, owner) {
		return nil, ReasonStorePodRefused, notTheOperators(field, "pod", name, owner), nil
	} else if err == nil && (!podMadeFor(pod, id) || podEnded(pod)) {
		// Made before the operator restarted (another token), or ended: replaced.
		uid := pod.UID
		if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return nil, "", "", err
		}
		return nil, ReasonStoreStarting, fmt.Sprintf("store pod %s replaced (a new token, or it had ended)", name), nil
	} else if err != nil {
		if reason, msg, err := r.writeStoreSecret(ctx, owner, name, field, id); err != nil || reason != "" {
			return nil, reason, msg, err
		}
		pod = storePodSpec(ns, name, claim, image, id)
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
		url := "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(backup.StorePort))
		return &backup.Remote{URL: url, Token: id.Token, Cert: id.CertPEM, Claim: "PersistentVolumeClaim " + claim}, "", "", nil
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

// storeIdentities are the store pods' tokens and key pairs, by namespace/name, in memory
// only, each with the UID of the owner it was made for.
type storeIdentities struct {
	mu  sync.Mutex
	ids map[string]ownedIdentity
}

type ownedIdentity struct {
	backup.StoreIdentity
	owner types.UID
}

// identity is pod ns/name's identity, a new one the first time, or when the pod's owner
// is another object of the same name (the first deleted before its store was released).
func (t *storeIdentities) identity(ns, name string, owner types.UID) (backup.StoreIdentity, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ids == nil {
		t.ids = map[string]ownedIdentity{}
	}
	key := ns + "/" + name
	if id, ok := t.ids[key]; ok && id.owner == owner {
		return id.StoreIdentity, nil
	}
	id, err := backup.NewStoreIdentity()
	if err != nil {
		return id, fmt.Errorf("making the store pod's key pair: %w", err)
	}
	t.ids[key] = ownedIdentity{StoreIdentity: id, owner: owner}
	return id, nil
}

func (t *storeIdentities) forget(ns, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.ids, ns+"/"+name)
}

// podMadeFor tells whether a store pod was made with id: given its token's digest and its
// certificate's.
func podMadeFor(pod *corev1.Pod, id backup.StoreIdentity) bool {
	want := map[string]string{backup.StoreTokenEnv: backup.TokenDigest(id.Token), backup.StoreCertEnv: backup.CertDigest(id.CertPEM)}
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if v, ok := want[e.Name]; ok && v == e.Value {
				delete(want, e.Name)
			}
		}
	}
	return len(want) == 0
}

// storeSecret is the Secret that gives store pod name its key pair.
func storeSecret(name string) string { return name + "-tls" }

// writeStoreSecret writes id's key pair into the store pod's Secret (made, or updated
// from an earlier identity), owned by owner; a Secret of that name the operator did not
// make is left alone, with a reason.
func (r *Reconciler) writeStoreSecret(ctx context.Context, owner client.Object, name, field string, id backup.StoreIdentity) (string, string, error) {
	data := map[string][]byte{corev1.TLSCertKey: id.CertPEM, corev1.TLSPrivateKeyKey: id.KeyPEM}
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: owner.GetNamespace(), Name: storeSecret(name)}
	if err := r.APIReader.Get(ctx, key, sec); client.IgnoreNotFound(err) != nil {
		return "", "", err
	} else if err == nil {
		if !metav1.IsControlledBy(sec, owner) || !hasLabels(sec, storeLabels()) {
			return ReasonStorePodRefused, notTheOperators(field, "Secret", key.Name, owner), nil
		}
		// Preconditioned on what was read and judged: one replaced meanwhile is not taken over.
		patch := client.MergeFromWithOptions(sec.DeepCopy(), client.MergeFromWithOptimisticLock{})
		sec.Data = data
		return storeSecretRefused(r.Client.Patch(ctx, sec, patch), field, key.Name)
	}
	sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: storePodLabels(name)},
		Type: corev1.SecretTypeTLS, Data: data}
	if err := controllerutil.SetControllerReference(owner, sec, r.Client.Scheme()); err != nil {
		return "", "", err
	}
	return storeSecretRefused(r.Client.Create(ctx, sec), field, key.Name)
}

// notTheOperators is the StorePodRefused message for an object of a store pod's that
// exists under its name but was not made by the operator for owner (left alone).
func notTheOperators(field, kind, name string, owner client.Object) string {
	return fmt.Sprintf("%s: a %s named %s exists that the operator did not create for %s; rename or delete it", field, kind, name, owner.GetName())
}

// storeSecretRefused is the reason of a failed write of the key pair's Secret: refused
// (an admission policy, a quota) or raced (made or changed meanwhile: looked at again).
func storeSecretRefused(err error, field, name string) (string, string, error) {
	switch {
	case err == nil:
		return "", "", nil
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err):
		return ReasonStorePodRefused, fmt.Sprintf("%s: the Secret %s that gives the store pod its key pair was refused: %v", field, name, err), nil
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		return ReasonStoreStarting, fmt.Sprintf("the Secret %s changed while it was written; written again next", name), nil
	}
	return "", "", err
}

func podEnded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// releaseStore deletes the store pod name, then its NetworkPolicy, if they are the
// operator's (their labels: a user's object of that name is left alone), and forgets its
// token and key pair. The pod stops listening once told to stop, so the policy going right
// after it opens nothing that still serves. The pod's Secret stays until its owner goes
// (the operator deletes no Secret): its key pair opens nothing once forgotten, since the
// operator trusts the certificate of a pod it made, and a new pod gets a new one.
func (r *Reconciler) releaseStore(ctx context.Context, ns, name string) error {
	r.storeIdentities.forget(ns, name)
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
// at /backup and its key pair (Secret NAME-tls) at /tls, ready once it serves HTTPS.
func storePodSpec(ns, name, claim, image string, id backup.StoreIdentity) *corev1.Pod {
	port := intstr.FromInt32(backup.StorePort)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: storePodLabels(name)},
		Spec: corev1.PodSpec{
			// A store that ends (it refused a certificate it was not made for, it ran out
			// of memory) stays ended, so the operator replaces it (podEnded) and writes its
			// Secret again, rather than leaving it to restart on the same files forever.
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(storeUID)), RunAsGroup: ptr.To(int64(storeUID)),
				FSGroup: ptr.To(int64(storeUID)), FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "store", Image: image,
				Args:  []string{"backup-store", "--dir=/backup"},
				Ports: []corev1.ContainerPort{{Name: "store", ContainerPort: backup.StorePort}},
				Env: []corev1.EnvVar{{Name: backup.StoreTokenEnv, Value: backup.TokenDigest(id.Token)},
					{Name: backup.StoreCertEnv, Value: backup.CertDigest(id.CertPEM)}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/healthz", Port: port, Scheme: corev1.URISchemeHTTPS}}, PeriodSeconds: 1},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "backup", MountPath: "/backup"}, {Name: "tls", MountPath: "/tls", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{
				{Name: "backup", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
				// Readable by the store's group (fsGroup) only.
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: storeSecret(name), DefaultMode: ptr.To(int32(0o440))}}},
			},
		},
	}
}
