package framework

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The node agent keeps each pod's files (redis.log, nodes.conf, the data) under
// StateDir/pods/<namespace>/<pod>/ and removes them with the namespace. A test that failed,
// or wants to say why Redis did something, reads them before that.

// podDirs are the pods' directories of ns, by pod name.
func (s *Stack) podDirs(ns string) ([]string, error) {
	root := filepath.Join(s.StateDir, "pods", ns)
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(root, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// PodLogLines are the last `last` lines of each pod's redis.log in ns that contain one of
// words (any line when there are none), each prefixed with its pod's name.
func (s *Stack) PodLogLines(ns string, last int, words ...string) ([]string, error) {
	dirs, err := s.podDirs(ns)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, "redis.log"))
		if err != nil {
			continue // a pod being replaced
		}
		var kept []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			if line := sc.Text(); matchesAny(line, words) {
				kept = append(kept, filepath.Base(dir)+": "+line)
			}
		}
		f.Close()
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

// KeepPodLogs copies every pod's redis.log and nodes.conf of ns to
// StateDir/logs/pods-<ns>/<pod>/, where they outlive the namespace, and returns that
// directory.
func (s *Stack) KeepPodLogs(ns string) (string, error) {
	dirs, err := s.podDirs(ns)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(s.StateDir, "logs", "pods-"+ns)
	for _, dir := range dirs {
		to := filepath.Join(dest, filepath.Base(dir))
		if err := os.MkdirAll(to, 0o755); err != nil {
			return "", err
		}
		for _, name := range []string{"redis.log", "nodes.conf"} {
			if err := copyFile(filepath.Join(dir, name), filepath.Join(to, name)); err != nil && !os.IsNotExist(err) {
				return "", fmt.Errorf("failed to keep %s of %s: %w", name, filepath.Base(dir), err)
			}
		}
	}
	return dest, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
