/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

var strict = client.FieldValidation("Strict")

// validCluster is the smallest spec the API server accepts: 6 instances, 3 masters.
func validCluster(name string) *redisv1alpha1.RedisCluster {
	return &redisv1alpha1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       redisv1alpha1.RedisClusterSpec{Replicas: 6, Version: "7.2"},
	}
}

func onePod(p redisv1alpha1.RedisPodTemplate) []redisv1alpha1.RedisPodTemplate {
	return []redisv1alpha1.RedisPodTemplate{p}
}

func pipeline(v intstr.IntOrString) *intstr.IntOrString { return &v }

// requireRefused checks err is the API server's Invalid error and mentions every want.
func requireRefused(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want refused with %q", want)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("refused with %v, want an Invalid error", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err.Error(), w)
		}
	}
}

func TestBadSpecsAreRefused(t *testing.T) {
	needAPIServer(t)
	cases := []struct {
		name   string
		mutate func(*redisv1alpha1.RedisCluster)
		want   []string
	}{
		{
			name:   "fewer than 3 masters",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Replicas = 4 },
			want:   []string{"spec.replicas", "4 instances with replicasPerMaster 1 give 2 masters; a Redis Cluster needs at least 3"},
		},
		{
			name: "fewer than 3 masters with 2 replicas each",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Replicas, rc.Spec.ReplicasPerMaster = 8, ptr.To[int32](2)
			},
			want: []string{"spec.replicas", "8 instances with replicasPerMaster 2 give 2 masters; a Redis Cluster needs at least 3"},
		},
		{
			name:   "spec.tls without a Secret name",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.TLS = &redisv1alpha1.TLSSpec{} },
			want:   []string{"spec.tls.secretName"},
		},
		{
			name: "spec.tls with an unknown clientAuth",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.TLS = &redisv1alpha1.TLSSpec{SecretName: "cert", ClientAuth: "yes"}
			},
			want: []string{"spec.tls.clientAuth", `supported values: "Required", "Optional", "None"`},
		},
		{
			name:   "no replicas at all",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Replicas = 0 },
			want:   []string{"spec.replicas", "0 instances with replicasPerMaster 1 give 0 masters"},
		},
		{
			name:   "more instances than Redis Cluster is built for",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Replicas = redisv1alpha1.MaxReplicas + 1 },
			want:   []string{"spec.replicas", "less than or equal to 1000"},
		},
		{
			name: "replicasPerMaster above 5",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Replicas, rc.Spec.ReplicasPerMaster = 21, ptr.To[int32](6)
			},
			want: []string{"spec.replicasPerMaster", "less than or equal to 5"},
		},
		{
			name:   "negative replicasPerMaster",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.ReplicasPerMaster = ptr.To[int32](-1) },
			want:   []string{"spec.replicasPerMaster", "greater than or equal to 0"},
		},
		{
			name: "users without a password",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.DisablePassword = true
				rc.Spec.Users = []redisv1alpha1.RedisUser{appUser("app", "+@read")}
			},
			want: []string{"spec.users", "need a password on the default user"},
		},
		{
			name: "disablePassword with a password Secret",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.DisablePassword = true
				rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "redis-pw"}
			},
			want: []string{"spec.disablePassword", "cannot be set with spec.passwordSecret"},
		},
		{
			name:   "Redis 5",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Version = "5.0.14-alpine" },
			want:   []string{"spec.version", "Redis below 6 is refused"},
		},
		{
			name:   "Redis 3.2.8, the seed's, not paused",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Version = "3.2.8" },
			want:   []string{"spec.version", "Redis below 6 is refused"},
		},
		{
			name:   "Redis 4 spelt with a v",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Version = "v4" },
			want:   []string{"spec.version", "Redis below 6 is refused"},
		},
		{
			name: "a user named default",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "pw"}
				rc.Spec.Users = []redisv1alpha1.RedisUser{appUser("default", "+@read")}
			},
			want: []string{"spec.users[0].name", "default, operator and operator-exporter are the users the operator manages"},
		},
		{
			name: "two users of one name",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "pw"}
				rc.Spec.Users = []redisv1alpha1.RedisUser{appUser("app", "+@read"), appUser("app", "+@write")}
			},
			want: []string{"spec.users[1]", "Duplicate value"},
		},
		{
			name: "a user name with a space",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "pw"}
				rc.Spec.Users = []redisv1alpha1.RedisUser{appUser("my app", "+@read")}
			},
			want: []string{"spec.users[0].name", "should match"},
		},
		{
			name: "a password in the rules",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "pw"}
				rc.Spec.Users = []redisv1alpha1.RedisUser{appUser("app", "+@read >hunter2 ~*")}
			},
			want: []string{"spec.users[0].rules", "no password or on/off rules"},
		},
		{
			name: "rules over two lines",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "pw"}
				rc.Spec.Users = []redisv1alpha1.RedisUser{appUser("app", "+@read\nuser evil on nopass")}
			},
			want: []string{"spec.users[0].rules"},
		},
		{
			name: "two pod entries",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Pod = []redisv1alpha1.RedisPodTemplate{{}, {}}
			},
			want: []string{"spec.pod", "must have at most 1 item"},
		},
		{
			name:   "unknown updateStrategy type",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.UpdateStrategy.Type = "Random" },
			want:   []string{"spec.updateStrategy.type", `Unsupported value: "Random"`, `"AutoReceive"`, `"AssignReceive"`},
		},
		{
			name: "AssignReceive without assignStrategies",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.UpdateStrategy.Type = redisv1alpha1.UpdateStrategyAssignReceive
			},
			want: []string{"spec.updateStrategy.assignStrategies", "type AssignReceive needs at least one entry"},
		},
		{
			name: "more assignStrategies entries than masters",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.UpdateStrategy.Type = redisv1alpha1.UpdateStrategyAssignReceive
				for i := 0; i < 5; i++ {
					rc.Spec.UpdateStrategy.AssignStrategies = append(rc.Spec.UpdateStrategy.AssignStrategies, redisv1alpha1.AssignStrategy{Slots: 100, FromReplicas: "demo-0"})
				}
			},
			want: []string{"spec.updateStrategy.assignStrategies", "more entries than masters"},
		},
		{
			name: "assign strategy of 0 slots",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.UpdateStrategy.Type = redisv1alpha1.UpdateStrategyAssignReceive
				rc.Spec.UpdateStrategy.AssignStrategies = []redisv1alpha1.AssignStrategy{{Slots: 0, FromReplicas: "demo-0"}}
			},
			want: []string{"spec.updateStrategy.assignStrategies[0].slots", "greater than or equal to 1"},
		},
		{
			name: "assign strategy without fromReplicas",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.UpdateStrategy.Type = redisv1alpha1.UpdateStrategyAssignReceive
				rc.Spec.UpdateStrategy.AssignStrategies = []redisv1alpha1.AssignStrategy{{Slots: 100}}
			},
			want: []string{"spec.updateStrategy.assignStrategies[0].fromReplicas"},
		},
		{
			name:   "pipeline 0",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.UpdateStrategy.Pipeline = pipeline(intstr.FromInt32(0)) },
			want:   []string{"spec.updateStrategy.pipeline", "must be a positive whole number of keys per MIGRATE batch"},
		},
		{
			name:   "negative pipeline",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.UpdateStrategy.Pipeline = pipeline(intstr.FromInt32(-5)) },
			want:   []string{"spec.updateStrategy.pipeline", "must be a positive whole number"},
		},
		{
			name: `pipeline "0"`,
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.UpdateStrategy.Pipeline = pipeline(intstr.FromString("0"))
			},
			want: []string{"spec.updateStrategy.pipeline", "must be a positive whole number"},
		},
		{
			name: `pipeline "-5"`,
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.UpdateStrategy.Pipeline = pipeline(intstr.FromString("-5"))
			},
			want: []string{"spec.updateStrategy.pipeline", "must be a positive whole number"},
		},
		{
			name: `pipeline "many"`,
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.UpdateStrategy.Pipeline = pipeline(intstr.FromString("many"))
			},
			want: []string{"spec.updateStrategy.pipeline", "must be a positive whole number"},
		},
		{
			name: `pipeline ""`,
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.UpdateStrategy.Pipeline = pipeline(intstr.FromString(""))
			},
			want: []string{"spec.updateStrategy.pipeline", "must be a positive whole number"},
		},
		{
			name: "nfs without a claim name",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{Volumes: redisv1alpha1.RedisVolumes{Type: redisv1alpha1.VolumeTypeNFS}})
			},
			want: []string{"spec.pod[0].volumes.persistentVolumeClaimName", "volumes of type nfs need the name of an existing PersistentVolumeClaim"},
		},
		{
			name: "unknown volume type",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{Volumes: redisv1alpha1.RedisVolumes{Type: "ceph"}})
			},
			want: []string{"spec.pod[0].volumes.type", `Unsupported value: "ceph"`},
		},
		{
			name: "relative hostPath",
			mutate: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{Volumes: redisv1alpha1.RedisVolumes{Type: redisv1alpha1.VolumeTypeHostPath, HostPath: "data"}})
			},
			want: []string{"spec.pod[0].volumes.hostPath"},
		},
		{
			name:   "empty version",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Version = "" },
			want:   []string{"spec.version", "at least 1 chars long"},
		},
		{
			name:   "unknown finalizers policy",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Finalizers = "background" },
			want:   []string{"spec.finalizers", `Unsupported value: "background"`},
		},
		{
			name:   "unknown client Service type",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.ClientService.Type = corev1.ServiceTypeExternalName },
			want:   []string{"spec.clientService.type", `Unsupported value: "ExternalName"`},
		},
		{
			name:   "password Secret without a name",
			mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{} },
			want:   []string{"spec.passwordSecret.name"},
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := validCluster(fmt.Sprintf("bad-%d", i))
			tc.mutate(rc)
			err := k8sClient.Create(context.Background(), rc, strict)
			requireRefused(t, err, tc.want...)
			t.Logf("refused: %v", err)
		})
	}
}

