package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hc-middleware/redis-cluster-operator/fsm"
)

// deriveDesired turns the rendered objects into the objects the decided phase applies,
// and lists those the server does not hold as desired (s.stale). It runs after the phase
// machine, so the holds below follow the phase being entered, not the one stored.
func deriveDesired(s *scope) error {
	s.held = heldSize(s)
	s.resized = resizedBy(s)
	s.desired = make([]*unstructured.Unstructured, 0, len(s.rendered))
	for _, obj := range s.rendered {
		desired := obj.DeepCopy()
		setOwner(desired, s.cluster)
		s.desired = append(s.desired, desired)
	}
	holdFormedStatefulSet(s)
	withholdClientService(s)
	return s.findStale()
}

// heldSize is the size the StatefulSet is held at in the decided phase, whatever its live
// size: the size the operator last applied (appliedSize), except while Scaling out, where
// the new size is applied at once. Scaling in keeps the larger size until reconcileScale
// shrinks it, once the leaving nodes hold nothing.
func heldSize(s *scope) int32 {
	held := s.appliedSize
	if s.decision.Phase == fsm.Scaling && s.cluster.Spec.Replicas > held {
		held = s.cluster.Spec.Replicas
	}
	return held
}

// resizedBy says who resized the StatefulSet away from the held size, "" when nobody
// did: the operator's own resizes keep spec.replicas in its managed fields.
func resizedBy(s *scope) string {
	sts := s.statefulSet
	if sts == nil || sts.Spec.Replicas == nil || *sts.Spec.Replicas == s.held {
		return ""
	}
	if _, ours := appliedReplicas(sts); ours {
		return ""
	}
	by := replicasManager(sts)
	if by == "" {
		by = "another field manager"
	}
	return fmt.Sprintf("StatefulSet %s was resized to %d pods outside the operator (by %s); put back to %d, the size this RedisCluster holds: resize with spec.replicas (kubectl scale rec/%s) instead",
		sts.Name, *sts.Spec.Replicas, by, s.held, s.cluster.Name)
}

// holdFormedStatefulSet keeps the desired StatefulSet at the held size (heldSize) and a
// formed cluster's, but in Upgrading, at its applied pod template. A new template (and the
// ConfigMap it reads) is applied only by the Upgrading phase, which then restarts the
// pods itself (the StatefulSet is OnDelete), failing each master over first; any other
// phase keeps the template so Running only decides to upgrade. The reconcile that moves
// Running to Upgrading applies the new template at once.
func holdFormedStatefulSet(s *scope) {
	for _, obj := range s.desired {
		if obj.GetKind() == "StatefulSet" {
			_ = unstructured.SetNestedField(obj.Object, int64(s.held), "spec", "replicas")
		}
	}
	if !formedOnce(&s.cluster.Status) || s.statefulSet == nil {
		return
	}
	// A Failed cluster whose spec was changed since the failure gets the template too, so a
	// spec set back after a failed upgrade reaches the StatefulSet (revertingFailed).
	upgrading := s.decision.Phase == fsm.Upgrading || revertingFailed(s.cluster)
	owned, err := extractOwned(s.statefulSet)
	if err != nil {
		return
	}
	appliedTemplate, found, _ := unstructured.NestedFieldCopy(owned, "spec", "template")
	kept := s.desired[:0]
	for _, obj := range s.desired {
		// The ConfigMap feeds the pod template (its hash is a template annotation): while
		// the template is held, so is the configuration a restarted pod would read.
		if obj.GetKind() == "ConfigMap" && s.templateChanged && !upgrading {
			continue
		}
		kept = append(kept, obj)
	}
	s.desired = kept
	for _, obj := range s.desired {
		if obj.GetKind() == "StatefulSet" && found && !upgrading {
			_ = unstructured.SetNestedField(obj.Object, appliedTemplate, "spec", "template")
		}
	}
}

// findStale lists the desired objects the server does not hold as desired, in apply
// order: absent ones, ones whose fields the operator owns hold other values, and a
// StatefulSet resized behind the operator's back. Nothing is stale while the spec is
// refused: nothing is applied then.
func (s *scope) findStale() error {
	s.stale = nil
	if s.specErr != nil {
		return nil
	}
	for _, desired := range s.desired {
		live := s.live[objectKey(desired)]
		if live == nil {
			s.stale = append(s.stale, desired)
			continue
		}
		same, err := ownedFieldsMatch(live, desired)
		if err != nil {
			return err
		}
		if !same || (desired.GetKind() == "StatefulSet" && s.resized != "") {
			s.stale = append(s.stale, desired)
		}
	}
	return nil
}

// objectKey is the kind/name that keys s.live.
func objectKey(obj *unstructured.Unstructured) string {
	return obj.GetKind() + "/" + obj.GetName()
}
