package controller

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/fsm"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Direct tests of the pure functions of decide, act and status: each takes a scope built
// by hand (no API server, no Redis) and answers from it alone.

// pureCluster is a RedisCluster of replicas pods, 1 replica per master, in phase.
func pureCluster(replicas int32, phase fsm.Phase) *redisv1alpha1.RedisCluster {
	rc := &redisv1alpha1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "rc", Namespace: "ns", Generation: 3},
		Spec:       redisv1alpha1.RedisClusterSpec{Replicas: replicas, ReplicasPerMaster: ptr.To(int32(1))},
	}
	rc.Status.Phase = redisv1alpha1.RedisClusterPhase(phase)
	return rc
}

// formed marks the cluster formed (the Formed condition).
func formed(rc *redisv1alpha1.RedisCluster) *redisv1alpha1.RedisCluster {
	meta.SetStatusCondition(&rc.Status.ClusterConditions, metav1.Condition{Type: ConditionFormed, Status: metav1.ConditionTrue, Reason: "Bootstrapped"})
	return rc
}

// pureID is the 40-character node ID of ordinal i.
func pureID(i int) string { return fmt.Sprintf("%040d", i+1) }

// pureState is a healthy cluster of n members: masters 0..n/2-1 share the slots, member
// n/2+k replicates master k. Every member sees the same lines, with its own as myself.
func pureState(n int) *topology.ClusterState {
	masters := n / 2
	var lines []string
	for i := 0; i < n; i++ {
		role, master, slots := "master", "-", ""
		if i < masters {
			lo, hi := i*topology.SlotCount/masters, (i+1)*topology.SlotCount/masters-1
			slots = fmt.Sprintf(" %d-%d", lo, hi)
		} else {
			role, master = "slave", pureID(i-masters)
		}
		lines = append(lines, fmt.Sprintf("%s 10.0.0.%d:6379@16379 %%s%s %s 0 0 %d connected%s", pureID(i), i+1, role, master, i+1, slots))
	}
	st := &topology.ClusterState{}
	for i := 0; i < n; i++ {
		text := ""
		for j, l := range lines {
			self := ""
			if i == j {
				self = "myself,"
			}
			text += fmt.Sprintf(l, self) + "\n"
		}
		nodes, err := topology.ParseClusterNodes(text)
		if err != nil {
			panic(err)
		}
		st.Members = append(st.Members, topology.MemberState{
			Member: topology.Member{Pod: fmt.Sprintf("rc-%d", i), Addr: fmt.Sprintf("10.0.0.%d:6379", i+1)},
			Nodes:  nodes,
			Info:   topology.ClusterInfo{State: "ok", KnownNodes: n, Size: masters},
		})
	}
	return st
}

// purePods are n running, ready pods, each on revision rev.
func purePods(n int, rev string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rc-%d", i), Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: rev}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.0.%d", i+1),
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		})
	}
	return out
}

// pureStatefulSet is a StatefulSet of replicas pods, all ready, whose controller has seen
// its spec and whose update revision is rev.
func pureStatefulSet(replicas int32, rev string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rc", Generation: 1},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)},
		Status:     appsv1.StatefulSetStatus{ObservedGeneration: 1, ReadyReplicas: replicas, UpdateRevision: rev},
	}
}

// healthyScope is a formed, healthy cluster of 6 pods in phase, all on revision "new".
func healthyScope(phase fsm.Phase) *scope {
	return &scope{
		cluster:     formed(pureCluster(6, phase)),
		now:         time.Now(),
		statefulSet: pureStatefulSet(6, "new"),
		pods:        purePods(6, "new"),
		appliedSize: 6,
		redis:       pureState(6),
	}
}