func TestGoodSpecsAreAccepted(t *testing.T) {
	needAPIServer(t)
	cases := []struct {
		name   string
		mutate func(*redisv1alpha1.RedisCluster)
	}{
		{name: "defaults only", mutate: func(*redisv1alpha1.RedisCluster) {}},
		{name: "masters only", mutate: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Replicas, rc.Spec.ReplicasPerMaster = 3, ptr.To[int32](0)
		}},
		{name: "2 replicas per master", mutate: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Replicas, rc.Spec.ReplicasPerMaster = 9, ptr.To[int32](2)
		}},
		{name: "5 replicas per master", mutate: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Replicas, rc.Spec.ReplicasPerMaster = 18, ptr.To[int32](5)
		}},
		{name: "odd instance count", mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Replicas = 7 }},
		{name: "users with the generated password", mutate: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Users = []redisv1alpha1.RedisUser{appUser("app", "+@read")}
		}},
		{name: "no password on purpose", mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.DisablePassword = true }},
		{name: "Redis 6", mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Version = "6.2.14" }},
		{name: "Redis 10", mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Version = "10.0" }},
		{name: "Redis latest", mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Version = "latest" }},
		{name: "Redis 3.2.8 paused (the seed)", mutate: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Version, rc.Spec.Pause = "3.2.8", true
		}},
		{name: "the largest cluster", mutate: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Replicas = redisv1alpha1.MaxReplicas }},
		{name: "pipeline as a number", mutate: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.UpdateStrategy.Pipeline = pipeline(intstr.FromInt32(100))
		}},
		{name: "pipeline as a string", mutate: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.UpdateStrategy.Pipeline = pipeline(intstr.FromString("100"))
		}},
		{name: "AssignReceive with strategies", mutate: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.UpdateStrategy = redisv1alpha1.RedisUpdateStrategy{
				Type:             redisv1alpha1.UpdateStrategyAssignReceive,
				AssignStrategies: []redisv1alpha1.AssignStrategy{{Slots: 2000, FromReplicas: "demo-0,demo-1"}},
			}
		}},
		{name: "nfs with a claim", mutate: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{Volumes: redisv1alpha1.RedisVolumes{Type: redisv1alpha1.VolumeTypeNFS, PersistentVolumeClaimName: "redis-data"}})
		}},
		{name: "a claim per pod", mutate: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{Volumes: redisv1alpha1.RedisVolumes{
				Type: redisv1alpha1.VolumeTypeVolumeClaimTemplate, StorageClassName: ptr.To("fast"), Size: resource.MustParse("5Gi"),
			}})
		}},
		{name: "every addition", mutate: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "redis-auth"}
			rc.Spec.ClientService = redisv1alpha1.ClientServiceSpec{Type: corev1.ServiceTypeNodePort, Annotations: map[string]string{"a": "b"}}
			rc.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{
				Tolerations:       []corev1.Toleration{{Key: "redis", Operator: corev1.TolerationOpExists}},
				NodeSelector:      map[string]string{"disk": "ssd"},
				PriorityClassName: "high",
				SecurityContext:   &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](999)},
				TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
				}},
				Volumes: redisv1alpha1.RedisVolumes{Type: redisv1alpha1.VolumeTypeHostPath, HostPath: "/srv/redis"},
			})
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := validCluster(fmt.Sprintf("good-%d", i))
			tc.mutate(rc)
			if err := k8sClient.Create(context.Background(), rc, strict); err != nil {
				t.Fatalf("refused: %v", err)
			}
			t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), rc) })
		})
	}
}

