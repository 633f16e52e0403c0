package topology

import (
	"strconv"
	"strings"
)

// Server is the server a node runs, as the node itself says in INFO server. The operator acts
// on this, not on the RedisCluster's image tag: a tag names an image, not what runs (a custom
// middlewareImage, a tag that moved, a cluster half-way through an upgrade).
type Server struct {
	// Name is "redis" or "valkey" (INFO server's server_name, which Redis does not send).
	Name string
	// Version is the server's own version: valkey_version on Valkey (whose redis_version
	// stays 7.2.4 for clients that check it), redis_version on Redis.
	Version string
}

// Server names.
const (
	ServerRedis  = "redis"
	ServerValkey = "valkey"
)

// ParseServer parses the "key:value" lines of INFO server. It returns the zero Server when
// the text has no version.
func ParseServer(text string) Server {
	fields := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	s := Server{Name: strings.ToLower(fields["server_name"])}
	if s.Name == "" {
		s.Name = ServerRedis
	}
	if s.Version = fields[s.Name+"_version"]; s.Version == "" {
		s.Version = fields["redis_version"]
	}
	if s.Version == "" {
		return Server{}
	}
	return s
}

// Known reports whether the node said what it runs.
func (s Server) Known() bool { return s.Version != "" }

// String is "NAME VERSION", e.g. "valkey 9.1.2", or "" when unknown.
func (s Server) String() string {
	if !s.Known() {
		return ""
	}
	return s.Name + " " + s.Version
}

// AtLeast reports whether the version is major.minor or later (false when unknown).
func (s Server) AtLeast(major, minor int) bool {
	parts := strings.SplitN(s.Version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// AtomicSlotMigration reports whether the server moves slots itself (Valkey 9's CLUSTER
// MIGRATESLOTS). Nothing uses it yet: the operator moves keys with MIGRATE on every server.
func (s Server) AtomicSlotMigration() bool {
	return s.Name == ServerValkey && s.AtLeast(9, 0)
}

// SetSlotBlocks reports whether CLUSTER SETSLOT waits for the node's replicas to apply it
// (Valkey 8.0 and later), which a MULTI/EXEC must not contain.
func (s Server) SetSlotBlocks() bool {
	return s.Name == ServerValkey && s.AtLeast(8, 0)
}
