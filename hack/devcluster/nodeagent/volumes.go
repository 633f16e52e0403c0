package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// volumeDirs materialises a pod's volumes as host directories and returns them by volume name,
// with a note for each volume it could only approximate.
//
// Where the data lives decides what survives a pod: emptyDir and the API-backed volumes
// (configMap, secret, projected, downwardAPI) live under the pod UID, so a recreated pod
// starts fresh; a claim lives by claim (the PV's directory), nfs and foreign PVs by path plus
// pod name, so a recreated pod of the same name gets its nodes.conf and data back wherever it
// runs. hostPath lives by node, path and pod name: as with a real kubelet, a pod recreated on
// another node finds that node's directory (empty, or a copy from an earlier visit), and
// only a pod back on its old node gets its data back.
func (a *agent) volumeDirs(ctx context.Context, pod *corev1.Pod) (map[string]string, []string, error) {
	dirs := map[string]string{}
	var notes []string
	uidDir := filepath.Join(a.podDir(pod), "uid-"+string(pod.UID))
	for _, v := range pod.Spec.Volumes {
		var dir string
		var err error
		switch {
		case v.EmptyDir != nil:
			dir = filepath.Join(uidDir, "empty", v.Name)
		case v.ConfigMap != nil || v.Secret != nil || v.Projected != nil || v.DownwardAPI != nil:
			dir = filepath.Join(uidDir, "api", v.Name)
			err = a.writeAPIVolume(ctx, pod, v, dir)
		case v.HostPath != nil:
			dir = hostPathDir(a.stateDir, pod.Spec.NodeName, v.HostPath.Path, pod.Name)
		case v.NFS != nil:
			dir = filepath.Join(a.stateDir, "hostpath", "nfs-"+sanitize(v.NFS.Server+v.NFS.Path), pod.Name)
		case v.PersistentVolumeClaim != nil:
			dir, err = a.claimDir(ctx, pod, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			dir, err = a.claimDir(ctx, pod, pod.Name+"-"+v.Name)
		default:
			dir = filepath.Join(uidDir, "unsupported", v.Name)
			notes = append(notes, fmt.Sprintf("volume %s of an unsupported type is an empty directory", v.Name))
		}
		if err != nil {
			return nil, notes, fmt.Errorf("failed to prepare volume %s: %w", v.Name, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, notes, fmt.Errorf("failed to create volume %s: %w", v.Name, err)
		}
		dirs[v.Name] = dir
	}
	return dirs, notes, nil
}

// hostPathDir is where a hostPath volume of a pod on node lives: per node, since a hostPath
// is a directory of the node the pod runs on.
func hostPathDir(stateDir, node, path, pod string) string {
	return filepath.Join(stateDir, "hostpath", sanitize(node), sanitize(path), pod)
}

func sanitize(p string) string {
	return strings.Trim(strings.NewReplacer("/", "_", ":", "_").Replace(p), "_")
}

// claimDir returns the host directory behind a claim once the claim is bound.
func (a *agent) claimDir(ctx context.Context, pod *corev1.Pod, claim string) (string, error) {
	pvc, err := a.cs.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to get claim %s: %w", claim, err)
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return "", fmt.Errorf("claim %s is not bound yet", claim)
	}
	pv, err := a.cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to get volume %s: %w", pvc.Spec.VolumeName, err)
	}
	if pv.Labels[provisionedLabel] == "true" && pv.Spec.HostPath != nil {
		return pv.Spec.HostPath.Path, nil
	}
	return filepath.Join(a.stateDir, "hostpath", "pv-"+pv.Name, pod.Name), nil
}

// writeAPIVolume writes the files of a configMap, secret, downwardAPI or projected volume,
// rewriting only what changed so a running process sees updates as with the kubelet.
func (a *agent) writeAPIVolume(ctx context.Context, pod *corev1.Pod, v corev1.Volume, dir string) error {
	files := map[string][]byte{}
	add := func(data map[string][]byte, items []corev1.KeyToPath) {
		if len(items) == 0 {
			for k, b := range data {
				files[k] = b
			}
			return
		}
		for _, it := range items {
			if b, ok := data[it.Key]; ok {
				files[it.Path] = b
			}
		}
	}
	cmData := func(name string, optional *bool) (map[string][]byte, error) {
		cm, err := a.cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if isOptional(optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("failed to get configmap %s: %w", name, err)
		}
		m := map[string][]byte{}
		for k, s := range cm.Data {
			m[k] = []byte(s)
		}
		for k, b := range cm.BinaryData {
			m[k] = b
		}
		return m, nil
	}
	secretData := func(name string, optional *bool) (map[string][]byte, error) {
		s, err := a.cs.CoreV1().Secrets(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if isOptional(optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("failed to get secret %s: %w", name, err)
		}
		return s.Data, nil
	}
	downward := func(items []corev1.DownwardAPIVolumeFile) {
		for _, it := range items {
			if it.FieldRef != nil {
				if s, err := podField(pod, it.FieldRef.FieldPath); err == nil {
					files[it.Path] = []byte(s)
				}
			}
		}
	}
	switch {
	case v.ConfigMap != nil:
		m, err := cmData(v.ConfigMap.Name, v.ConfigMap.Optional)
		if err != nil {
			return err
		}
		add(m, v.ConfigMap.Items)
	case v.Secret != nil:
		m, err := secretData(v.Secret.SecretName, v.Secret.Optional)
		if err != nil {
			return err
		}
		add(m, v.Secret.Items)
	case v.DownwardAPI != nil:
		downward(v.DownwardAPI.Items)
	case v.Projected != nil:
		for _, src := range v.Projected.Sources {
			switch {
			case src.ConfigMap != nil:
				m, err := cmData(src.ConfigMap.Name, src.ConfigMap.Optional)
				if err != nil {
					return err
				}
				add(m, src.ConfigMap.Items)
			case src.Secret != nil:
				m, err := secretData(src.Secret.Name, src.Secret.Optional)
				if err != nil {
					return err
				}
				add(m, src.Secret.Items)
			case src.DownwardAPI != nil:
				downward(src.DownwardAPI.Items)
			case src.ServiceAccountToken != nil:
				path := filepath.Join(dir, src.ServiceAccountToken.Path)
				if _, err := os.Stat(path); err == nil {
					files[src.ServiceAccountToken.Path], _ = os.ReadFile(path)
					continue
				}
				tok, err := a.token(ctx, pod, src.ServiceAccountToken)
				if err != nil {
					return err
				}
				files[src.ServiceAccountToken.Path] = []byte(tok)
			}
		}
	}
	for name, b := range files {
		if err := writeIfChanged(filepath.Join(dir, name), b); err != nil {
			return err
		}
	}
	return nil
}

func (a *agent) token(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(ptr.Deref(src.ExpirationSeconds, 3607)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	res, err := a.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to request a token for service account %s: %w", sa, err)
	}
	return res.Status.Token, nil
}

func writeIfChanged(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to create directory for %s: %w", path, err)
	}
	// Written in place, not renamed, so a file bind-mounted by subPath sees the change too.
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
}
