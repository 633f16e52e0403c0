package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// dataPod is a pod of a Redis StatefulSet with a hostPath, an nfs-like and an emptyDir
// volume, bound to node.
func dataPod(uid, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-0", UID: types.UID(uid)},
		Spec: corev1.PodSpec{NodeName: node, Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/redis-cluster"}}},
			{Name: "shared", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example", Path: "/export"}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}},
	}
}

// A hostPath is a directory of the node the pod runs on: the same pod recreated on another
// node finds an empty directory there, and its old data again once back on the old node.
// nfs is shared storage and follows the pod; emptyDir is fresh per pod UID.
func TestVolumeDirsKeepHostPathPerNode(t *testing.T) {
	a := &agent{cs: fake.NewSimpleClientset(), stateDir: t.TempDir()}
	ctx := context.Background()
	write := func(dir, file string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, file), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	has := func(dir, file string) bool {
		_, err := os.Stat(filepath.Join(dir, file))
		return err == nil
	}

	first, _, err := a.volumeDirs(ctx, dataPod("uid-1", "devnode-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"data", "shared", "scratch"} {
		write(first[v], "nodes.conf")
	}

	moved, _, err := a.volumeDirs(ctx, dataPod("uid-2", "devnode-2"))
	if err != nil {
		t.Fatal(err)
	}
	if moved["data"] == first["data"] || has(moved["data"], "nodes.conf") {
		t.Errorf("hostPath on another node = %s, want an empty directory apart from %s", moved["data"], first["data"])
	}
	if moved["shared"] != first["shared"] || !has(moved["shared"], "nodes.conf") {
		t.Errorf("nfs on another node = %s, want the pod's shared directory %s with its data", moved["shared"], first["shared"])
	}
	if has(moved["scratch"], "nodes.conf") {
		t.Errorf("emptyDir of a new pod UID is not empty: %s", moved["scratch"])
	}

	back, _, err := a.volumeDirs(ctx, dataPod("uid-3", "devnode-1"))
	if err != nil {
		t.Fatal(err)
	}
	if back["data"] != first["data"] || !has(back["data"], "nodes.conf") {
		t.Errorf("hostPath back on its old node = %s, want %s with the old data", back["data"], first["data"])
	}
	want := filepath.Join(a.stateDir, "hostpath", "devnode-1", "var_lib_redis-cluster", "demo-0")
	if first["data"] != want {
		t.Errorf("hostPath dir = %s, want %s", first["data"], want)
	}
}
