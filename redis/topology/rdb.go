package topology

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The RDB format each server writes and reads, from the servers' sources (src/rdb.h's
// RDB_VERSION, and the version check at the top of rdbLoadRio in src/rdb.c):
//
//	server        writes  reads                        source
//	redis 6.0     9       1–9                          redis 6.0.20 src/rdb.h
//	redis 6.2     9       1–9                          redis 6.2.16 src/rdb.h
//	redis 7.0     10      1–10                         redis 7.0.15 src/rdb.h, src/rdb.c
//	redis 7.2     11      1–11                         redis 7.2.6 src/rdb.h
//	redis 7.4     12      1–12                         redis 7.4.1 src/rdb.h, src/rdb.c
//	redis 8.0     12      1–12                         redis 8.0.2 src/rdb.h, src/rdb.c
//	valkey 7.2    11      1–11                         valkey 7.2.7 src/rdb.h
//	valkey 8.0    11      1–11                         valkey 8.0.1 src/rdb.h, src/rdb.c
//	valkey 8.1    11      1–11                         valkey 8.1.1 src/rdb.h, src/rdb.c
//	valkey 9.0    80      1–11, 80                     valkey 9.1.2 src/rdb.h (RDB_VERSION_MAP)
//	valkey 9.1    80      1–11, 80                     valkey 9.1.2 src/rdb.h, src/rdb.c
//
// The tags are upstream's; redis 8.0.2, valkey 8.1.1 and valkey 9.1.2 were read in the
// upstream tarballs of Debian's source packages of the images' versions (docs/servers.md).
// Redis reads every version up to its own (a file whose magic is not "REDIS" is refused).
// Valkey keeps 12–79 for Redis' formats after the fork (RDB_FOREIGN_VERSION_MIN/MAX) and
// refuses them; from 9.0 it writes 80 and later, with the magic "VALKEY". Valkey's
// rdb-version-check relaxed loads a newer or foreign file when it holds nothing the
// server does not know, which depends on the data: the operator does not count on it.
var rdbFormats = []rdbFormat{
	{ServerRedis, 6, 0, 9},
	{ServerRedis, 6, 2, 9},
	{ServerRedis, 7, 0, 10},
	{ServerRedis, 7, 2, 11},
	{ServerRedis, 7, 4, 12},
	{ServerRedis, 8, 0, 12},
	{ServerValkey, 7, 2, 11},
	{ServerValkey, 8, 0, 11},
	{ServerValkey, 8, 1, 11},
	{ServerValkey, 9, 0, 80},
	{ServerValkey, 9, 1, 80},
}

// RDB versions Valkey leaves to Redis (RDB_FOREIGN_VERSION_MIN and _MAX in Valkey's rdb.h).
const (
	rdbForeignMin = 12
	rdbForeignMax = 79
	// rdbNewest bounds the versions a server of a later release than the table's may
	// write; any bound past every version in use does.
	rdbNewest = 999
)

// rdbFormat is one row of the table: the RDB version a server's major.minor writes.
type rdbFormat struct {
	name         string
	major, minor int
	writes       int
}

// reads reports whether the server of this row loads RDB version v (strict version check).
func (f rdbFormat) reads(v int) bool {
	if v < 1 || v > f.writes {
		return false
	}
	return f.name != ServerValkey || v < rdbForeignMin || v > rdbForeignMax
}

// readsText says which versions the row's server reads, for a message.
func (f rdbFormat) readsText() string {
	if f.name == ServerValkey && f.writes > rdbForeignMax {
		own := strconv.Itoa(f.writes)
		if f.writes > rdbForeignMax+1 {
			own = fmt.Sprintf("%d to %d", rdbForeignMax+1, f.writes)
		}
		return fmt.Sprintf("reads RDB up to %d and %s, not Redis' %d to %d", rdbForeignMin-1, own, rdbForeignMin, rdbForeignMax)
	}
	return fmt.Sprintf("reads RDB up to %d", f.writes)
}

func (f rdbFormat) String() string { return fmt.Sprintf("%s %d.%d", f.name, f.major, f.minor) }

// majorMinor parses "MAJOR.MINOR[.PATCH…]".
func majorMinor(version string) (int, int, bool) {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	return ma, mi, err1 == nil && err2 == nil && ma >= 0 && mi >= 0
}

// rdbRow is the table's row for the server's major.minor.
func rdbRow(s Server) (rdbFormat, bool) {
	ma, mi, ok := majorMinor(s.Version)
	if !ok {
		return rdbFormat{}, false
	}
	for _, f := range rdbFormats {
		if f.name == s.Name && f.major == ma && f.minor == mi {
			return f, true
		}
	}
	return rdbFormat{}, false
}