func TestObservation(t *testing.T) {
	r := &Reconciler{}
	healthy := map[string]bool{
		"SpecValid": true, "AllMet": true, "NodesAgree": true, "SlotsCovered": true, "ReplicasAttached": true,
		"ClusterOK": true, "SlotsPlaced": true, "RemovedNodesForgotten": true, "ReplicasInSync": true, "PodsReady": true,
		"StatefulSetAtSize": true, "AllPodsUpdated": true, "Restored": true,
		"Broken": false, "CannotProceed": false, "TemplateChanged": false, "Deleting": false, "Paused": false,
		"TimedOut": false, "SpecChanged": false,
	}
	tests := []struct {
		name  string
		phase fsm.Phase
		edit  func(s *scope) // of a healthy cluster in phase
		facts map[string]bool
		// observed and desired sizes, and the message of CannotProceed
		observed, desired int32
		message           string
	}{{
		name: "a healthy Running cluster has every fact true and no trouble", phase: fsm.Running,
		facts: healthy, observed: 6, desired: 6,
	}, {
		name: "a refused spec is invalid and cannot proceed, with its words", phase: fsm.Running,
		edit:  func(s *scope) { s.specErr = errors.New("spec.version: no such image") },
		facts: map[string]bool{"SpecValid": false, "CannotProceed": true}, message: "spec.version: no such image",
	}, {
		name: "nothing read from Redis: no Redis fact holds and the size is the applied one", phase: fsm.Running,
		edit: func(s *scope) { s.redis, s.appliedSize = nil, 8 },
		facts: map[string]bool{"AllMet": false, "NodesAgree": false, "SlotsCovered": false, "ClusterOK": false,
			"SlotsPlaced": false, "ReplicasInSync": false, "Broken": false},
		observed: 8, desired: 6,
	}, {
		name: "slots nobody holds are Broken", phase: fsm.Running,
		edit: func(s *scope) {
			for i := range s.redis.Members {
				for j := range s.redis.Members[i].Nodes {
					if n := &s.redis.Members[i].Nodes[j]; n.ID == pureID(0) {
						n.Slots = nil
					}
				}
			}
		},
		facts: map[string]bool{"Broken": true, "SlotsCovered": false},
	}, {
		name: "a replica whose link is down is not in sync", phase: fsm.Upgrading,
		edit: func(s *scope) {
			s.replication = map[string]topology.Replication{"rc-3": {Role: "slave", LinkUp: false}}
		},
		facts: map[string]bool{"ReplicasInSync": false},
	}, {
		name: "while Scaling out, slots not yet moved to the new masters are not placed", phase: fsm.Scaling,
		edit:     func(s *scope) { s.cluster.Spec.Replicas = 8 }, // 4 masters asked, 3 hold the slots
		facts:    map[string]bool{"SlotsPlaced": false, "RemovedNodesForgotten": false, "AllMet": false},
		observed: 6, desired: 8,
	}, {
		name: "pods on an older revision of a formed cluster are a changed template", phase: fsm.Running,
		edit:  func(s *scope) { s.pods[2].Labels[appsv1.ControllerRevisionHashLabelKey] = "old" },
		facts: map[string]bool{"TemplateChanged": true, "AllPodsUpdated": false},
	}, {
		name: "paused and being deleted", phase: fsm.Running,
		edit: func(s *scope) {
			s.cluster.Spec.Pause = true
			s.cluster.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		},
		facts: map[string]bool{"Paused": true, "Deleting": true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := healthyScope(tt.phase)
			if tt.edit != nil {
				tt.edit(s)
			}
			o := r.observation(s)
			v := reflect.ValueOf(o)
			for fact, want := range tt.facts {
				if got := v.FieldByName(fact).Bool(); got != want {
					t.Errorf("%s = %v, want %v", fact, got, want)
				}
			}
			if tt.desired > 0 && (o.ObservedReplicas != tt.observed || o.DesiredReplicas != tt.desired) {
				t.Errorf("sizes %d/%d, want %d/%d", o.ObservedReplicas, o.DesiredReplicas, tt.observed, tt.desired)
			}
			if o.CannotProceedMessage != tt.message {
				t.Errorf("CannotProceedMessage %q, want %q", o.CannotProceedMessage, tt.message)
			}
		})
	}
}