// TestDefaults checks what the API server fills in for a minimal spec.
func TestDefaults(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	rc := validCluster("defaults")
	rc.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{})
	rc.Spec.PasswordSecret = &redisv1alpha1.SecretKeyReference{Name: "auth"}
	if err := k8sClient.Create(ctx, rc, strict); err != nil {
		t.Fatalf("failed to create: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, rc) })
	got := &redisv1alpha1.RedisCluster{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(rc), got); err != nil {
		t.Fatalf("failed to get: %v", err)
	}
	s := got.Spec
	checks := []struct {
		field     string
		got, want any
	}{
		{"replicasPerMaster", s.ReplicasPerMaster, ptr.To[int32](1)},
		{"repository", s.Repository, "library/redis"},
		{"updateStrategy.type", s.UpdateStrategy.Type, redisv1alpha1.UpdateStrategyAutoReceive},
		{"updateStrategy.pipeline", s.UpdateStrategy.Pipeline, pipeline(intstr.FromInt32(100))},
		{"pod[0].volumes.type", s.Pod[0].Volumes.Type, redisv1alpha1.VolumeTypeEmptyDir},
		{"clientService.type", s.ClientService.Type, corev1.ServiceTypeClusterIP},
		{"passwordSecret.key", s.PasswordSecret.Key, "password"},
		{"finalizers", s.Finalizers, ""},
	}
	for _, c := range checks {
		if fmt.Sprint(deref(c.got)) != fmt.Sprint(deref(c.want)) {
			t.Errorf("%s = %v, want %v", c.field, deref(c.got), deref(c.want))
		}
	}
}

func deref(v any) any {
	switch p := v.(type) {
	case *int32:
		return *p
	case *intstr.IntOrString:
		return p.String()
	}
	return v
}

// TestVolumeTypeCannotChange checks the transition rule: an existing cluster keeps its
// volume type, while other changes go through.
func TestVolumeTypeCannotChange(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()

	nfs := validCluster("volume-change-nfs")
	nfs.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{Volumes: redisv1alpha1.RedisVolumes{Type: redisv1alpha1.VolumeTypeNFS, PersistentVolumeClaimName: "data"}})
	implicit := validCluster("volume-change-implicit") // no pod entry: emptyDir
	for _, rc := range []*redisv1alpha1.RedisCluster{nfs, implicit} {
		if err := k8sClient.Create(ctx, rc, strict); err != nil {
			t.Fatalf("failed to create %s: %v", rc.Name, err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, rc) })
	}

	nfs.Spec.Version = "7.4"
	nfs.Spec.Replicas = 8
	if err := k8sClient.Update(ctx, nfs, strict); err != nil {
		t.Fatalf("an update keeping the volume type was refused: %v", err)
	}

	nfs.Spec.Pod[0].Volumes = redisv1alpha1.RedisVolumes{Type: redisv1alpha1.VolumeTypeHostPath}
	requireRefused(t, k8sClient.Update(ctx, nfs, strict),
		"spec.pod", "spec.pod[0].volumes.type: cannot change from nfs to hostPath on an existing cluster")

	implicit.Spec.Pod = onePod(redisv1alpha1.RedisPodTemplate{Volumes: redisv1alpha1.RedisVolumes{Type: redisv1alpha1.VolumeTypeVolumeClaimTemplate}})
	requireRefused(t, k8sClient.Update(ctx, implicit, strict),
		"cannot change from emptyDir to volumeClaimTemplate")

	// Spelling out the default is no change.
	implicit.Spec.Pod[0].Volumes.Type = redisv1alpha1.VolumeTypeEmptyDir
	if err := k8sClient.Update(ctx, implicit, strict); err != nil {
		t.Fatalf("spelling out the default emptyDir was refused: %v", err)
	}
}

