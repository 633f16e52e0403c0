/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

func TestMastersAndReplicasPerMaster(t *testing.T) {
	cases := []struct {
		replicas          int32
		replicasPerMaster *int32
		wantPerMaster     int32
		wantMasters       int32
	}{
		{replicas: 6, replicasPerMaster: nil, wantPerMaster: 1, wantMasters: 3},
		{replicas: 7, replicasPerMaster: nil, wantPerMaster: 1, wantMasters: 3},
		{replicas: 8, replicasPerMaster: ptr.To[int32](1), wantPerMaster: 1, wantMasters: 4},
		{replicas: 3, replicasPerMaster: ptr.To[int32](0), wantPerMaster: 0, wantMasters: 3},
		{replicas: 9, replicasPerMaster: ptr.To[int32](2), wantPerMaster: 2, wantMasters: 3},
		{replicas: 4, replicasPerMaster: nil, wantPerMaster: 1, wantMasters: 2},
		{replicas: 0, replicasPerMaster: nil, wantPerMaster: 1, wantMasters: 0},
		{replicas: 6, replicasPerMaster: ptr.To[int32](-1), wantPerMaster: -1, wantMasters: 0},
	}
	for _, tc := range cases {
		s := redisv1alpha1.RedisClusterSpec{Replicas: tc.replicas, ReplicasPerMaster: tc.replicasPerMaster}
		if got := s.ReplicasPerMasterOrDefault(); got != tc.wantPerMaster {
			t.Errorf("replicas %d: ReplicasPerMasterOrDefault() = %d, want %d", tc.replicas, got, tc.wantPerMaster)
		}
		if got := s.Masters(); got != tc.wantMasters {
			t.Errorf("replicas %d, replicasPerMaster %d: Masters() = %d, want %d", tc.replicas, tc.wantPerMaster, got, tc.wantMasters)
		}
	}
}

func TestImage(t *testing.T) {
	cases := []struct {
		name string
		spec redisv1alpha1.RedisClusterSpec
		want string
	}{
		{"repository and version", redisv1alpha1.RedisClusterSpec{Repository: "library/redis", Version: "7.2"}, "library/redis:7.2"},
		{"default repository", redisv1alpha1.RedisClusterSpec{Version: "3.2.8"}, "library/redis:3.2.8"},
		{"private registry with a port", redisv1alpha1.RedisClusterSpec{Repository: "registry:5000/redis", Version: "7.0"}, "registry:5000/redis:7.0"},
		{"middlewareImage wins", redisv1alpha1.RedisClusterSpec{
			Repository: "library/redis", Version: "7.2",
			Pod: []redisv1alpha1.RedisPodTemplate{{MiddlewareImage: "example.com/redis@sha256:abc"}},
		}, "example.com/redis@sha256:abc"},
		{"no version", redisv1alpha1.RedisClusterSpec{Repository: "library/redis"}, "library/redis"},
	}
	for _, tc := range cases {
		if got := tc.spec.Image(); got != tc.want {
			t.Errorf("%s: Image() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPipelineKeys(t *testing.T) {
	cases := []struct {
		pipeline *intstr.IntOrString
		want     int
		wantErr  bool
	}{
		{pipeline: nil, want: 100},
		{pipeline: ptr.To(intstr.FromInt32(100)), want: 100},
		{pipeline: ptr.To(intstr.FromString("100")), want: 100},
		{pipeline: ptr.To(intstr.FromString("0100")), want: 100},
		{pipeline: ptr.To(intstr.FromInt32(1)), want: 1},
		{pipeline: ptr.To(intstr.FromInt32(0)), wantErr: true},
		{pipeline: ptr.To(intstr.FromInt32(-3)), wantErr: true},
		{pipeline: ptr.To(intstr.FromString("0")), wantErr: true},
		{pipeline: ptr.To(intstr.FromString("-3")), wantErr: true},
		{pipeline: ptr.To(intstr.FromString("many")), wantErr: true},
		{pipeline: ptr.To(intstr.FromString("")), wantErr: true},
		{pipeline: ptr.To(intstr.FromString("99999999999")), wantErr: true},
	}
	for _, tc := range cases {
		s := redisv1alpha1.RedisClusterSpec{UpdateStrategy: redisv1alpha1.RedisUpdateStrategy{Pipeline: tc.pipeline}}
		got, err := s.PipelineKeys()
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("pipeline %v: PipelineKeys() = %d, %v; want %d, error %v", tc.pipeline, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestPodTemplate(t *testing.T) {
	if got := (&redisv1alpha1.RedisClusterSpec{}).PodTemplate(); got.MiddlewareImage != "" || got.Volumes.Type != "" || got.Env != nil {
		t.Errorf("PodTemplate() of no entry = %+v, want the zero template", got)
	}
	s := redisv1alpha1.RedisClusterSpec{Pod: []redisv1alpha1.RedisPodTemplate{{ConfigMap: "first"}, {ConfigMap: "second"}}}
	if got := s.PodTemplate().ConfigMap; got != "first" {
		t.Errorf("PodTemplate().ConfigMap = %q, want the first entry's", got)
	}
}
