package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// defaultRenderer is compiled on first use by the CLI, which has no place to keep a
// Renderer.
var defaultRenderer = sync.OnceValues(func() (*Renderer, error) { return New() })

// RenderFile renders every RedisCluster in a YAML file (one or more documents; "-" is
// stdin) with the text of a user redis.conf (what the operator would read from
// spec.pod[0].configmap): objects of the first RedisCluster first, each in the
// templates' order.
func (r *Renderer) RenderFile(path, userRedisConf string) ([]*unstructured.Unstructured, error) {
	clusters, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, rc := range clusters {
		o, err := r.Render(rc, userRedisConf)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// ReadFile decodes the RedisClusters of a YAML file ("-" is stdin), passing over
// documents of other kinds (a sample's ConfigMap). Like the API server, it ignores fields
// the API does not know (the seed's sample has one under
// affinity); the cue CLI preview is the strict check.
func ReadFile(path string) ([]*redisv1alpha1.RedisCluster, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	reader := utilyaml.NewYAMLReader(bufioReader(data))
	var clusters []*redisv1alpha1.RedisCluster
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", path, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		rc := &redisv1alpha1.RedisCluster{}
		if err := yaml.Unmarshal(doc, rc); err != nil {
			return nil, fmt.Errorf("failed to decode RedisCluster in %s: %w", path, err)
		}
		if rc.Kind != "RedisCluster" {
			// Another object of the same file (a sample's ConfigMap): not rendered here.
			continue
		}
		if gvk := rc.GroupVersionKind(); gvk != redisv1alpha1.GroupVersion.WithKind("RedisCluster") {
			return nil, fmt.Errorf("failed to decode RedisCluster in %s: found apiVersion %q kind %q", path, rc.APIVersion, rc.Kind)
		}
		clusters = append(clusters, rc)
	}
	if len(clusters) == 0 {
		return nil, fmt.Errorf("failed to find a RedisCluster in %s", path)
	}
	return clusters, nil
}

// stripComments drops comment-only lines, so a document of comments counts as empty.
func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}