// TestTLSCannotBeAddedOrRemoved checks the transition rule of spec.tls: a cluster keeps
// TLS or plain TCP for life, while its Secret name may change.
func TestTLSCannotBeAddedOrRemoved(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	plain := validCluster("tls-add")
	sealed := validCluster("tls-remove")
	sealed.Spec.TLS = &redisv1alpha1.TLSSpec{SecretName: "cert"}
	for _, rc := range []*redisv1alpha1.RedisCluster{plain, sealed} {
		if err := k8sClient.Create(ctx, rc, strict); err != nil {
			t.Fatalf("failed to create %s: %v", rc.Name, err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, rc) })
	}
	plain.Spec.TLS = &redisv1alpha1.TLSSpec{SecretName: "cert"}
	requireRefused(t, k8sClient.Update(ctx, plain, strict), "spec.tls", "cannot be added to or removed from an existing cluster")
	sealed.Spec.TLS.SecretName = "renamed"
	if err := k8sClient.Update(ctx, sealed, strict); err != nil {
		t.Fatalf("a new Secret name was refused: %v", err)
	}
	sealed.Spec.TLS = nil
	requireRefused(t, k8sClient.Update(ctx, sealed, strict), "spec.tls", "cannot be added to or removed from an existing cluster")
}

// TestScaleSubresource checks `kubectl scale` reaches spec.replicas and the masters rule.
func TestScaleSubresource(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	rc := validCluster("scale")
	if err := k8sClient.Create(ctx, rc, strict); err != nil {
		t.Fatalf("failed to create: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, rc) })

	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 8}}
	if err := k8sClient.SubResource("scale").Update(ctx, rc, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("failed to scale to 8: %v", err)
	}
	got := &redisv1alpha1.RedisCluster{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(rc), got); err != nil {
		t.Fatalf("failed to get: %v", err)
	}
	if got.Spec.Replicas != 8 {
		t.Fatalf("spec.replicas = %d after scaling to 8", got.Spec.Replicas)
	}

	scale = &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
	err := k8sClient.SubResource("scale").Update(ctx, got, client.WithSubResourceBody(scale))
	requireRefused(t, err, "4 instances with replicasPerMaster 1 give 2 masters")

	// `kubectl scale rec/scale --replicas=5000` meets the upper bound too.
	scale = &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5000}}
	err = k8sClient.SubResource("scale").Update(ctx, got, client.WithSubResourceBody(scale))
	requireRefused(t, err, "spec.replicas", "less than or equal to 1000")
}

