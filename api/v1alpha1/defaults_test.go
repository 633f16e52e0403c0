/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/render"
)

// TestCRDAndCUEDefaultsRenderAlike keeps the two copies of the defaults in step: the
// CRD's (kubebuilder `default` markers, applied by the API server) and the templates'
// (CUE, applied when a CR is rendered from a file by `render`). Each minimal CR is
// rendered twice: as written, so CUE fills the defaults, and as the API server returns
// it, with the CRD's defaults filled. The objects must be the same.
func TestCRDAndCUEDefaultsRenderAlike(t *testing.T) {
	needAPIServer(t)
	r, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]map[string]any{
		"only the required fields": {},
		"an empty pod template":    {"pod": []any{map[string]any{}}},
		"empty volumes":            {"pod": []any{map[string]any{"volumes": map[string]any{}}}},
		"hostPath volumes":         {"pod": []any{map[string]any{"volumes": map[string]any{"type": "hostPath"}}}},
		"a claim template":         {"pod": []any{map[string]any{"volumes": map[string]any{"type": "volumeClaimTemplate"}}}},
		"a password Secret":        {"passwordSecret": map[string]any{"name": "pw"}},
		"an empty client Service":  {"clientService": map[string]any{}},
		"an empty update strategy": {"updateStrategy": map[string]any{}},
		"no replica per master":    {"replicasPerMaster": int64(0), "replicas": int64(3)},
	}
	i := 0
	for name, extra := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			spec := map[string]any{"replicas": int64(6), "version": "7.2"}
			for k, v := range extra {
				spec[k] = v
			}
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": redisv1alpha1.GroupVersion.String(), "kind": "RedisCluster",
				"metadata": map[string]any{"name": fmt.Sprintf("defaults-%d", i), "namespace": "default"},
				"spec":     spec,
			}}
			written := &redisv1alpha1.RedisCluster{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.DeepCopy().Object, written); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := k8sClient.Create(ctx, obj); err != nil {
				t.Fatalf("the minimal CR was refused: %v", err)
			}
			t.Cleanup(func() { _ = k8sClient.Delete(ctx, obj) })
			defaulted := &redisv1alpha1.RedisCluster{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), defaulted); err != nil {
				t.Fatal(err)
			}
			fromFile, err := r.Render(written, "")
			if err != nil {
				t.Fatalf("rendering the CR as written: %v", err)
			}
			fromServer, err := r.Render(defaulted, "")
			if err != nil {
				t.Fatalf("rendering the CR as the API server defaulted it: %v", err)
			}
			if len(fromFile) != len(fromServer) {
				t.Fatalf("%d objects from the CUE defaults, %d from the CRD's", len(fromFile), len(fromServer))
			}
			for j := range fromFile {
				if !reflect.DeepEqual(fromFile[j].Object, fromServer[j].Object) {
					t.Errorf("%s %s differs: CUE defaults\n%v\nCRD defaults\n%v", fromFile[j].GetKind(), fromFile[j].GetName(), fromFile[j].Object, fromServer[j].Object)
				}
			}
			checkGoDefaults(t, written, defaulted)
		})
	}
}

// checkGoDefaults checks the Go helpers that read a field as its default when it is
// unset (a CR that never went through the API server) against the CRD's default.
func checkGoDefaults(t *testing.T, written, defaulted *redisv1alpha1.RedisCluster) {
	t.Helper()
	if a, b := written.Spec.ReplicasPerMasterOrDefault(), defaulted.Spec.ReplicasPerMasterOrDefault(); a != b {
		t.Errorf("replicasPerMaster: Go default %d, CRD default %d", a, b)
	}
	if a, b := written.Spec.Image(), defaulted.Spec.Image(); a != b {
		t.Errorf("image: Go default %q, CRD default %q", a, b)
	}
	a, errA := written.Spec.PipelineKeys()
	b, errB := defaulted.Spec.PipelineKeys()
	if a != b || errA != nil || errB != nil {
		t.Errorf("updateStrategy.pipeline: Go default %d (%v), CRD default %d (%v)", a, errA, b, errB)
	}
}
