/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// How clients reach the cluster: the client Service, and each node's own address
// outside Kubernetes.

// ClientServiceSpec configures the client Service (addition).
type ClientServiceSpec struct {
	// type is the Service type: ClusterIP (default), NodePort or LoadBalancer.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +kubebuilder:default=ClusterIP
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`

	// annotations are added to the client Service, e.g. for a cloud load balancer.
	// Default none.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// External access types (spec.externalAccess.type).
const (
	// ExternalNodePort: each pod's Service is a NodePort; a node announces the IP of the
	// Kubernetes node it runs on and its Service's node ports.
	ExternalNodePort = "NodePort"
	// ExternalLoadBalancer: each pod's Service is a LoadBalancer on port 6379; a node
	// announces its load balancer's address.
	ExternalLoadBalancer = "LoadBalancer"
)

// ExternalAccessSpec gives every Redis node an address outside Kubernetes (addition).
//
// +kubebuilder:validation:XValidation:rule="!has(self.nodePortBase) || self.type == 'NodePort'",message="spec.externalAccess.nodePortBase: only for type NodePort",fieldPath=".nodePortBase",reason="FieldValueForbidden"
type ExternalAccessSpec struct {
	// type is how each pod is reached from outside: NodePort (the IP of the Kubernetes
	// node the pod runs on, at its Service's node port) or LoadBalancer (the address
	// the load balancer of its Service gets, at port 6379). Required.
	// +kubebuilder:validation:Enum=NodePort;LoadBalancer
	// +required
	Type string `json:"type"`

	// nodePortBase pins the node ports (type NodePort only): pod i gets nodePortBase+2i
	// for clients and nodePortBase+2i+1 for the cluster bus. Every one of them must be
	// free and in the API server's node port range (30000-32767 by default); a clash is
	// reported in status.reason. Default: none, Kubernetes picks free ports, kept for
	// the life of each Service.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	NodePortBase *int32 `json:"nodePortBase,omitempty"`

	// hostname turns on hostname mode: every node announces a DNS name (Redis 7's
	// cluster-announce-hostname with cluster-preferred-endpoint-type hostname), so
	// MOVED, ASK, CLUSTER SLOTS and CLUSTER SHARDS give clients names, not IPs. It is a
	// pattern with {{pod}} (the pod's name, NAME-i), {{index}} (i) and {{namespace}},
	// e.g. "{{pod}}.redis.example.com"; it must name each pod apart ({{pod}} or
	// {{index}}). Your DNS resolves each name to where the node's external port is
	// served: with NodePort any Kubernetes node's IP (the node port forwards from
	// every node), with LoadBalancer the pod's load balancer. With spec.tls the
	// certificate's SANs must cover every name (a wildcard will do); a name it does not
	// cover is not announced, and status.reason and a Warning event say which.
	// Required with spec.tls. Default: none (nodes announce IPs).
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:Pattern=`^([a-z0-9.-]|\{\{(pod|index|namespace)\}\})+$`
	// +kubebuilder:validation:XValidation:rule="self.contains('{{pod}}') || self.contains('{{index}}')",message="spec.externalAccess.hostname: must contain {{pod}} or {{index}}, so that every node gets its own name",reason="FieldValueInvalid"
	// +optional
	Hostname string `json:"hostname,omitempty"`

	// annotations are added to every per-pod Service, e.g. for a cloud load balancer.
	// Default none.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}
