package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A test that failed, or wants to say why Redis did something, reads the Redis containers'
// logs through the API (the kubelet serves them, as for `kubectl logs`) before the namespace goes.

// RedisLog is the log of a pod's redis container: the current container's, after the previous
// one's when it restarted.
func (s *Stack) RedisLog(ctx context.Context, ns, pod string) string {
	cs, err := s.Clientset()
	if err != nil {
		return ""
	}
	var out strings.Builder
	for _, previous := range []bool{true, false} {
		b, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "redis", Previous: previous}).DoRaw(ctx)
		if err == nil {
			out.Write(b)
		}
	}
	return out.String()
}

func (s *Stack) podNames(ctx context.Context, ns string) ([]string, error) {
	cs, err := s.Clientset()
	if err != nil {
		return nil, err
	}
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names, nil
}

// PodLogLines are the last `last` lines of each pod's Redis log in ns that contain one of
// words (any line when there are none), each prefixed with its pod's name.
func (s *Stack) PodLogLines(ns string, last int, words ...string) ([]string, error) {
	ctx := context.Background()
	names, err := s.podNames(ctx, ns)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range names {
		var kept []string
		for _, line := range strings.Split(s.RedisLog(ctx, ns, name), "\n") {
			if line != "" && matchesAny(line, words) {
				kept = append(kept, name+": "+line)
			}
		}
		out = append(out, kept[max(0, len(kept)-last):]...)
	}
	return out, nil
}

func matchesAny(line string, words []string) bool {
	if len(words) == 0 {
		return true
	}
	for _, w := range words {
		if strings.Contains(line, w) {
			return true
		}
	}
	return false
}

// KeepPodLogs writes every pod's Redis log and nodes.conf (read in the container, as
// `kubectl exec` does) of ns to StateDir/logs/pods-<ns>/<pod>/, where they outlive the
// namespace, and returns that directory.
func (s *Stack) KeepPodLogs(ns string) (string, error) {
	ctx := context.Background()
	names, err := s.podNames(ctx, ns)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(s.StateDir, "logs", "pods-"+ns)
	for _, name := range names {
		to := filepath.Join(dest, name)
		if err := os.MkdirAll(to, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(to, "redis.log"), []byte(s.RedisLog(ctx, ns, name)), 0o644); err != nil {
			return "", fmt.Errorf("failed to keep the log of %s: %w", name, err)
		}
		if conf, err := s.Kubectl("exec", "-n", ns, name, "-c", "redis", "--", "cat", "/data/nodes.conf"); err == nil {
			_ = os.WriteFile(filepath.Join(to, "nodes.conf"), []byte(conf), 0o644)
		}
	}
	return dest, nil
}
