package render

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// byKind returns the first rendered object of kind, nil when there is none.
func byKind(objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	return nil
}

// TestPodsAreRestricted checks every case against the `restricted` Pod Security Standard
// as far as the pod template decides it: non-root with a fixed UID, RuntimeDefault
// seccomp, and on every container (init, redis, exporter) no privilege escalation, no
// capability and a read-only root filesystem with a writable /tmp.
func TestPodsAreRestricted(t *testing.T) {
	r := newRenderer(t)
	for _, c := range renderCases(t) {
		t.Run(c.name, func(t *testing.T) {
			objs, err := r.RenderFile(c.file, c.conf)
			if err != nil {
				t.Fatal(err)
			}
			var sts appsv1.StatefulSet
			fromUnstructured(t, byKind(objs, "StatefulSet"), &sts)
			pod := sts.Spec.Template.Spec
			psc := pod.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
				t.Fatalf("pod securityContext %+v: want runAsNonRoot", psc)
			}
			if psc.RunAsUser == nil || *psc.RunAsUser == 0 || psc.FSGroup == nil {
				t.Errorf("pod securityContext: runAsUser %v, fsGroup %v: want a fixed non-root UID and an fsGroup", psc.RunAsUser, psc.FSGroup)
			}
			if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod seccompProfile %+v: want RuntimeDefault", psc.SeccompProfile)
			}
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Errorf("automountServiceAccountToken %v: want false (nothing in the pod uses the token)", pod.AutomountServiceAccountToken)
			}
			tmp := false
			for _, v := range pod.Volumes {
				tmp = tmp || (v.Name == "tmp" && v.EmptyDir != nil)
			}
			if !tmp {
				t.Error("no emptyDir volume tmp")
			}
			all := append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
			for _, ctr := range all {
				sc := ctr.SecurityContext
				switch {
				case sc == nil:
					t.Errorf("container %s has no securityContext", ctr.Name)
					continue
				case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
					t.Errorf("container %s: allowPrivilegeEscalation is not false", ctr.Name)
				case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
					t.Errorf("container %s: readOnlyRootFilesystem is not true", ctr.Name)
				case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0:
					t.Errorf("container %s: capabilities %+v, want drop [ALL] and no add", ctr.Name, sc.Capabilities)
				}
				mounted := false
				for _, m := range ctr.VolumeMounts {
					mounted = mounted || (m.Name == "tmp" && m.MountPath == "/tmp")
				}
				if !mounted {
					t.Errorf("container %s does not mount the tmp emptyDir at /tmp", ctr.Name)
				}
			}
		})
	}
}

