package topology

// Member is one desired Redis pod, in ordinal order.
type Member struct {
	Pod string
	// Addr is the pod's "ip:port".
	Addr string
	// K8sNode is the Kubernetes node the pod runs on; replicas avoid their master's.
	K8sNode string
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
	// Answered holds the live strangers (LiveStrangers) that answered the operator directly
	// with their own node ID: a node only the cluster's gossip vouches for is not counted.
	Answered map[string]bool
}
