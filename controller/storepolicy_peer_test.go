package controller

import (
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/render"
)

// TestStorePolicyAdmitsTheClustersOperatorPeer: the store pod's NetworkPolicy is built in
// Go, the cluster's from templates/networkpolicy.cue; both must admit the operator by the
// same peer, with its namespace known and without.
func TestStorePolicyAdmitsTheClustersOperatorPeer(t *testing.T) {
	clusters, err := render.ReadFile("../config/samples/seed_rediscluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc := clusters[0]
	rc.Spec.NetworkPolicy = &redisv1alpha1.NetworkPolicySpec{Enabled: true, Clients: []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}}}
	for _, opNS := range []string{"redis-operator-system", ""} {
		rr, err := render.New(render.OperatorNamespace(opNS))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := rr.Render(rc, "")
		if err != nil {
			t.Fatal(err)
		}
		var admitted []networkingv1.NetworkPolicyPeer
		for _, o := range objs {
			if o.GetKind() != "NetworkPolicy" {
				continue
			}
			np := &networkingv1.NetworkPolicy{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, np); err != nil {
				t.Fatal(err)
			}
			for _, rule := range np.Spec.Ingress {
				admitted = append(admitted, rule.From...)
			}
		}
		if len(admitted) == 0 {
			t.Fatalf("operator namespace %q: the cluster's NetworkPolicy admits no peer", opNS)
		}
		store := storePolicySpec(rc.Namespace, "b-backup-store", opNS).Spec.Ingress[0].From[0]
		found := false
		for _, p := range admitted {
			found = found || reflect.DeepEqual(p, store)
		}
		if !found {
			t.Errorf("operator namespace %q: the store pod admits %+v, which the cluster's NetworkPolicy does not: %+v", opNS, store, admitted)
		}
	}
}