// TestUserSecurityContextOverridesFieldByField: spec.pod[0].securityContext changes the
// fields it sets and keeps the other defaults (netpol.yaml sets runAsUser only).
func TestUserSecurityContextOverridesFieldByField(t *testing.T) {
	objs, err := newRenderer(t).RenderFile("testdata/cases/netpol.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	var sts appsv1.StatefulSet
	fromUnstructured(t, byKind(objs, "StatefulSet"), &sts)
	psc := sts.Spec.Template.Spec.SecurityContext
	if *psc.RunAsUser != 1001 || *psc.RunAsGroup != 999 || *psc.FSGroup != 999 || !*psc.RunAsNonRoot {
		t.Errorf("securityContext %+v: want runAsUser 1001 from the spec and the other defaults", psc)
	}
}

// TestPodDisruptionBudget: one per cluster, selecting exactly the StatefulSet's pods, at
// most one of them unavailable.
func TestPodDisruptionBudget(t *testing.T) {
	r := newRenderer(t)
	for _, c := range renderCases(t) {
		objs, err := r.RenderFile(c.file, c.conf)
		if err != nil {
			t.Fatal(err)
		}
		var sts appsv1.StatefulSet
		var pdb policyv1.PodDisruptionBudget
		fromUnstructured(t, byKind(objs, "StatefulSet"), &sts)
		fromUnstructured(t, byKind(objs, "PodDisruptionBudget"), &pdb)
		if pdb.Name != sts.Name || pdb.Namespace != sts.Namespace {
			t.Errorf("%s: PodDisruptionBudget %s/%s, want %s/%s", c.name, pdb.Namespace, pdb.Name, sts.Namespace, sts.Name)
		}
		if !mapsEqual(pdb.Spec.Selector.MatchLabels, sts.Spec.Selector.MatchLabels) || len(pdb.Spec.Selector.MatchExpressions) != 0 {
			t.Errorf("%s: PDB selector %+v, want the StatefulSet's %v", c.name, pdb.Spec.Selector, sts.Spec.Selector.MatchLabels)
		}
		if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || pdb.Spec.MinAvailable != nil {
			t.Errorf("%s: PDB maxUnavailable %v minAvailable %v, want maxUnavailable 1 alone", c.name, pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
		}
	}
}

// TestNetworkPolicyClosesMetricsWithoutClients: with the NetworkPolicy enabled and no
// metricsClients, no rule admits the exporter's port 9121 (closed, not open to anyone).
func TestNetworkPolicyClosesMetricsWithoutClients(t *testing.T) {
	r := newRenderer(t)
	rcs, err := ReadFile("testdata/cases/netpol.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc := rcs[0]
	rc.Spec.NetworkPolicy.MetricsClients = nil
	objs, err := r.Render(rc, "")
	if err != nil {
		t.Fatal(err)
	}
	var np networkingv1.NetworkPolicy
	fromUnstructured(t, byKind(objs, "NetworkPolicy"), &np)
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port.IntVal == 9121 {
				t.Errorf("9121 admitted from %+v with no metricsClients", rule.From)
			}
		}
	}
}

// TestNetworkPolicyAdmitsTheOperatorFromItsNamespaceOnly: a pod labelled like the
// operator's in a tenant's namespace (any label can be set by whoever creates a pod) is
// not admitted to 6379; the operator's pods in the operator's namespace, which the API
// server names by kubernetes.io/metadata.name, are. Without a namespace given, only the
// cluster's own namespace.
func TestNetworkPolicyAdmitsTheOperatorFromItsNamespaceOnly(t *testing.T) {
	operatorPod := map[string]string{"app.kubernetes.io/name": "redis-cluster-operator"}
	for _, c := range []struct {
		operatorNS string
		admitted   map[string]bool // pod namespace -> admitted to 6379
	}{
		{"redis-operator-system", map[string]bool{"redis-operator-system": true, "tenant": false, "shop": false}},
		{"", map[string]bool{"redis-operator-system": false, "tenant": false, "shop": true}},
	} {
		r, err := New(OperatorNamespace(c.operatorNS))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := r.RenderFile("testdata/cases/netpol.yaml", "")
		if err != nil {
			t.Fatal(err)
		}
		var np networkingv1.NetworkPolicy
		fromUnstructured(t, byKind(objs, "NetworkPolicy"), &np)
		for ns, want := range c.admitted {
			if got := admits(t, np, ns, operatorPod, 6379); got != want {
				t.Errorf("operator namespace %q: a pod labelled as the operator's in namespace %s admitted to 6379: %v, want %v", c.operatorNS, ns, got, want)
			}
		}
	}
}

// admits evaluates a NetworkPolicy's ingress for a pod with labels podLabels in namespace
// ns (whose only label is the one the API server sets, kubernetes.io/metadata.name).
func admits(t *testing.T, np networkingv1.NetworkPolicy, ns string, podLabels map[string]string, port int32) bool {
	t.Helper()
	matches := func(sel *metav1.LabelSelector, l map[string]string) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		return s.Matches(labels.Set(l))
	}
	for _, rule := range np.Spec.Ingress {
		if !slices.ContainsFunc(rule.Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port.IntVal == port }) {
			continue
		}
		if len(rule.From) == 0 {
			return true
		}
		for _, peer := range rule.From {
			if peer.IPBlock != nil {
				continue
			}
			nsOK := ns == np.Namespace
			if peer.NamespaceSelector != nil {
				nsOK = matches(peer.NamespaceSelector, map[string]string{"kubernetes.io/metadata.name": ns})
			}
			podOK := peer.PodSelector == nil || matches(peer.PodSelector, podLabels)
			if nsOK && podOK {
				return true
			}
		}
	}
	return false
}