func appUser(name, rules string) redisv1alpha1.RedisUser {
	return redisv1alpha1.RedisUser{Name: name, PasswordSecret: redisv1alpha1.SecretKeyReference{Name: name + "-pw", Key: "password"}, Rules: rules}
}

// TestRestoreFromIsFixedAtCreation checks spec.restoreFrom: accepted on a new cluster,
// refused when empty, added, changed or removed afterwards, each refusal naming the field.
func TestRestoreFromIsFixedAtCreation(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()

	empty := validCluster("restore-empty-name")
	empty.Spec.RestoreFrom = &redisv1alpha1.RestoreSource{}
	requireRefused(t, k8sClient.Create(ctx, empty, strict), "spec.restoreFrom.backup")

	plain := validCluster("restore-add")
	restored := validCluster("restore-change")
	restored.Spec.RestoreFrom = &redisv1alpha1.RestoreSource{Backup: "nightly"}
	for _, rc := range []*redisv1alpha1.RedisCluster{plain, restored} {
		if err := k8sClient.Create(ctx, rc, strict); err != nil {
			t.Fatalf("failed to create %s: %v", rc.Name, err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, rc) })
	}
	if got := restored.Spec.RestoreFrom; got.Backup != "nightly" || got.Replace {
		t.Fatalf("restoreFrom stored as %+v", got)
	}

	// Other fields still change.
	restored.Spec.Replicas = 8
	if err := k8sClient.Update(ctx, restored, strict); err != nil {
		t.Fatalf("an update keeping restoreFrom was refused: %v", err)
	}

	plain.Spec.RestoreFrom = &redisv1alpha1.RestoreSource{Backup: "nightly"}
	requireRefused(t, k8sClient.Update(ctx, plain, strict), "spec.restoreFrom", "cannot be added to or removed from an existing cluster")

	restored.Spec.RestoreFrom = &redisv1alpha1.RestoreSource{Backup: "weekly"}
	requireRefused(t, k8sClient.Update(ctx, restored, strict), "spec.restoreFrom", "immutable")
	restored.Spec.RestoreFrom = &redisv1alpha1.RestoreSource{Backup: "nightly", Replace: true}
	requireRefused(t, k8sClient.Update(ctx, restored, strict), "spec.restoreFrom", "immutable")
	restored.Spec.RestoreFrom = nil
	requireRefused(t, k8sClient.Update(ctx, restored, strict), "spec.restoreFrom", "cannot be added to or removed from an existing cluster")
}

