package controller

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// External access (spec.externalAccess, docs/external-access.md): every pod has a Service
// NAME-i-external (templates/service_external.cue), and the operator has each Redis node
// announce that Service's address to clients, live, with CONFIG SET.
//
// What is announced, and why (checked against redis-server 7.0.15):
//
//   - LoadBalancer: cluster-announce-hostname is the load balancer's address and
//     cluster-preferred-endpoint-type is hostname. The port stays 6379 (the Service's
//     port), so CLUSTER NODES keeps the pod IP, replicas replicate from pod IPs and the bus
//     stays on the pod network; only MOVED, ASK, CLUSTER SLOTS and CLUSTER SHARDS name the
//     load balancer. (7.0 accepts an IP as a hostname: it allows letters, digits, '-', '.'.)
//   - NodePort: a node port is not 6379, and Redis 7.0 connects a replica to its master's
//     announced client port at the master's bus IP (a replica of a node announcing only
//     hostname + port tries podIP:nodePort and is refused). So a node announces the IP of
//     the Kubernetes node it runs on (cluster-announce-ip), its client node port
//     (cluster-announce-port) and its bus node port (cluster-announce-bus-port): clients,
//     replication and the bus all go through the node ports. The Services keep
//     externalTrafficPolicy Cluster, so a node IP announced before the pod moved still
//     forwards to it until the operator announces the new one.
//
// The operator still knows every node by its pod address: redis.Observe maps an announced
// external address back (topology.ClusterState.Internalize).

// Redis directives of the announcements.
const (
	announceIP       = "cluster-announce-ip"
	announcePort     = "cluster-announce-port"
	announceTLSPort  = "cluster-announce-tls-port"
	announceBusPort  = "cluster-announce-bus-port"
	announceHostname = "cluster-announce-hostname"
	preferredType    = "cluster-preferred-endpoint-type"
)

// ReasonExternalAccess: a pod's external address is not known (a load balancer with no
// address yet, a Service missing) or a node refused its announcement; the node keeps
// announcing its pod address and the cluster serves inside Kubernetes.
const ReasonExternalAccess = "ExternalAccess"

// ReasonAnnounced: nodes were given their external address to announce.
const ReasonAnnounced = "Announced"

// ReasonExternalCertificate: hostname mode with spec.tls, and the certificate of
// spec.tls.secretName does not cover a node's name (no SAN matches it); that node does not
// announce the name, and the cluster serves on its pod addresses inside Kubernetes.
const ReasonExternalCertificate = "ExternalCertificate"

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

// announcement is what a node is told to announce for endpoint e, in the order it is set.
// Every one also sets the hostname and the preferred endpoint type, so a node shows only
// what e says whatever it announced before.
func announcement(typ string, e endpoint) []redis.Setting {
	hostname := []redis.Setting{{Name: announceHostname, Value: e.announcedHostname(typ)}, {Name: preferredType, Value: "ip"}}
	if hostname[0].Value != "" {
		hostname[1].Value = "hostname"
	}
	if hostnameOnly(typ) {
		return hostname
	}
	// With tls-cluster the port a node announces is its TLS port
	// (cluster-announce-tls-port); cluster-announce-port is then its plain port, which
	// is not exposed, and stays unset.
	port := announcePort
	if e.tls {
		port = announceTLSPort
	}
	// The bus port first: between two settings the node must not announce a bus port
	// nobody listens on at the address it announces.
	return append([]redis.Setting{
		{Name: announceBusPort, Value: strconv.Itoa(e.busPort)},
		{Name: port, Value: strconv.Itoa(e.port)},
		{Name: announceIP, Value: e.host},
	}, hostname...)
}

// announces reports whether a node's own line of CLUSTER NODES shows endpoint e.
func announces(typ string, shown, hostname string, busPort int, e endpoint) bool {
	if hostname != e.announcedHostname(typ) {
		return false
	}
	return hostnameOnly(typ) || shown == e.addr() && busPort == e.busPort
}

