/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// ReplicasPerMasterOrDefault is spec.replicasPerMaster, or DefaultReplicasPerMaster when
// unset (the API server defaults it, a CR read from a file may not have it).
func (s *RedisClusterSpec) ReplicasPerMasterOrDefault() int32 {
	if s.ReplicasPerMaster == nil {
		return DefaultReplicasPerMaster
	}
	return *s.ReplicasPerMaster
}

// Masters is the number of masters the spec asks for: replicas / (1 + replicasPerMaster),
// rounded down. It is 0 for a negative replicasPerMaster, which the API server refuses.
func (s *RedisClusterSpec) Masters() int32 {
	perMaster := s.ReplicasPerMasterOrDefault()
	if perMaster < 0 {
		return 0
	}
	return s.Replicas / (1 + perMaster)
}

// PodTemplate is the pod template in use: the first entry of spec.pod, or the zero
// template when there is none. It shares maps and slices with the spec: do not modify.
func (s *RedisClusterSpec) PodTemplate() RedisPodTemplate {
	if len(s.Pod) == 0 {
		return RedisPodTemplate{}
	}
	return s.Pod[0]
}

// Image is the Redis image: pod[0].middlewareImage when set, else repository:version
// (repository defaulting to DefaultRepository).
func (s *RedisClusterSpec) Image() string {
	if image := s.PodTemplate().MiddlewareImage; image != "" {
		return image
	}
	repository := s.Repository
	if repository == "" {
		repository = DefaultRepository
	}
	if s.Version == "" {
		return repository
	}
	return repository + ":" + s.Version
}

// PipelineKeys is spec.updateStrategy.pipeline as a number; see RedisUpdateStrategy.PipelineKeys.
func (s *RedisClusterSpec) PipelineKeys() (int, error) {
	return s.UpdateStrategy.PipelineKeys()
}

// PipelineKeys is how many keys each MIGRATE batch moves: pipeline as a number (it may
// be written 100 or "100"), DefaultPipeline when unset. An error when it is not a
// positive whole number, which the API server refuses anyway.
func (u *RedisUpdateStrategy) PipelineKeys() (int, error) {
	if u.Pipeline == nil {
		return DefaultPipeline, nil
	}
	var keys int
	switch u.Pipeline.Type {
	case intstr.Int:
		keys = int(u.Pipeline.IntVal)
	default:
		n, err := strconv.ParseInt(u.Pipeline.StrVal, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("failed to parse updateStrategy.pipeline %q as a number: %w", u.Pipeline.StrVal, err)
		}
		keys = int(n)
	}
	if keys <= 0 {
		return 0, fmt.Errorf("updateStrategy.pipeline must be a positive number of keys, got %s", u.Pipeline.String())
	}
	return keys, nil
}
