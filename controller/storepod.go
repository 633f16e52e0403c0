package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
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
// pod's own Secret. The cut, the upload, the manifest, the restore and the deletion of
// the objects are the operator's, exactly as for S3: only the Store differs. The pod is
// owned by what uses it (the backup, or the restoring cluster) and deleted once done.

// storeBindTimeout is how long a store pod may wait for its claim or its start before
// the reason says what is wrong (PVCNotBound, StorePodNotReady).
const storeBindTimeout = 2 * time.Minute

// storeTokenKey is the key of the store pod's Secret holding its token.
const storeTokenKey = "token"

// storeUID is the store pod's user and group: distroless's nonroot, as the operator's image.
const storeUID = 65532

// +kubebuilder:rbac:groups="",resources=pods,verbs=create
// +kubebuilder:rbac:groups="",resources=secrets,verbs=delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get

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
	image, err := r.storeImage(ctx)
	if err != nil || image == "" {
		return nil, ReasonStoreImageUnset, fmt.Sprintf("%s: the operator does not know its image to run the store pod with (--backup-store-image, or its own pod's): %v", field, err), nil
	}
	token, err := r.storeToken(ctx, owner, name)
	if err != nil {
		return nil, "", "", err
	}
	pod := &corev1.Pod{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); client.IgnoreNotFound(err) != nil {
		return nil, "", "", err
	} else if err != nil {
		pod = storePodSpec(ns, name, claim, image)
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

// storeToken is the token of store pod name, from its Secret (created, owned by owner,
// with a new random token if missing).
func (r *Reconciler) storeToken(ctx context.Context, owner client.Object, name string) (string, error) {
	sec := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, sec)
	if err == nil && len(sec.Data[storeTokenKey]) > 0 {
		return string(sec.Data[storeTokenKey]), nil
	}
	if client.IgnoreNotFound(err) != nil {
		return "", err
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	sec = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: owner.GetNamespace(), Labels: storeLabels()},
		Data:       map[string][]byte{storeTokenKey: []byte(hex.EncodeToString(raw))},
	}
	if err := controllerutil.SetControllerReference(owner, sec, r.Client.Scheme()); err != nil {
		return "", err
	}
	if err := r.Client.Create(ctx, sec); err != nil {
		return "", fmt.Errorf("creating the store pod's Secret %s: %w", name, err) // an AlreadyExists is retried
	}
	return string(sec.Data[storeTokenKey]), nil
}

// releaseStore deletes the store pod name and its Secret, if any.
func (r *Reconciler) releaseStore(ctx context.Context, ns, name string) error {
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	if err := r.Client.Delete(ctx, &corev1.Pod{ObjectMeta: meta}); client.IgnoreNotFound(err) != nil {
		return err
	}
	return client.IgnoreNotFound(r.Client.Delete(ctx, &corev1.Secret{ObjectMeta: meta}))
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

func storeLabels() map[string]string {
	return map[string]string{redisv1alpha1.LabelName: "redis-backup-store", redisv1alpha1.LabelManagedBy: redisv1alpha1.ManagedBy}
}

// storePodSpec is the store pod: restricted (non-root, no privilege escalation, no
// capability, RuntimeDefault seccomp, read-only root), no ServiceAccount token, the claim
// at /backup, ready once it serves.
func storePodSpec(ns, name, claim, image string) *corev1.Pod {
	port := intstr.FromInt32(backup.StorePort)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: storeLabels()},
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
				Args:  []string{"backup-store", "--dir=/backup"},
				Ports: []corev1.ContainerPort{{Name: "store", ContainerPort: backup.StorePort}},
				Env: []corev1.EnvVar{{Name: backup.StoreTokenEnv, ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: storeTokenKey}}}},
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