// TestExternalAccessCannotBeRemovedOrRetyped checks the transition rule of
// spec.externalAccess: it may be added to a running cluster (the nodes announce their new
// addresses live), but not removed or switched between NodePort and LoadBalancer, which
// would leave the nodes announcing addresses that no longer work.
func TestExternalAccessCannotBeRemovedOrRetyped(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	rc := validCluster("external-retype")
	if err := k8sClient.Create(ctx, rc, strict); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, rc) })
	rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalNodePort}
	if err := k8sClient.Update(ctx, rc, strict); err != nil {
		t.Fatalf("adding external access was refused: %v", err)
	}
	rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalLoadBalancer}
	requireRefused(t, k8sClient.Update(ctx, rc, strict), "spec.externalAccess", "cannot be removed or change type")
	rc.Spec.ExternalAccess = nil
	requireRefused(t, k8sClient.Update(ctx, rc, strict), "spec.externalAccess", "cannot be removed or change type")
}

// TestExternalAccessHostname checks spec.externalAccess.hostname: required with spec.tls
// (names, not IPs, are what a TLS client checks), a pattern that names each node apart;
// spec.tls.disablePlainPort, required with externalAccess (the nodes announce TLS ports);
// and spec.announceHostnames (the names inside), not with externalAccess.
func TestExternalAccessHostname(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	withTLS := func(name string, access *redisv1alpha1.ExternalAccessSpec) *redisv1alpha1.RedisCluster {
		rc := validCluster(name)
		rc.Spec.TLS = &redisv1alpha1.TLSSpec{SecretName: "demo-cert", DisablePlainPort: true}
		rc.Spec.ExternalAccess = access
		return rc
	}
	requireRefused(t, k8sClient.Create(ctx, withTLS("external-tls-ip", &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalNodePort}), strict),
		"spec.externalAccess.hostname", "required with spec.tls")
	plainOpen := withTLS("external-tls-plain-port", &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalNodePort, Hostname: "{{pod}}.redis.example.com"})
	plainOpen.Spec.TLS.DisablePlainPort = false
	requireRefused(t, k8sClient.Create(ctx, plainOpen, strict), "spec.tls.disablePlainPort", "must be true with spec.externalAccess")
	for _, bad := range []string{"redis.example.com", "{{name}}.example.com", "{{pod}}.Example.com", "{{pod}}_x.example.com"} {
		rc := validCluster("external-bad-hostname")
		rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalNodePort, Hostname: bad}
		if err := k8sClient.Create(ctx, rc, strict); err == nil || !strings.Contains(err.Error(), "spec.externalAccess.hostname") {
			_ = k8sClient.Delete(ctx, rc)
			t.Errorf("hostname %q: %v, want refused naming spec.externalAccess.hostname", bad, err)
		}
	}
	both := validCluster("external-and-inside-names")
	both.Spec.AnnounceHostnames = true
	both.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalNodePort}
	requireRefused(t, k8sClient.Create(ctx, both, strict), "spec.announceHostnames", "not with spec.externalAccess")
	inside := validCluster("inside-names")
	inside.Spec.AnnounceHostnames = true
	inside.Spec.TLS = &redisv1alpha1.TLSSpec{SecretName: "demo-cert"}
	if err := k8sClient.Create(ctx, inside, strict); err != nil {
		t.Errorf("announceHostnames with TLS: %v", err)
	} else {
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, inside) })
	}
	for i, good := range []string{"{{pod}}.redis.example.com", "r{{index}}.{{namespace}}.example.com"} {
		rc := withTLS(fmt.Sprintf("external-tls-name-%d", i), &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalLoadBalancer, Hostname: good})
		if err := k8sClient.Create(ctx, rc, strict); err != nil {
			t.Errorf("hostname %q with TLS: %v", good, err)
			continue
		}
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, rc) })
	}
}
