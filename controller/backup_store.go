package controller

import (
	"context"
	"errors"
	"fmt"
	"path"

	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
)

// Reasons of a PersistentVolumeClaim destination (a backup's status.reason, a restore's
// status.restore.reason).
const (
	// ReasonPVCNotFound: spec.pvc.claimName names no PersistentVolumeClaim of the namespace.
	ReasonPVCNotFound = "PVCNotFound"
	// ReasonPVCNotBound: the claim is not Bound storeBindTimeout after its store pod asked
	// for it (no volume can be provisioned: a wrong storage class, no capacity).
	ReasonPVCNotBound = "PVCNotBound"
	// ReasonStoreStarting: the store pod that mounts the claim is starting.
	ReasonStoreStarting = "StoreStarting"
	// ReasonStorePodNotReady: the store pod is not ready storeBindTimeout after its
	// creation though its claim is Bound (the image cannot be pulled, the pod crashes).
	ReasonStorePodNotReady = "StorePodNotReady"
	// ReasonStorePodRefused: the API server refused the store pod (Pod Security
	// admission, a ResourceQuota or LimitRange of the namespace) or its NetworkPolicy, or
	// a pod or NetworkPolicy of its name is not the operator's.
	ReasonStorePodRefused = "StorePodRefused"
	// ReasonStoreImageUnset: the operator does not know the image to run store pods with.
	ReasonStoreImageUnset = "StoreImageUnset"
	// ReasonVolumeFull: the claim's volume has no room left for the backup.
	ReasonVolumeFull = "VolumeFull"
	// ReasonStoreError: the store pod refused a request or could not be reached.
	ReasonStoreError = "StoreError"
)

// storeErrorReason is the reason of an error of d's store: S3Error or StoreError.
func storeErrorReason(d destination) string {
	if d.pvc != nil {
		return ReasonStoreError
	}
	return ReasonS3Error
}

// destination is where a backup's objects are: exactly one of s3 and pvc.
type destination struct {
	s3  *redisv1alpha1.S3Destination
	pvc *redisv1alpha1.PVCDestination
	// field names the destination in messages: "spec.s3", or "RedisClusterBackup nightly:
	// spec.pvc" for a restore.
	field string
}

// destinationOf is the destination of backup b; in is what messages cite before the
// field ("" for the backup's own status).
func destinationOf(b *redisv1alpha1.RedisClusterBackup, in string) destination {
	if b.Spec.PVC != nil {
		return destination{pvc: b.Spec.PVC, field: in + "spec.pvc"}
	}
	return destination{s3: b.Spec.S3, field: in + "spec.s3"}
}

func (d destination) prefix() string {
	if d.pvc != nil {
		return d.pvc.Prefix
	}
	return d.s3.Prefix
}

// location names dir in the store for events: "BUCKET/DIR", or "PersistentVolumeClaim
// CLAIM: DIR".
func (d destination) location(dir string) string {
	if d.pvc != nil {
		return "PersistentVolumeClaim " + d.pvc.ClaimName + ": " + dir
	}
	return d.s3.Bucket + "/" + dir
}

// backupDir is PREFIX/NAMESPACE/NAME, where a backup's objects go.
func backupDir(b *redisv1alpha1.RedisClusterBackup) string {
	return path.Join(destinationOf(b, "").prefix(), b.Namespace, b.Name)
}

// backupStorePod is the name of the store pod of backup b (and, with -tls, of its key
// pair's Secret).
func backupStorePod(b *redisv1alpha1.RedisClusterBackup) string { return b.Name + "-backup-store" }

// restoreStorePod is the name of the store pod a restore into cluster reads through.
func restoreStorePod(cluster string) string { return cluster + "-restore-store" }

// openStore is a client of d's store: S3 after a check of the bucket, or the store pod
// podName (owned by owner) that mounts the claim, started if need be. A reason not empty
// says why it cannot be used yet (ReasonStoreStarting while the pod starts).
func (r *Reconciler) openStore(ctx context.Context, owner client.Object, podName string, d destination) (backup.Store, string, string, error) {
	if d.pvc != nil {
		return r.storePod(ctx, owner, podName, d)
	}
	s3, reason, msg, err := s3Store(ctx, r.APIReader, owner.GetNamespace(), *d.s3, d.field)
	if s3 == nil {
		return nil, reason, msg, err
	}
	return backup.Bucket{S3: s3, Name: d.s3.Bucket}, "", "", nil
}

// failureReason is the status reason of an upload that failed with err: VolumeFull,
// naming the claim, or UploadFailed.
func failureReason(d destination, err error) (string, string) {
	if d.pvc != nil && errors.Is(err, backup.ErrVolumeFull) {
		return ReasonVolumeFull, fmt.Sprintf("%s.claimName: the volume of PersistentVolumeClaim %s is full: %v", d.field, d.pvc.ClaimName, err)
	}
	return ReasonUploadFailed, err.Error()
}
