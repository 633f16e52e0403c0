package controller

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

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

// endpoint is a pod's external address.
type endpoint struct {
	host    string
	port    int
	busPort int // NodePort only
}

// addr is "host:port".
func (e endpoint) addr() string { return net.JoinHostPort(e.host, strconv.Itoa(e.port)) }

// externalServiceName is the per-pod Service of templates/service_external.cue.
func externalServiceName(pod string) string { return pod + "-external" }

// observeExternal finds every pod's external address from its Service and its node, and
// names each member's in Member.External. Pods whose address is not known yet are listed
// in s.externalPending.
func observeExternal(s *scope) {
	s.external = nil
	s.externalPending = nil
	access := s.cluster.Spec.ExternalAccess
	if access == nil {
		return
	}
	s.external = map[string]endpoint{}
	for _, p := range s.pods {
		if p == nil || p.DeletionTimestamp != nil && p.Status.PodIP == "" {
			continue
		}
		e, why := externalEndpoint(s, access.Type, p)
		if why != "" {
			if p.DeletionTimestamp == nil {
				s.externalPending = append(s.externalPending, p.Name+": "+why)
			}
			continue
		}
		s.external[p.Name] = e
	}
	for i := range s.members {
		if e, ok := s.external[s.members[i].Pod]; ok {
			s.members[i].External = e.addr()
		}
	}
}

// externalEndpoint is pod p's external address, or why it is not known.
func externalEndpoint(s *scope, typ string, p *corev1.Pod) (endpoint, string) {
	obj, ok := s.live["Service/"+externalServiceName(p.Name)]
	if !ok {
		return endpoint{}, fmt.Sprintf("Service %s not created yet", externalServiceName(p.Name))
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return endpoint{}, "not a Service"
	}
	switch typ {
	case redisv1alpha1.ExternalNodePort:
		if p.Status.HostIP == "" {
			return endpoint{}, "the pod has no node IP yet"
		}
		e := endpoint{host: p.Status.HostIP}
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
func announcement(typ string, e endpoint) []redis.Setting {
	if typ == redisv1alpha1.ExternalLoadBalancer {
		return []redis.Setting{{Name: announceHostname, Value: e.host}, {Name: preferredType, Value: "hostname"}}
	}
	// The bus port first: between two settings the node must not announce a bus port
	// nobody listens on at the address it announces.
	return []redis.Setting{
		{Name: announceBusPort, Value: strconv.Itoa(e.busPort)},
		{Name: announcePort, Value: strconv.Itoa(e.port)},
		{Name: announceIP, Value: e.host},
	}
}

// announces reports whether a node's own line of CLUSTER NODES shows endpoint e.
func announces(typ string, shown, hostname string, busPort int, e endpoint) bool {
	if typ == redisv1alpha1.ExternalLoadBalancer {
		return hostname == e.host
	}
	return shown == e.addr() && busPort == e.busPort
}

// reconcileExternal has every reachable member announce its external address, when its
// own line of CLUSTER NODES shows another, and reports what it cannot: an address not
// known yet or an announcement Redis refused is a Warning and the status reason, and the
// node goes on announcing what it did.
func (r *Reconciler) reconcileExternal(ctx context.Context, s *scope) {
	access := s.cluster.Spec.ExternalAccess
	if access == nil || s.redis == nil {
		return
	}
	var set, failed []string
	f := r.factoryFor(s)
	for i := range s.redis.Members {
		m := &s.redis.Members[i]
		self := m.Self()
		e, ok := s.external[m.Pod]
		if self == nil || !ok {
			continue
		}
		shown := self.Announced
		if shown == "" {
			shown = self.Addr()
		}
		if announces(access.Type, shown, self.Hostname, self.BusPort, e) {
			continue
		}
		if err := redis.ApplyLive(ctx, f, []string{m.Addr}, announcement(access.Type, e)); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", m.Pod, err))
			continue
		}
		set = append(set, m.Pod+" "+e.addr())
	}
	if len(set) > 0 {
		log.FromContext(ctx).Info("Announced external addresses", "nodes", set)
		r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonAnnounced, "Nodes announce their external address: %s", strings.Join(set, ", "))
	}
	problems := append(append([]string{}, s.externalPending...), failed...)
	if len(problems) > 0 {
		sort.Strings(problems)
		r.warnOnce(s, ReasonExternalAccess, "spec.externalAccess: no external address announced for "+strings.Join(problems, "; ")+"; those nodes announce their pod address, reachable inside Kubernetes only")
	}
}

// externalAddress is what status shows for pod: the external address its node announces,
// "" when it announces none.
func externalAddress(s *scope, pod string) string {
	e, ok := s.external[pod]
	if !ok || s.redis == nil {
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
				return e.addr()
			}
		}
	}
	return ""
}
