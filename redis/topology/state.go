package topology

// Member is one desired Redis pod, in ordinal order.
type Member struct {
	Pod string
	// Addr is the pod's "ip:port".
	Addr string
	// K8sNode is the Kubernetes node the pod runs on; replicas avoid their master's.
	K8sNode string
	// External is the "ip:port" the node announces to clients outside Kubernetes
	// (spec.externalAccess), "" when none: Internalize reads it as another name of Addr.
	External string
}

// Internalize rewrites every node line that shows an external address of aliases (external
// "ip:port" to internal "ip:port") to the internal one, keeping what was shown in
// Announced, so the planners, which know the members by their pod addresses, see one
// address per node whichever a node announces. A node announcing an address nobody
// expects (a stale one) is left as shown.
func (s *ClusterState) Internalize(aliases map[string]string) {
	if len(aliases) == 0 {
		return
	}
	for i := range s.Members {
		for j := range s.Members[i].Nodes {
			n := &s.Members[i].Nodes[j]
			internal, ok := aliases[n.Addr()]
			if !ok {
				continue
			}
			host, port, err := splitHostPort(internal)
			if err != nil {
				continue
			}
			n.Announced = n.Addr()
			n.IP, n.Port = host, port
		}
	}
}

// Aliases maps the members' external addresses to their pod addresses, for Internalize.
func Aliases(members []Member) map[string]string {
	out := map[string]string{}
	for _, m := range members {
		if m.External != "" {
			out[m.External] = m.Addr
		}
	}
	return out
}

// MemberState is what one member said about the cluster.
type MemberState struct {
	Member
	// Err is why the member could not be read; nil when Nodes and Info are filled.
	Err   error
	Nodes []Node
	Info  ClusterInfo
	// Server is what the member says it runs (INFO server), zero when it did not say: a
	// member that answers CLUSTER NODES and INFO but not INFO server is still reachable.
	Server Server
	// Keys is the member's DBSIZE when KeysKnown; Observe leaves it unknown to stay cheap,
	// bootstrap reads it only for members it is about to claim.
	Keys      int64
	KeysKnown bool
	// Repl is the member's INFO replication, nil until read; read only for replicas the
	// healer may promote.
	Repl *Replication
}

// Reachable reports whether the member answered both reads.
func (m *MemberState) Reachable() bool { return m.Err == nil }

// Self is the member's own line of CLUSTER NODES ("myself"), nil when unreachable.
func (m *MemberState) Self() *Node {
	for i := range m.Nodes {
		if m.Nodes[i].Myself {
			return &m.Nodes[i]
		}
	}
	return nil
}

// ID is the member's node ID, "" when unknown.
func (m *MemberState) ID() string {
	if s := m.Self(); s != nil {
		return s.ID
	}
	return ""
}

// Find returns the member's line about node id, nil when it does not know it.
func (m *MemberState) Find(id string) *Node {
	for i := range m.Nodes {
		if m.Nodes[i].ID == id {
			return &m.Nodes[i]
		}
	}
	return nil
}

// ClusterState is one observation of every desired member. It is a snapshot: predicates
// and planners read it, nothing writes it.
type ClusterState struct {
	Members []MemberState
	// Answered holds the live strangers (LiveStrangers) that accepted a connection from the
	// operator: a node only the cluster's gossip vouches for is not counted.
	Answered map[string]bool
}