func TestHeldSize(t *testing.T) {
	tests := []struct {
		name          string
		applied, spec int32
		decided       fsm.Phase
		want          int32
	}{
		{"Running keeps the applied size", 6, 6, fsm.Running, 6},
		{"a larger spec while still Running is not applied yet", 6, 8, fsm.Running, 6},
		{"Scaling out applies the new size at once", 6, 8, fsm.Scaling, 8},
		{"Scaling in holds the larger size until the leaving nodes are empty", 8, 6, fsm.Scaling, 8},
		{"Upgrading keeps the applied size", 6, 8, fsm.Upgrading, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scope{cluster: pureCluster(tt.spec, fsm.Running), appliedSize: tt.applied, decision: fsm.Decision{Phase: tt.decided}}
			if got := heldSize(s); got != tt.want {
				t.Errorf("heldSize = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestNextRestart(t *testing.T) {
	tests := []struct {
		name       string
		old        []int // ordinals on the old revision
		missing    []int // ordinals without a pod
		wantPod    string
		wantMaster bool
	}{
		{name: "every pod updated: none", wantPod: ""},
		{name: "replicas before masters", old: []int{0, 1, 4}, wantPod: "rc-4"},
		{name: "replicas in ordinal order", old: []int{5, 3}, wantPod: "rc-3"},
		{name: "then the first master", old: []int{2, 1}, wantPod: "rc-1", wantMaster: true},
		{name: "a member without its pod is skipped", old: []int{3, 0}, missing: []int{3}, wantPod: "rc-0", wantMaster: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := healthyScope(fsm.Upgrading)
			for _, i := range tt.old {
				s.pods[i].Labels[appsv1.ControllerRevisionHashLabelKey] = "old"
			}
			for _, i := range tt.missing {
				s.pods[i] = nil
			}
			m, master := nextRestart(s, "new")
			got := ""
			if m != nil {
				got = m.Pod
			}
			if got != tt.wantPod || master != tt.wantMaster {
				t.Errorf("nextRestart = %q master %v, want %q master %v", got, master, tt.wantPod, tt.wantMaster)
			}
		})
	}
}

func TestCannotProceed(t *testing.T) {
	badPipeline := func(s *scope) {
		p := intstr.FromString("many")
		s.cluster.Spec.UpdateStrategy.Pipeline = &p
	}
	noReplicas := func(s *scope) {
		// 3 masters without replicas on hostPath, the first master still to restart.
		s.cluster.Spec.Replicas, s.cluster.Spec.ReplicasPerMaster = 3, ptr.To(int32(0))
		s.cluster.Spec.Pod = []redisv1alpha1.RedisPodTemplate{{Volumes: redisv1alpha1.RedisVolumes{Type: redisv1alpha1.VolumeTypeHostPath}}}
		s.pods = purePods(3, "new")
		s.pods[1].Labels[appsv1.ControllerRevisionHashLabelKey] = "old"
		st := pureState(6)
		st.Members = st.Members[:3]
		s.redis = st
	}
	tests := []struct {
		name  string
		phase fsm.Phase
		edit  func(s *scope)
		want  string // a part of the error, "" for nil
	}{
		{name: "nothing stops a healthy Running cluster", phase: fsm.Running},
		{name: "a refused spec, in any phase", phase: fsm.Upgrading, edit: func(s *scope) { s.specErr = errors.New("spec.tls: no Secret") }, want: "spec.tls: no Secret"},
		{name: "a batch size that is no number stops Scaling", phase: fsm.Scaling, edit: badPipeline, want: "pipeline"},
		{name: "the same batch size does not stop Running", phase: fsm.Running, edit: badPipeline},
		{name: "Upgrading a master with no replica and no persistent data", phase: fsm.Upgrading, edit: noReplicas, want: "master rc-1 has no replica to fail over to"},
		{name: "the same master, but Running: no roll to stop", phase: fsm.Running, edit: noReplicas},
		{name: "the same master with persistent data", phase: fsm.Upgrading, edit: func(s *scope) {
			noReplicas(s)
			s.cluster.Spec.Pod[0].Volumes.Type = redisv1alpha1.VolumeTypeVolumeClaimTemplate
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := healthyScope(tt.phase)
			if tt.edit != nil {
				tt.edit(s)
			}
			err := cannotProceed(s)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("cannotProceed = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("cannotProceed = %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestComputeStatus(t *testing.T) {
	before := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	running := func() *scope {
		s := healthyScope(fsm.Running)
		meta.SetStatusCondition(&s.cluster.Status.ClusterConditions, metav1.Condition{Type: ConditionProgressing, Status: metav1.ConditionFalse,
			Reason: string(fsm.Running), Message: "phase Running", LastTransitionTime: metav1.NewTime(before), ObservedGeneration: 1})
		s.original = *s.cluster.Status.DeepCopy()
		s.decision = fsm.Decision{From: fsm.Running, Phase: fsm.Running}
		s.held = 6
		return s
	}
	progressing := func(st redisv1alpha1.RedisClusterStatus) *metav1.Condition {
		return meta.FindStatusCondition(st.ClusterConditions, ConditionProgressing)
	}
	tests := []struct {
		name      string
		edit      func(s *scope)
		succeeded bool
		check     func(st redisv1alpha1.RedisClusterStatus) string
	}{{
		name: "a healthy Running cluster: ready, observed, its size held, the clock kept", succeeded: true,
		check: func(st redisv1alpha1.RedisClusterStatus) string {
			if st.Phase != redisv1alpha1.PhaseRunning || st.Replicas != 6 || st.Masters != 3 || st.StatefulSetReplicas != 6 || st.ObservedGeneration != 3 {
				return fmt.Sprintf("phase %s replicas %d masters %d held %d observed %d", st.Phase, st.Replicas, st.Masters, st.StatefulSetReplicas, st.ObservedGeneration)
			}
			if !meta.IsStatusConditionTrue(st.ClusterConditions, ConditionReady) {
				return "not Ready"
			}
			if p := progressing(st); p == nil || !p.LastTransitionTime.Time.Equal(before) || p.ObservedGeneration != 1 {
				return fmt.Sprintf("Progressing %+v, want the old clock", p)
			}
			if len(st.Conditions) != 6 {
				return fmt.Sprintf("%d instance conditions, want 6", len(st.Conditions))
			}
			return ""
		},
	}, {
		name: "a failed reconcile does not observe the generation",
		check: func(st redisv1alpha1.RedisClusterStatus) string {
			if st.ObservedGeneration != 0 {
				return fmt.Sprintf("observed %d", st.ObservedGeneration)
			}
			return ""
		},
	}, {
		name: "a paused or refused spec is not observed either", succeeded: true,
		edit: func(s *scope) { s.cluster.Spec.Pause = true },
		check: func(st redisv1alpha1.RedisClusterStatus) string {
			if st.ObservedGeneration != 0 {
				return fmt.Sprintf("observed %d", st.ObservedGeneration)
			}
			return ""
		},
	}, {
		name: "a new phase restarts the clock and says why", succeeded: true,
		edit: func(s *scope) {
			s.decision = fsm.Decision{From: fsm.Running, Phase: fsm.Scaling, Event: fsm.Scale, Reason: "ReplicasChanged", Message: "6 -> 8 pods"}
		},
		check: func(st redisv1alpha1.RedisClusterStatus) string {
			p := progressing(st)
			if st.Phase != redisv1alpha1.PhaseScaling || p == nil || p.Status != metav1.ConditionTrue || !p.LastTransitionTime.Time.After(before) ||
				p.ObservedGeneration != 3 || p.Message != "6 -> 8 pods" {
				return fmt.Sprintf("phase %s Progressing %+v", st.Phase, p)
			}
			if !strings.HasPrefix(st.Reason, "ReplicasChanged: 6 -> 8 pods") {
				return "reason " + st.Reason
			}
			if meta.IsStatusConditionTrue(st.ClusterConditions, ConditionReady) {
				return "Ready while Scaling"
			}
			return ""
		},
	}, {
		name: "no decision keeps the stored phase; no StatefulSet holds no size", succeeded: true,
		edit: func(s *scope) { s.decision, s.statefulSet = fsm.Decision{}, nil },
		check: func(st redisv1alpha1.RedisClusterStatus) string {
			if st.Phase != redisv1alpha1.PhaseRunning || st.StatefulSetReplicas != 0 {
				return fmt.Sprintf("phase %s held %d", st.Phase, st.StatefulSetReplicas)
			}
			return ""
		},
	}, {
		name: "what Redis could not answer ends the reason", succeeded: true,
		edit: func(s *scope) { s.redis, s.redisErr = nil, errors.New("dial tcp: refused") },
		check: func(st redisv1alpha1.RedisClusterStatus) string {
			if !strings.HasSuffix(st.Reason, "Redis: dial tcp: refused") || st.Masters != 0 {
				return "reason " + st.Reason
			}
			if meta.IsStatusConditionTrue(st.ClusterConditions, ConditionReady) {
				return "Ready without Redis"
			}
			return ""
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := running()
			if tt.edit != nil {
				tt.edit(s)
			}
			if why := tt.check(computeStatus(s, tt.succeeded)); why != "" {
				t.Error(why)
			}
		})
	}
}
