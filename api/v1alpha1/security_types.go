/*
Copyright 2026 The redis-cluster-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

// Who may talk to the instances and how: TLS, and the application's ACL users with
// their passwords' Secrets.

// TLSSpec serves Redis over TLS (addition).
type TLSSpec struct {
	// secretName is a Secret in the RedisCluster's namespace in the cert-manager layout:
	// tls.crt (the instances' certificate, which they also present to each other and
	// the operator presents to them), tls.key and ca.crt (the CA that signs the
	// instances' and the clients' certificates). The certificate needs no pod IP or
	// name: Redis checks the chain, not the name, and so does the operator. Required.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +required
	SecretName string `json:"secretName"`

	// disablePlainPort turns the plain port off (redis.conf `port 0`): only TLS clients
	// can connect. When false, plain TCP stays open on 6380 for clients that cannot
	// speak TLS (everything between the instances and the operator is TLS either way).
	// Default false.
	// +optional
	DisablePlainPort bool `json:"disablePlainPort,omitempty"`

	// clientAuth is redis.conf's tls-auth-clients: Required (default; a client must
	// present a certificate signed by ca.crt), Optional (checked when presented) or None.
	// The instances and the operator always present tls.crt.
	// +kubebuilder:validation:Enum=Required;Optional;None
	// +kubebuilder:default=Required
	// +optional
	ClientAuth string `json:"clientAuth,omitempty"`
}

// SecretKeyReference points at one key of a Secret in the RedisCluster's namespace.
type SecretKeyReference struct {
	// name is the Secret's name, in the RedisCluster's namespace. Required.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`

	// key is the key in the Secret's data that holds the password. Default "password".
	// +kubebuilder:default="password"
	// +kubebuilder:validation:MinLength=1
	// +optional
	Key string `json:"key,omitempty"`
}

// RedisUser is an application ACL user (addition).
//
// +kubebuilder:validation:XValidation:rule="self.name != 'default' && self.name != 'operator' && self.name != 'operator-exporter'",message="spec.users[].name: default, operator and operator-exporter are the users the operator manages itself; choose another name",fieldPath=".name",reason="FieldValueForbidden"
type RedisUser struct {
	// name is the ACL user name: letters, digits, '_', '-' and '.', starting with a
	// letter or digit, at most 64 characters; not "default", "operator" or
	// "operator-exporter" (the operator manages those). Unique within spec.users.
	// Required.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
	// +required
	Name string `json:"name"`

	// passwordSecret names the Secret key holding this user's password, in the
	// RedisCluster's namespace. A changed password is applied live; the old one stops
	// working at once. Required.
	// +required
	PasswordSecret SecretKeyReference `json:"passwordSecret"`

	// rules are the user's ACL rules as ACL SETUSER takes them, separated by blanks and
	// read as Redis reads a line of redis.conf (quotes and escapes allowed), e.g.
	// "+@read ~app:*" or "+@all -@dangerous ~cache:* &notifications". The user starts
	// from nothing (reset) and gets these rules, its password and "on". Rules that set
	// passwords (>, <, #, !, nopass, resetpass) or switch the user on or off, in any
	// case, are refused (by the API server where it can tell, else by the operator):
	// the password comes from passwordSecret. One line. Required.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[^\r\n]*$`
	// +kubebuilder:validation:XValidation:rule=`!self.lowerAscii().matches('(^|[\\t\\x0b\\f ])[\\x22\\x27]*([><#!]|(nopass|resetpass|on|off|reset)[\\x22\\x27]*([\\t\\x0b\\f ]|$))')`,message="spec.users[].rules: no password or on/off rules (>, <, #, !, nopass, resetpass, on, off, reset, in any case, quoted or not): the password comes from passwordSecret"
	// +required
	Rules string `json:"rules"`
}
