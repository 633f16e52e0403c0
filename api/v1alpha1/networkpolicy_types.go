package v1alpha1

import networkingv1 "k8s.io/api/networking/v1"

// NetworkPolicySpec configures the optional NetworkPolicy NAME of the Redis pods. It
// admits the cluster's own pods to the client port 6379 and the bus port 16379, the
// operator's pods (label app.kubernetes.io/name=redis-cluster-operator, in the operator's
// namespace) and
// `clients` to 6379, and `metricsClients` to the exporter's port 9121 (with
// pod[0].monitorImage); nothing else reaches the pods. It takes effect only where a
// network plugin enforces NetworkPolicies.
type NetworkPolicySpec struct {
	// enabled renders the NetworkPolicy. Default false.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// clients may connect to the client port 6379 (pod and namespace selectors, IP
	// blocks, as in a NetworkPolicy's `from`). Default none, meaning anyone. An operator
	// running outside the cluster needs an ipBlock of its address here.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Clients []networkingv1.NetworkPolicyPeer `json:"clients,omitempty"`

	// metricsClients may connect to the exporter sidecar's port 9121. Default none,
	// meaning no one: with the NetworkPolicy enabled, 9121 is closed unless listed here.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	MetricsClients []networkingv1.NetworkPolicyPeer `json:"metricsClients,omitempty"`
}
