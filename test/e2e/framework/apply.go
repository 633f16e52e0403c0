package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner is the server-side-apply field manager of objects the tests apply.
const FieldOwner = "e2e"

// ApplyYAML server-side-applies every object in fileOrYAML (a path, or YAML text when it
// contains a newline), into ns for namespaced objects without a namespace; "" keeps them as
// written (default namespace). It returns the applied objects.
func (s *Stack) ApplyYAML(ctx context.Context, ns, fileOrYAML string) ([]*unstructured.Unstructured, error) {
	data := []byte(fileOrYAML)
	if !strings.Contains(fileOrYAML, "\n") {
		b, err := os.ReadFile(fileOrYAML)
		if err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", fileOrYAML, err)
		}
		data = b
	}
	c, err := s.Client()
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var applied []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return applied, nil
			}
			return applied, fmt.Errorf("failed to decode YAML: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if ns != "" && u.GetNamespace() == "" {
			if namespaced, err := c.IsObjectNamespaced(u); err == nil && namespaced {
				u.SetNamespace(ns)
			}
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return applied, fmt.Errorf("failed to apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		applied = append(applied, u)
	}
}
