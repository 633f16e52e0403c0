package controller

import (
	"testing"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// hostPath is a directory of one Kubernetes node and a recreated pod may start on another,
// so only nfs and claims count as data that outlives a pod.
func TestPersistentDataLeavesOutHostPath(t *testing.T) {
	for vt, want := range map[redisv1alpha1.VolumeType]bool{
		redisv1alpha1.VolumeTypeEmptyDir:            false,
		redisv1alpha1.VolumeTypeHostPath:            false,
		redisv1alpha1.VolumeTypeNFS:                 true,
		redisv1alpha1.VolumeTypeVolumeClaimTemplate: true,
	} {
		rc := &redisv1alpha1.RedisCluster{}
		rc.Spec.Pod = []redisv1alpha1.RedisPodTemplate{{Volumes: redisv1alpha1.RedisVolumes{Type: vt}}}
		if got := persistentData(rc); got != want {
			t.Errorf("persistentData(%s) = %v, want %v", vt, got, want)
		}
	}
}
