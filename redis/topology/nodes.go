package topology

import (
	"fmt"
	"strconv"
	"strings"
)

// Node is one line of CLUSTER NODES: how the answering node sees one node of the cluster.
type Node struct {
	ID string
	// IP and Port are the client address; IP is empty while a node does not know its own
	// address yet (a fresh node that was never met) or when flagged noaddr.
	IP   string
	Port int
	// BusPort is the cluster bus port (the "@cport" part); 0 when not shown.
	BusPort int
	// Hostname is the optional ",hostname" part (cluster-announce-hostname), else "".
	Hostname string
	// Announced is the "ip:port" the line showed when Internalize replaced it with the
	// node's pod address (the node announces an external address); "" otherwise.
	Announced string

	Myself     bool
	Master     bool
	Replica    bool // the "slave" flag
	Fail       bool
	PFail      bool // the "fail?" flag
	Handshake  bool
	NoAddr     bool
	NoFailover bool

	// MasterID is the master of a replica; "" when the line says "-".
	MasterID    string
	PingSent    int64
	PongRecv    int64
	ConfigEpoch uint64
	// Connected is the link-state column: true for "connected".
	Connected bool
	Slots     SlotRanges
	// Migrating maps a slot to the node it is migrating to ("[slot->-id]"); only the node
	// that owns the slot shows it, and only for itself.
	Migrating map[int]string
	// Importing maps a slot to the node it is imported from ("[slot-<-id]").
	Importing map[int]string
}

// SameRole reports whether n and m give a node the same role: replica or not, and of the
// same master.
func (n Node) SameRole(m Node) bool { return n.Replica == m.Replica && n.MasterID == m.MasterID }

// Addr is "ip:port", the address clients and CLUSTER MEET use.
func (n Node) Addr() string { return joinHostPort(n.IP, n.Port) }

// Role is "master" or "slave", the words of the seed's status.
func (n Node) Role() string {
	if n.Replica {
		return RoleSlave
	}
	return RoleMaster
}

// Roles as the status shows them (the seed's words).
const (
	RoleMaster = "master"
	RoleSlave  = "slave"
)

// ParseClusterNodes parses the reply of CLUSTER NODES. Blank lines are skipped; any
// malformed line fails the whole parse, because acting on half a view is worse than not
// acting.
func ParseClusterNodes(text string) ([]Node, error) {
	var nodes []Node
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		n, err := parseNodeLine(line)
		if err != nil {
			return nil, fmt.Errorf("failed to parse CLUSTER NODES line %d: %w", i+1, err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

func parseNodeLine(line string) (Node, error) {
	f := strings.Fields(line)
	if len(f) < 8 {
		return Node{}, fmt.Errorf("want at least 8 fields, got %d", len(f))
	}
	n := Node{ID: f[0]}
	if !validNodeID(n.ID) {
		return Node{}, fmt.Errorf("bad node id %q", n.ID)
	}
	if err := n.parseAddr(f[1]); err != nil {
		return Node{}, err
	}
	if err := n.parseFlags(f[2]); err != nil {
		return Node{}, err
	}
	if f[3] != "-" {
		if !validNodeID(f[3]) {
			return Node{}, fmt.Errorf("bad master id %q", f[3])
		}
		n.MasterID = f[3]
	}
	var err error
	if n.PingSent, err = strconv.ParseInt(f[4], 10, 64); err != nil {
		return Node{}, fmt.Errorf("bad ping-sent %q", f[4])
	}
	if n.PongRecv, err = strconv.ParseInt(f[5], 10, 64); err != nil {
		return Node{}, fmt.Errorf("bad pong-recv %q", f[5])
	}
	if n.ConfigEpoch, err = strconv.ParseUint(f[6], 10, 64); err != nil {
		return Node{}, fmt.Errorf("bad config-epoch %q", f[6])
	}
	switch f[7] {
	case "connected":
		n.Connected = true
	case "disconnected":
	default:
		return Node{}, fmt.Errorf("bad link-state %q", f[7])
	}
	for _, s := range f[8:] {
		if err := n.parseSlotField(s); err != nil {
			return Node{}, err
		}
	}
	n.Slots = n.Slots.Normalize()
	return n, nil
}

// validNodeID accepts the 40 hex characters Redis uses.
func validNodeID(id string) bool {
	if len(id) != 40 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// parseAddr reads "ip:port@cport[,hostname]"; Redis < 4 omits "@cport". IPv6 addresses
// are printed without brackets, so the port is after the last colon.
func (n *Node) parseAddr(field string) error {
	addr, hostname, _ := strings.Cut(field, ",")
	n.Hostname = hostname
	addr, bus, hasBus := strings.Cut(addr, "@")
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return fmt.Errorf("bad address %q: no port", field)
	}
	n.IP = strings.Trim(addr[:i], "[]")
	port, err := strconv.Atoi(addr[i+1:])
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("bad address %q: bad port", field)
	}
	n.Port = port
	if hasBus {
		bp, err := strconv.Atoi(bus)
		if err != nil || bp < 0 || bp > 65535 {
			return fmt.Errorf("bad address %q: bad bus port", field)
		}
		n.BusPort = bp
	}
	return nil
}

func (n *Node) parseFlags(field string) error {
	for _, flag := range strings.Split(field, ",") {
		switch flag {
		case "myself":
			n.Myself = true
		case "master":
			n.Master = true
		case "slave":
			n.Replica = true
		case "fail":
			n.Fail = true
		case "fail?":
			n.PFail = true
		case "handshake":
			n.Handshake = true
		case "noaddr":
			n.NoAddr = true
		case "nofailover":
			n.NoFailover = true
		case "noflags":
		default:
			return fmt.Errorf("unknown flag %q", flag)
		}
	}
	return nil
}

// parseSlotField reads "5", "0-5460", "[5->-id]" (migrating) or "[5-<-id]" (importing).
func (n *Node) parseSlotField(s string) error {
	if !strings.HasPrefix(s, "[") {
		r, err := parseSlotRange(s)
		if err != nil {
			return err
		}
		n.Slots = append(n.Slots, r)
		return nil
	}
	if !strings.HasSuffix(s, "]") {
		return fmt.Errorf("bad open-slot marker %q", s)
	}
	body := s[1 : len(s)-1]
	if slot, id, ok := strings.Cut(body, "->-"); ok {
		return n.addOpenSlot(&n.Migrating, slot, id, s)
	}
	if slot, id, ok := strings.Cut(body, "-<-"); ok {
		return n.addOpenSlot(&n.Importing, slot, id, s)
	}
	return fmt.Errorf("bad open-slot marker %q", s)
}

func (n *Node) addOpenSlot(m *map[int]string, slotText, id, field string) error {
	slot, err := parseSlot(slotText)
	if err != nil {
		return err
	}
	if !validNodeID(id) {
		return fmt.Errorf("bad node id in open-slot marker %q", field)
	}
	if *m == nil {
		*m = map[int]string{}
	}
	(*m)[slot] = id
	return nil
}

// joinHostPort is net.JoinHostPort without brackets-for-IPv4 surprises; kept local so the
// format matches what CLUSTER NODES prints.
func joinHostPort(ip string, port int) string {
	if strings.Contains(ip, ":") {
		return fmt.Sprintf("[%s]:%d", ip, port)
	}
	return fmt.Sprintf("%s:%d", ip, port)
}

// splitHostPort splits "ip:port" as joinHostPort writes it.
func splitHostPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("bad address %q: no port", addr)
	}
	port, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return "", 0, fmt.Errorf("bad address %q: bad port", addr)
	}
	return strings.Trim(addr[:i], "[]"), port, nil
}