// RDBWrites is the range of RDB versions the server may write: one version for a
// major.minor in the table; for a later release of the same server, from what the newest
// release before it writes (the format only moves forward) to, for Redis, the last
// version Valkey leaves to Redis, and for Valkey any. ok is false for a server older than
// the table or not known.
func (s Server) RDBWrites() (lo, hi int, ok bool) {
	ma, mi, ok := majorMinor(s.Version)
	if !ok {
		return 0, 0, false
	}
	var floor *rdbFormat
	for i := range rdbFormats {
		f := &rdbFormats[i]
		if f.name != s.Name || f.major > ma || f.major == ma && f.minor > mi {
			continue
		}
		if f.major == ma && f.minor == mi {
			return f.writes, f.writes, true
		}
		if floor == nil || f.major > floor.major || f.major == floor.major && f.minor > floor.minor {
			floor = f
		}
	}
	if floor == nil {
		return 0, 0, false
	}
	hi = rdbNewest
	if s.Name == ServerRedis {
		hi = rdbForeignMax
	}
	return floor.writes, hi, true
}

// writesText says what the server writes, for a message.
func writesText(lo, hi int) string {
	if lo == hi {
		return fmt.Sprintf("RDB %d", lo)
	}
	return fmt.Sprintf("RDB %d or later", lo)
}

// UnreadableRDB says why target cannot load what the running servers write (their RDB
// files and AOF preambles on disk, and the full sync a replica receives from its master),
// or returns "" when it can or the table cannot tell: a target whose major.minor is not
// in the table, or running servers that are unknown or older than the table, are let
// through. Each running server is named once, most instances first, e.g. "6 instances
// run valkey 9.1.2, which writes RDB 80; redis 7.0 reads RDB up to 10".
func UnreadableRDB(target Server, running []Server) string {
	reader, ok := rdbRow(target)
	if !ok {
		return ""
	}
	count := map[Server]int{}
	for _, s := range running {
		count[s]++
	}
	var bad []Server
	for s := range count {
		lo, hi, ok := s.RDBWrites()
		if !ok {
			continue
		}
		readable := false
		for v := lo; v <= hi && !readable; v++ {
			readable = reader.reads(v)
		}
		if !readable {
			bad = append(bad, s)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	sort.Slice(bad, func(i, j int) bool {
		if count[bad[i]] != count[bad[j]] {
			return count[bad[i]] > count[bad[j]]
		}
		return bad[i].String() < bad[j].String()
	})
	var parts []string
	for _, s := range bad {
		lo, hi, _ := s.RDBWrites()
		n := "1 instance runs"
		if count[s] > 1 {
			n = fmt.Sprintf("%d instances run", count[s])
		}
		parts = append(parts, fmt.Sprintf("%s %s, which writes %s", n, s, writesText(lo, hi)))
	}
	return fmt.Sprintf("%s; %s %s", strings.Join(parts, ", "), reader, reader.readsText())
}

// Image repositories whose tags name the server they hold: Docker Hub's official Redis
// image and the Valkey project's. Any other repository (a mirror, a private build) is
// one the operator cannot tell.
var imageServers = map[string]string{
	"library/redis": ServerRedis,
	"valkey/valkey": ServerValkey,
}

// ImageServer is the server an image reference holds when its name tells: a known
// repository (imageServers, with or without Docker Hub's registry names) and a plain
// MAJOR.MINOR or MAJOR.MINOR.PATCH tag. A digest, another tag ("latest", "7",
// "7.0-alpine") or another repository gives ok false.
func ImageServer(image string) (Server, bool) {
	if strings.Contains(image, "@") {
		return Server{}, false
	}
	repo, tag := image, ""
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repo, tag = image[:i], image[i+1:]
	}
	for _, registry := range []string{"docker.io/", "index.docker.io/", "registry-1.docker.io/"} {
		repo = strings.TrimPrefix(repo, registry)
	}
	if !strings.Contains(repo, "/") {
		repo = "library/" + repo
	}
	name, ok := imageServers[repo]
	if !ok || !plainVersion(tag) {
		return Server{}, false
	}
	return Server{Name: name, Version: tag}, true
}

// plainVersion reports whether tag is MAJOR.MINOR or MAJOR.MINOR.PATCH, digits only.
func plainVersion(tag string) bool {
	parts := strings.Split(tag, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// RDBUnreadable says why target cannot RESTORE payloads of RDB version v (a backup's
// keys keep the version of the server that wrote them), or returns "" when it can or the
// table cannot tell (a target whose major.minor is not in it). RESTORE checks the payload's
// version as loading a file does, e.g. "redis 7.0 reads RDB up to 10".
func RDBUnreadable(target Server, v int) string {
	reader, ok := rdbRow(target)
	if !ok || reader.reads(v) {
		return ""
	}
	return fmt.Sprintf("%s %s", reader, reader.readsText())
}
