package main

import (
	"context"
	"fmt"
	"log"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/ptr"
)

const (
	storageClassName = "devcluster-hostpath"
	provisionerName  = "devcluster.local/hostpath"
	provisionedLabel = "devcluster.local/provisioned"
)

// ensureStorageClass creates the default StorageClass that PVCs without a class get, so
// volumeClaimTemplates work as on any cluster with a default provisioner.
func ensureStorageClass(ctx context.Context, cs kubernetes.Interface) error {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: storageClassName, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       provisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	_, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create storage class: %w", err)
	}
	return nil
}

// provision is a tiny external provisioner: for each pending claim of our class (or of no
// class) it creates a hostPath PV under <state>/volumes/NS/CLAIM pre-bound to the claim; the
// controller manager's persistentvolume-binder then binds the two.
func provision(ctx context.Context, cs kubernetes.Interface, pvcs corelisters.PersistentVolumeClaimLister, stateDir string) {
	for {
		list, _ := pvcs.List(everything())
		for _, pvc := range list {
			if pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil {
				continue
			}
			class := ptr.Deref(pvc.Spec.StorageClassName, "")
			if class != "" && class != storageClassName {
				continue
			}
			if err := createPV(ctx, cs, pvc, stateDir); err != nil {
				log.Printf("Failed to provision claim %s/%s: %v", pvc.Namespace, pvc.Name, err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func createPV(ctx context.Context, cs kubernetes.Interface, pvc *corev1.PersistentVolumeClaim, stateDir string) error {
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.IsZero() {
		size = resource.MustParse("1Gi")
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + string(pvc.UID), Labels: map[string]string{provisionedLabel: "true"},
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": provisionerName}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              ptr.Deref(pvc.Spec.StorageClassName, ""),
			VolumeMode:                    pvc.Spec.VolumeMode,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, APIVersion: "v1"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: filepath.Join(stateDir, "volumes", pvc.Namespace, pvc.Name), Type: ptr.To(corev1.HostPathDirectoryOrCreate)}},
		},
	}
	if len(pv.Spec.AccessModes) == 0 {
		pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	_, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create persistent volume: %w", err)
	}
	return nil
}
