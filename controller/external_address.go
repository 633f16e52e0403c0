package controller

import (
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// Where each pod is reachable from outside: its external endpoint, read from its Service
// NAME-i-external and its Kubernetes node (spec.externalAccess), or its DNS name inside
// Kubernetes (spec.announceHostnames). external.go has the nodes announce them.

// loadBalancerBound is how long a load balancer may take to get its address before it
// is a Warning; until then status.reason says it is pending.
const loadBalancerBound = 3 * time.Minute

// endpoint is a pod's external address.
type endpoint struct {
	host    string
	port    int
	busPort int // NodePort only
	// name is the DNS name the node announces in hostname mode, "" otherwise.
	name string
	// tls: the port is the TLS port (spec.tls), announced as cluster-announce-tls-port.
	tls bool
}

// addr is "host:port": what the node's line of CLUSTER NODES shows with NodePort, and
// what Internalize reads back as the pod.
func (e endpoint) addr() string { return net.JoinHostPort(e.host, strconv.Itoa(e.port)) }

// clientAddr is what MOVED, ASK and CLUSTER SLOTS give clients: the name in hostname
// mode, else addr.
func (e endpoint) clientAddr() string {
	if e.name != "" {
		return net.JoinHostPort(e.name, strconv.Itoa(e.port))
	}
	return e.addr()
}

// announcedHostname is the node's cluster-announce-hostname: the name in hostname mode,
// the load balancer's address with LoadBalancer, else none.
func (e endpoint) announcedHostname(typ string) string {
	if e.name != "" || typ != redisv1alpha1.ExternalLoadBalancer {
		return e.name
	}
	return e.host
}

// hostnameOnly: the node announces a hostname and keeps its own IP and ports (the load
// balancer's port and a pod's are both 6379).
func hostnameOnly(typ string) bool {
	return typ == redisv1alpha1.ExternalLoadBalancer || typ == announceInternal
}

// announceInternal is the announcement type of spec.announceHostnames: the pod's DNS
// name, at its own port.
const announceInternal = "Internal"

// announceType is what the nodes announce: spec.externalAccess.type, announceInternal, or
// "" (their IPs).
func announceType(c *redisv1alpha1.RedisCluster) string {
	switch {
	case c.Spec.ExternalAccess != nil:
		return c.Spec.ExternalAccess.Type
	case c.Spec.AnnounceHostnames:
		return announceInternal
	}
	return ""
}

// podDomainName is pod's stable DNS name inside Kubernetes, through the headless Service
// named as the cluster (templates/service_headless.cue).
func podDomainName(pod, cluster, ns string) string {
	return fmt.Sprintf("%s.%s.%s.svc.cluster.local", pod, cluster, ns)
}

// Placeholders of spec.externalAccess.hostname.
const (
	placeholderPod       = "{{pod}}"
	placeholderIndex     = "{{index}}"
	placeholderNamespace = "{{namespace}}"
)

// hostnameOf is pattern (spec.externalAccess.hostname) for pod NAME-i of namespace ns.
func hostnameOf(pattern, cluster, ns, pod string) string {
	return strings.NewReplacer(placeholderPod, pod, placeholderIndex, strings.TrimPrefix(pod, cluster+"-"),
		placeholderNamespace, ns).Replace(pattern)
}

// uncovered are the names of names that cert does not cover (no SAN matches, wildcards
// included), in order.
func uncovered(cert *x509.Certificate, names []string) []string {
	var out []string
	for _, n := range names {
		if cert == nil || cert.VerifyHostname(n) != nil {
			out = append(out, n)
		}
	}
	return out
}

// externalServiceName is the per-pod Service of templates/service_external.cue.
func externalServiceName(pod string) string { return pod + "-external" }

// observeExternal finds every pod's external address from its Service and its node, and
// names each member's in Member.External. Pods whose address is not known yet are listed
// in s.externalPending (or s.externalWaiting: a load balancer within loadBalancerBound);
// in hostname mode with spec.tls, pods whose name the certificate does not cover in
// s.externalUncovered.
func observeExternal(s *scope) {
	s.external = nil
	s.externalPending, s.externalWaiting, s.externalUncovered = nil, nil, nil
	typ := announceType(s.cluster)
	if typ == "" {
		return
	}
	access := s.cluster.Spec.ExternalAccess
	s.external = map[string]endpoint{}
	for _, p := range s.pods {
		if p == nil || p.DeletionTimestamp != nil && p.Status.PodIP == "" {
			continue
		}
		var e endpoint
		var why string
		var waiting bool
		switch {
		case access == nil && p.Status.PodIP == "":
			continue
		case access == nil:
			e = endpoint{host: p.Status.PodIP, port: redisPort, name: podDomainName(p.Name, s.cluster.Name, s.cluster.Namespace)}
		default:
			e, why, waiting = externalEndpoint(s, typ, p)
			if why == "" && access.Hostname != "" {
				e.name = hostnameOf(access.Hostname, s.cluster.Name, s.cluster.Namespace, p.Name)
			}
		}
		switch {
		case why == "" && e.name != "" && s.cluster.Spec.TLS != nil:
			var leaf *x509.Certificate
			if s.tls != nil {
				leaf = s.tls.leaf
			}
			if len(uncovered(leaf, []string{e.name})) > 0 {
				s.externalUncovered = append(s.externalUncovered, e.name)
				continue
			}
		case why != "" && p.DeletionTimestamp == nil && waiting:
			s.externalWaiting = append(s.externalWaiting, p.Name+": "+why)
			continue
		case why != "" && p.DeletionTimestamp == nil:
			s.externalPending = append(s.externalPending, p.Name+": "+why)
			continue
		case why != "":
			continue
		}
		e.tls = s.cluster.Spec.TLS != nil
		s.external[p.Name] = e
	}
	if typ != redisv1alpha1.ExternalNodePort {
		// Only node ports show in CLUSTER NODES as another address of the pod.
		return
	}
	for i := range s.members {
		if e, ok := s.external[s.members[i].Pod]; ok {
			s.members[i].External = e.addr()
		}
	}
}

// externalEndpoint is pod p's external address, or why it is not known; waiting is true
// while that is a load balancer younger than loadBalancerBound without an address.
func externalEndpoint(s *scope, typ string, p *corev1.Pod) (e endpoint, why string, waiting bool) {
	obj, ok := s.live["Service/"+externalServiceName(p.Name)]
	if !ok {
		return endpoint{}, fmt.Sprintf("Service %s not created yet", externalServiceName(p.Name)), false
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return endpoint{}, "not a Service", false
	}
	e, why = serviceEndpoint(typ, svc, p.Status.HostIP)
	if why != "" && typ == redisv1alpha1.ExternalLoadBalancer && s.now.Sub(svc.CreationTimestamp.Time) < loadBalancerBound {
		return e, why, true
	}
	return e, why, false
}

// serviceEndpoint is the external address Service svc gives a pod on the Kubernetes node
// hostIP, or why it gives none.
func serviceEndpoint(typ string, svc *corev1.Service, hostIP string) (endpoint, string) {
	switch typ {
	case redisv1alpha1.ExternalNodePort:
		if hostIP == "" {
			return endpoint{}, "the pod has no node IP yet"
		}
		e := endpoint{host: hostIP}
		for _, port := range svc.Spec.Ports {
			switch port.Name {
			case "redis":
				e.port = int(port.NodePort)
			case "cluster-bus":
				e.busPort = int(port.NodePort)
			}
		}
		if e.port == 0 || e.busPort == 0 {
			return endpoint{}, fmt.Sprintf("Service %s has no node ports yet", svc.Name)
		}
		return e, ""
	case redisv1alpha1.ExternalLoadBalancer:
		for _, in := range svc.Status.LoadBalancer.Ingress {
			host := in.IP
			if host == "" {
				host = in.Hostname
			}
			if host != "" {
				return endpoint{host: host, port: redisPort}, ""
			}
		}
		return endpoint{}, fmt.Sprintf("the load balancer of Service %s has no address yet (is there a load-balancer controller?)", svc.Name)
	}
	return endpoint{}, fmt.Sprintf("unknown type %q", typ)
}