// TestNetworkPolicy: absent unless enabled; when enabled, the bus port only from the
// cluster's own pods, the client port from the clients and the operator, the exporter's
// from the metrics clients.
func TestNetworkPolicy(t *testing.T) {
	r := newRenderer(t)
	objs, err := r.RenderFile("../config/samples/redis_v1alpha1_rediscluster.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if np := byKind(objs, "NetworkPolicy"); np != nil {
		t.Fatalf("the demo sample renders NetworkPolicy %s without spec.networkPolicy.enabled", np.GetName())
	}
	objs, err = r.RenderFile("testdata/cases/netpol.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	var np networkingv1.NetworkPolicy
	fromUnstructured(t, byKind(objs, "NetworkPolicy"), &np)
	if np.Name != "fenced" || !mapsEqual(np.Spec.PodSelector.MatchLabels, map[string]string{"app.kubernetes.io/name": "redis-cluster", "app.kubernetes.io/instance": "fenced"}) {
		t.Fatalf("NetworkPolicy %s selects %v", np.Name, np.Spec.PodSelector.MatchLabels)
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policyTypes %v, want [Ingress]", np.Spec.PolicyTypes)
	}
	// who may reach each port, as the rule's from lists (one entry per peer).
	reach := map[int32][][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Ingress {
		if len(rule.From) == 0 {
			t.Errorf("a rule with ports %v admits anyone", rule.Ports)
		}
		for _, p := range rule.Ports {
			reach[p.Port.IntVal] = append(reach[p.Port.IntVal], rule.From)
		}
	}
	own := func(p networkingv1.NetworkPolicyPeer) bool {
		return p.PodSelector != nil && p.NamespaceSelector == nil && p.IPBlock == nil && p.PodSelector.MatchLabels["app.kubernetes.io/instance"] == "fenced"
	}
	if len(reach[16379]) != 1 || len(reach[16379][0]) != 1 || !own(reach[16379][0][0]) {
		t.Errorf("bus port 16379 reachable from %+v, want the cluster's own pods alone", reach[16379])
	}
	var clientPeers []networkingv1.NetworkPolicyPeer
	for _, from := range reach[6379] {
		clientPeers = append(clientPeers, from...)
	}
	// own pods, three clients, the operator
	if len(clientPeers) != 5 {
		t.Errorf("client port 6379 reachable from %d peers, want 5 (own pods, 3 clients, the operator): %+v", len(clientPeers), clientPeers)
	}
	// The operator's namespace unknown (this renderer has none): its own namespace only.
	operator := false
	for _, p := range clientPeers {
		operator = operator || (p.PodSelector != nil && p.PodSelector.MatchLabels["app.kubernetes.io/name"] == "redis-cluster-operator" && p.NamespaceSelector == nil)
	}
	if !operator {
		t.Error("the operator's pods cannot reach 6379")
	}
	if len(reach[9121]) != 1 || len(reach[9121][0]) != 1 || reach[9121][0][0].NamespaceSelector == nil {
		t.Errorf("exporter port reachable from %+v, want the monitoring namespace", reach[9121])
	}
	if len(reach) != 3 {
		t.Errorf("ports %v admitted, want 6379, 16379 and 9121", reach)
	}
}

// The TLS sample (disablePlainPort) renders redis.conf with port 0 and every tls-*
// directive on the mounted Secret, and no plain port anywhere: not on the container, not
// on either Service. The probes stay tcpSocket on 6379, the TLS port.
func TestTLSOnly(t *testing.T) {
	r := newRenderer(t)
	objs, err := r.RenderFile("../config/samples/redis_v1alpha1_rediscluster_tls.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	fromUnstructured(t, byKind(objs, "ConfigMap"), &cm)
	lines := strings.Split(cm.Data["redis.conf"], "\n")
	for _, want := range []string{"port 0", "tls-port 6379", "tls-cert-file /etc/redis-tls/tls.crt", "tls-key-file /etc/redis-tls/tls.key",
		"tls-ca-cert-file /etc/redis-tls/ca.crt", "tls-auth-clients yes", "tls-replication yes", "tls-cluster yes"} {
		if !slices.Contains(lines, want) {
			t.Errorf("redis.conf lacks %q", want)
		}
	}
	var sts appsv1.StatefulSet
	fromUnstructured(t, byKind(objs, "StatefulSet"), &sts)
	pod := sts.Spec.Template.Spec
	redis := pod.Containers[0]
	for _, p := range redis.Ports {
		if p.ContainerPort != 6379 && p.ContainerPort != 16379 {
			t.Errorf("container port %d open with disablePlainPort", p.ContainerPort)
		}
	}
	if redis.ReadinessProbe.TCPSocket.Port.IntVal != 6379 || redis.LivenessProbe.TCPSocket.Port.IntVal != 6379 {
		t.Errorf("probes not on the TLS port 6379")
	}
	mounted := false
	for _, m := range redis.VolumeMounts {
		mounted = mounted || (m.Name == "tls" && m.MountPath == "/etc/redis-tls" && m.ReadOnly)
	}
	found := false
	for _, v := range pod.Volumes {
		found = found || (v.Name == "tls" && v.Secret != nil && v.Secret.SecretName == "demo-tls-cert")
	}
	if !mounted || !found {
		t.Errorf("Secret demo-tls-cert not mounted read-only at /etc/redis-tls: volume %v, mount %v", found, mounted)
	}
	for _, u := range objs {
		if u.GetKind() != "Service" {
			continue
		}
		var svc corev1.Service
		fromUnstructured(t, u, &svc)
		for _, p := range svc.Spec.Ports {
			if p.Port != 6379 && p.Port != 16379 {
				t.Errorf("Service %s has port %d with disablePlainPort", svc.Name, p.Port)
			}
		}
	}
}

// TestFreshClusterHasPasswordAndNoToken: a RedisCluster with no setting but its size and
// version gets a password (redis.conf includes the auth file of NAME-auth, which the pods
// mount, and protected mode is on) and pods without the ServiceAccount token; only
// spec.disablePassword renders the old, password-less redis.conf, with protected mode off
// (it would refuse every client, replica and the operator).
func TestFreshClusterHasPasswordAndNoToken(t *testing.T) {
	r := newRenderer(t)
	for _, disabled := range []bool{false, true} {
		rc := &redisv1alpha1.RedisCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "default"},
			Spec:       redisv1alpha1.RedisClusterSpec{Replicas: 6, Version: "7.0", DisablePassword: disabled},
		}
		objs, err := r.Render(rc, "")
		if err != nil {
			t.Fatal(err)
		}
		var sts appsv1.StatefulSet
		var cm corev1.ConfigMap
		fromUnstructured(t, byKind(objs, "StatefulSet"), &sts)
		fromUnstructured(t, byKind(objs, "ConfigMap"), &cm)
		pod := sts.Spec.Template.Spec
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("disablePassword %v: automountServiceAccountToken %v, want false", disabled, pod.AutomountServiceAccountToken)
		}
		lines := strings.Split(cm.Data["redis.conf"], "\n")
		auth := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
			return v.Name == "auth" && v.Secret != nil && v.Secret.SecretName == "fresh-auth"
		})
		include := slices.Contains(lines, "include /etc/redis-auth/auth.conf")
		protected := "protected-mode yes"
		if disabled {
			protected = "protected-mode no"
		}
		if auth == disabled || include == disabled {
			t.Errorf("disablePassword %v: auth volume %v, include %v; want both %v", disabled, auth, include, !disabled)
		}
		if !slices.Contains(lines, protected) {
			t.Errorf("disablePassword %v: redis.conf lacks %q:\n%s", disabled, protected, cm.Data["redis.conf"])
		}
	}
}
