package controller

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
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
	if s.redis == nil {
		return
	}
	set, failed := r.announceAll(ctx, s)
	if len(set) > 0 {
		log.FromContext(ctx).Info("Announced external addresses", "nodes", set)
		r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonAnnounced, "Nodes announce their address for clients: %s", strings.Join(set, ", "))
	}
	r.reportExternal(s, failed)
}

// announceAll tells each member whose own line of CLUSTER NODES shows another address
// than its endpoint to announce it: set are the members told ("pod address"), failed
// those that refused ("pod: error").
func (r *Reconciler) announceAll(ctx context.Context, s *scope) (set, failed []string) {
	typ := announceType(s.cluster)
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
		if !ok || announces(mode, shownAddr(self), self.Hostname, self.BusPort, e) {
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
	return set, failed
}

// shownAddr is the "host:port" a node's own line of CLUSTER NODES shows: the address it
// announces, else its own.
func shownAddr(self *topology.Node) string {
	if self.Announced != "" {
		return self.Announced
	}
	return self.Addr()
}

// reportExternal says what the nodes could not announce: a Warning and the status reason
// for addresses not known, Services or announcements refused (failed) and names the
// certificate does not cover; the status reason only while load balancers are pending.
func (r *Reconciler) reportExternal(s *scope, failed []string) {
	problems := append(refusedFirst(s.externalPending, s.externalRefused), failed...)
	if len(problems) > 0 {
		sort.Strings(problems)
		r.warnOnce(s, ReasonExternalAccess, "spec.externalAccess: no external address announced for "+strings.Join(problems, "; ")+"; those nodes announce their pod address, reachable inside Kubernetes only")
	}
	if len(s.externalUncovered) > 0 {
		field := "spec.externalAccess.hostname"
		if announceType(s.cluster) == announceInternal {
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
			if announces(s.cluster.Spec.ExternalAccess.Type, shownAddr(self), self.Hostname, self.BusPort, e) {
				return e.clientAddr()
			}
		}
	}
	return ""
}
