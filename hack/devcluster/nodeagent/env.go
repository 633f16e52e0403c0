package main

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// envVar is one resolved variable, kept in the container's order.
type envVar struct{ Name, Value string }

// resolveEnv resolves a container's envFrom and env as the kubelet does: envFrom first, then env
// in order, each value expanded against the variables defined before it.
func resolveEnv(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, c *corev1.Container) ([]envVar, error) {
	var out []envVar
	index := map[string]int{}
	set := func(k, v string) {
		if i, ok := index[k]; ok {
			out[i].Value = v
			return
		}
		index[k] = len(out)
		out = append(out, envVar{k, v})
	}
	lookup := func(k string) (string, bool) {
		if i, ok := index[k]; ok {
			return out[i].Value, true
		}
		return "", false
	}
	for _, from := range c.EnvFrom {
		data, err := envFromData(ctx, cs, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, lookup))
			continue
		}
		v, ok, err := valueFrom(ctx, cs, pod, c, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("failed to resolve env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	return out, nil
}

func envFromData(ctx context.Context, cs kubernetes.Interface, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if err != nil {
			if isOptional(from.ConfigMapRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("failed to get configmap %s: %w", from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if err != nil {
			if isOptional(from.SecretRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("failed to get secret %s: %w", from.SecretRef.Name, err)
		}
		m := map[string]string{}
		for k, v := range s.Data {
			m[k] = string(v)
		}
		return m, nil
	}
	return nil, nil
}

func isOptional(b *bool) bool { return b != nil && *b }

// valueFrom resolves one valueFrom source; ok is false for a missing optional key.
func valueFrom(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, c *corev1.Container, src *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := podField(pod, src.FieldRef.FieldPath)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		return resourceField(c, src.ResourceFieldRef), true, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("failed to get secret %s: %w", ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok && !isOptional(ref.Optional) {
			return "", false, fmt.Errorf("key %s not found in secret %s", ref.Key, ref.Name)
		}
		return string(v), ok, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("failed to get configmap %s: %w", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok && !isOptional(ref.Optional) {
			return "", false, fmt.Errorf("key %s not found in configmap %s", ref.Key, ref.Name)
		}
		return v, ok, nil
	}
	return "", false, fmt.Errorf("unsupported valueFrom source")
}

// podField resolves the downward-API field paths the kubelet supports.
func podField(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.hostIPs":
		return pod.Status.HostIP, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.podIPs":
		return pod.Status.PodIP, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if path == prefix {
			var lines []string
			for k, v := range m {
				lines = append(lines, fmt.Sprintf("%s=%q", k, v))
			}
			return strings.Join(lines, "\n"), nil
		}
		if strings.HasPrefix(path, prefix+"['") && strings.HasSuffix(path, "']") {
			return m[path[len(prefix)+2:len(path)-2]], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldRef %s", path)
}

// resourceField resolves limits/requests, in the units the divisor asks for (default 1).
func resourceField(c *corev1.Container, ref *corev1.ResourceFieldSelector) string {
	parts := strings.SplitN(ref.Resource, ".", 2)
	if len(parts) != 2 {
		return ""
	}
	list := c.Resources.Limits
	if parts[0] == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(parts[1])]
	if !ok {
		return ""
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	v := q.AsApproximateFloat64() / divisor.AsApproximateFloat64()
	return fmt.Sprintf("%d", int64(v+0.999999))
}