// reconcileExternal has every reachable member announce its external address, when its
// own line of CLUSTER NODES shows another, and reports what it cannot: an address not
// known yet or an announcement Redis refused is a Warning and the status reason, and the
// node goes on announcing what it did.
func (r *Reconciler) reconcileExternal(ctx context.Context, s *scope) {
	typ := announceType(s.cluster)
	if s.redis == nil {
		return
	}
	var set, failed []string
	f := r.factoryFor(s)
	for i := range s.redis.Members {
		m := &s.redis.Members[i]
		self := m.Self()
		if self == nil {
			continue
		}
		e, ok := s.external[m.Pod]
		mode := typ
		if typ == "" && self.Hostname != "" {
			// spec.announceHostnames turned off: the node announces its IP again.
			mode, e, ok = announceInternal, endpoint{}, true
		}
		if !ok {
			continue
		}
		shown := self.Announced
		if shown == "" {
			shown = self.Addr()
		}
		if announces(mode, shown, self.Hostname, self.BusPort, e) {
			continue
		}
		if err := redis.ApplyLive(ctx, f, []string{m.Addr}, announcement(mode, e)); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", m.Pod, err))
			continue
		}
		if e == (endpoint{}) {
			set = append(set, m.Pod+" its IP")
			continue
		}
		set = append(set, m.Pod+" "+e.clientAddr())
	}
	if len(set) > 0 {
		log.FromContext(ctx).Info("Announced external addresses", "nodes", set)
		r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonAnnounced, "Nodes announce their address for clients: %s", strings.Join(set, ", "))
	}
	problems := append(refusedFirst(s.externalPending, s.externalRefused), failed...)
	if len(problems) > 0 {
		sort.Strings(problems)
		r.warnOnce(s, ReasonExternalAccess, "spec.externalAccess: no external address announced for "+strings.Join(problems, "; ")+"; those nodes announce their pod address, reachable inside Kubernetes only")
	}
	if len(s.externalUncovered) > 0 {
		field := "spec.externalAccess.hostname"
		if typ == announceInternal {
			field = "spec.announceHostnames"
		}
		r.warnOnce(s, ReasonExternalCertificate, uncoveredMessage(field, s.cluster, s.tls, s.externalUncovered))
	}
	if len(s.externalWaiting) > 0 {
		// Said in the status only: a load balancer takes a while.
		msg := fmt.Sprintf("spec.externalAccess: pending, waiting up to %v for %s", loadBalancerBound, strings.Join(s.externalWaiting, "; "))
		if s.reason != "" {
			msg = s.reason + ". " + msg
		}
		s.reason = msg
		s.externalRecheck = 15 * time.Second
	}
}

// refusedFirst is pending ("pod: why") with the API server's refusal of a pod's Service
// (refused, by pod) as the why, and a line for each refused pod not pending (a Service
// whose change was refused keeps its old ports).
func refusedFirst(pending []string, refused map[string]string) []string {
	out := make([]string, 0, len(pending)+len(refused))
	said := map[string]bool{}
	for _, p := range pending {
		pod, _, _ := strings.Cut(p, ": ")
		if why, ok := refused[pod]; ok {
			p, said[pod] = pod+": "+why, true
		}
		out = append(out, p)
	}
	for pod, why := range refused {
		if !said[pod] {
			out = append(out, pod+": "+why)
		}
	}
	return out
}

// uncoveredMessage says which names the certificate of spec.tls.secretName does not cover.
func uncoveredMessage(field string, c *redisv1alpha1.RedisCluster, t *tlsState, names []string) string {
	sans := "it could not be read"
	if t != nil && t.leaf != nil {
		sans = "its DNS SANs: " + strings.Join(t.leaf.DNSNames, ", ")
		if len(t.leaf.DNSNames) == 0 {
			sans = "it has no DNS SAN"
		}
	}
	return fmt.Sprintf("%s: the certificate of spec.tls.secretName (Secret %s) does not cover %s (%s); those nodes do not announce their names and serve on their pod addresses inside Kubernetes: add the names (or a wildcard) to the certificate's SANs",
		field, c.Spec.TLS.SecretName, strings.Join(names, ", "), sans)
}

// externalAddress is what status shows for pod: the external address its node announces,
// "" when it announces none.
func externalAddress(s *scope, pod string) string {
	e, ok := s.external[pod]
	if !ok || s.redis == nil || s.cluster.Spec.ExternalAccess == nil {
		return ""
	}
	for i := range s.redis.Members {
		m := &s.redis.Members[i]
		if m.Pod != pod {
			continue
		}
		if self := m.Self(); self != nil {
			shown := self.Announced
			if shown == "" {
				shown = self.Addr()
			}
			if announces(s.cluster.Spec.ExternalAccess.Type, shown, self.Hostname, self.BusPort, e) {
				return e.clientAddr()
			}
		}
	}
	return ""
}
