// Command provisioner is the devcluster's storage: the default StorageClass devcluster-hostpath
// (WaitForFirstConsumer) and, for each claim of it that the scheduler has placed on a node, a
// hostPath PersistentVolume in that node's directory, bound to the node by node affinity, as a
// local-volume provisioner does on a real cluster. The directory is world-writable (0777, as
// local-path provisioners make theirs): a hostPath volume gets no fsGroup ownership, and the
// Redis pods run as a non-root user.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

const (
	storageClassName = "devcluster-hostpath"
	provisionerName  = "devcluster.local/hostpath"
	selectedNodeKey  = "volume.kubernetes.io/selected-node"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the devcluster")
	dir := flag.String("dir", "", "where the volumes live: DIR/NODE/NAMESPACE/CLAIM")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("Failed to load kubeconfig: %v", err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	for ctx.Err() == nil {
		if err := ensureStorageClass(ctx, cs); err != nil {
			log.Printf("%v", err)
		} else {
			break
		}
		time.Sleep(time.Second)
	}
	log.Printf("Provisioning %s claims in %s", storageClassName, *dir)
	for {
		if err := provisionAll(ctx, cs, *dir); err != nil {
			log.Printf("%v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func ensureStorageClass(ctx context.Context, cs kubernetes.Interface) error {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: storageClassName, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       provisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	_, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create storage class: %w", err)
	}
	return nil
}

func provisionAll(ctx context.Context, cs kubernetes.Interface, dir string) error {
	list, err := cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("failed to list claims: %w", err)
	}
	for i := range list.Items {
		pvc := &list.Items[i]
		node := pvc.Annotations[selectedNodeKey]
		if pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil || node == "" || ptr.Deref(pvc.Spec.StorageClassName, "") != storageClassName {
			continue
		}
		if err := createPV(ctx, cs, pvc, node, dir); err != nil {
			log.Printf("Failed to provision claim %s/%s: %v", pvc.Namespace, pvc.Name, err)
		}
	}
	return nil
}

func createPV(ctx context.Context, cs kubernetes.Interface, pvc *corev1.PersistentVolumeClaim, node, dir string) error {
	path := filepath.Join(dir, node, pvc.Namespace, pvc.Name)
	if err := os.MkdirAll(path, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(path, 0o777); err != nil { // MkdirAll's mode goes through the umask
		return err
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.IsZero() {
		size = resource.MustParse("1Gi")
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + string(pvc.UID),
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": provisionerName}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              storageClassName,
			VolumeMode:                    pvc.Spec.VolumeMode,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, APIVersion: "v1"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(corev1.HostPathDirectory)}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
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
