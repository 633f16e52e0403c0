package topology

import (
	"strings"
	"testing"
)

// The table's cells, one server at a time: what it writes (a later release than the table
// knows writes at least what the newest before it does) and what it reads.
func TestRDBWrites(t *testing.T) {
	for _, c := range []struct {
		server Server
		lo, hi int
		ok     bool
	}{
		{Server{"redis", "7.0.15"}, 10, 10, true},
		{Server{"redis", "8.0.2"}, 12, 12, true},
		{Server{"redis", "7.2.4"}, 11, 11, true},
		{Server{"valkey", "7.2.4"}, 11, 11, true}, // a Valkey that reports redis_version only
		{Server{"valkey", "8.1.1"}, 11, 11, true},
		{Server{"valkey", "9.1.2"}, 80, 80, true},
		{Server{"valkey", "9.0.0"}, 80, 80, true},
		{Server{"redis", "8.2.1"}, 12, rdbForeignMax, true}, // later than the table: Redis' own range
		{Server{"redis", "255.255.255"}, 12, rdbForeignMax, true},
		{Server{"valkey", "9.2.0"}, 80, rdbNewest, true},
		{Server{"redis", "7.1.0"}, 10, rdbForeignMax, true}, // between rows: the one before
		{Server{"redis", "5.0.14"}, 0, 0, false},            // older than the table
		{Server{"valkey", "7.0.0"}, 0, 0, false},
		{Server{"keydb", "6.3.4"}, 0, 0, false},
		{Server{}, 0, 0, false},
		{Server{"redis", "unstable"}, 0, 0, false},
	} {
		lo, hi, ok := c.server.RDBWrites()
		if lo != c.lo || hi != c.hi || ok != c.ok {
			t.Errorf("%v.RDBWrites() = %d, %d, %v; want %d, %d, %v", c.server, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
}

func TestRDBReads(t *testing.T) {
	for _, c := range []struct {
		server   string
		readable []int
		not      []int
	}{
		{"redis 6.2", []int{1, 9}, []int{0, 10, 11, 12, 80}},
		{"redis 7.0", []int{9, 10}, []int{11, 12, 80}},
		{"redis 7.2", []int{10, 11}, []int{12, 80}},
		{"redis 8.0", []int{10, 11, 12}, []int{13, 80}},
		{"valkey 8.1", []int{10, 11}, []int{12, 80}},
		{"valkey 9.1", []int{10, 11, 80}, []int{12, 13, 79, 81}},
	} {
		name, version, _ := strings.Cut(c.server, " ")
		f, ok := rdbRow(Server{name, version})
		if !ok {
			t.Fatalf("%s: not in the table", c.server)
		}
		for _, v := range c.readable {
			if !f.reads(v) {
				t.Errorf("%s does not read RDB %d", c.server, v)
			}
		}
		for _, v := range c.not {
			if f.reads(v) {
				t.Errorf("%s reads RDB %d", c.server, v)
			}
		}
	}
}

// Every change of server the docs name (docs/servers.md, Upgrade paths), and the refused
// ones worded as the status says them.
func TestUnreadableRDB(t *testing.T) {
	srv := func(s string) Server {
		name, version, _ := strings.Cut(s, " ")
		return Server{name, version}
	}
	all := func(s string, n int) []Server {
		out := make([]Server, n)
		for i := range out {
			out[i] = srv(s)
		}
		return out
	}
	for _, c := range []struct {
		name    string
		target  string
		running []Server
		want    string // "" allowed
	}{
		// Upgrades, and moves whose target reads what runs.
		{"redis 7.0 to 8.0", "redis 8.0", all("redis 7.0.15", 6), ""},
		{"valkey 8.1 to 9.1", "valkey 9.1", all("valkey 8.1.1", 6), ""},
		{"redis 7.0 to valkey 8.1", "valkey 8.1", all("redis 7.0.15", 6), ""},
		{"redis 7.0 to valkey 9.1", "valkey 9.1", all("redis 7.0.15", 6), ""},
		{"redis 7.2 to valkey 8.1", "valkey 8.1", all("redis 7.2.4", 6), ""},
		{"valkey 8.1 to redis 8.0", "redis 8.0", all("valkey 8.1.1", 6), ""},
		{"valkey 8.1 to redis 7.2", "redis 7.2", all("valkey 8.1.1", 6), ""},
		{"same minor, older patch", "redis 7.0.10", all("redis 7.0.15", 6), ""},
		{"redis 8.0 to 7.4: both 12", "redis 7.4", all("redis 8.0.2", 6), ""},
		{"mid-upgrade, forward", "valkey 9.1", append(all("valkey 8.1.1", 3), all("valkey 9.1.2", 3)...), ""},

		// Downgrades and moves the target cannot load.
		{"redis 8.0 to 7.0", "redis 7.0", all("redis 8.0.2", 6),
			"6 instances run redis 8.0.2, which writes RDB 12; redis 7.0 reads RDB up to 10"},
		{"redis 7.0 to 6.2", "redis 6.2.14", all("redis 7.0.15", 6),
			"6 instances run redis 7.0.15, which writes RDB 10; redis 6.2 reads RDB up to 9"},
		{"valkey 9.1 to 8.1", "valkey 8.1", all("valkey 9.1.2", 6),
			"6 instances run valkey 9.1.2, which writes RDB 80; valkey 8.1 reads RDB up to 11"},
		{"valkey 9.1 to redis 7.0", "redis 7.0", all("valkey 9.1.2", 6),
			"6 instances run valkey 9.1.2, which writes RDB 80; redis 7.0 reads RDB up to 10"},
		{"valkey 9.1 to redis 8.0", "redis 8.0", all("valkey 9.1.2", 6),
			"6 instances run valkey 9.1.2, which writes RDB 80; redis 8.0 reads RDB up to 12"},
		{"valkey 8.1 to redis 7.0", "redis 7.0", all("valkey 8.1.1", 6),
			"6 instances run valkey 8.1.1, which writes RDB 11; redis 7.0 reads RDB up to 10"},
		{"redis 8.0 to valkey 9.1: Redis' own format", "valkey 9.1", all("redis 8.0.2", 6),
			"6 instances run redis 8.0.2, which writes RDB 12; valkey 9.1 reads RDB up to 11 and 80, not Redis' 12 to 79"},
		{"redis 8.0 to valkey 8.1", "valkey 8.1", all("redis 8.0.2", 6),
			"6 instances run redis 8.0.2, which writes RDB 12; valkey 8.1 reads RDB up to 11"},
		{"a later redis than the table, to valkey", "valkey 9.1", all("redis 8.2.1", 6),
			"6 instances run redis 8.2.1, which writes RDB 12 or later; valkey 9.1 reads RDB up to 11 and 80, not Redis' 12 to 79"},
		{"a later valkey than the table, to 8.1", "valkey 8.1", all("valkey 9.2.0", 6),
			"6 instances run valkey 9.2.0, which writes RDB 80 or later; valkey 8.1 reads RDB up to 11"},
		{"rolled back mid-upgrade: the upgraded ones are named", "valkey 8.1", append(all("valkey 8.1.1", 4), all("valkey 9.1.2", 2)...),
			"2 instances run valkey 9.1.2, which writes RDB 80; valkey 8.1 reads RDB up to 11"},
		{"two servers the target cannot read, most first", "redis 7.0", append(all("valkey 9.1.2", 1), all("redis 8.0.2", 5)...),
			"5 instances run redis 8.0.2, which writes RDB 12, 1 instance runs valkey 9.1.2, which writes RDB 80; redis 7.0 reads RDB up to 10"},

		// Cannot tell: allowed.
		{"target not in the table", "redis 8.2", all("valkey 9.1.2", 6), ""},
		{"target older than the table", "redis 5.0", all("redis 7.0.15", 6), ""},
		{"a later valkey than the table, to 9.1", "valkey 9.1", all("valkey 9.2.0", 6), ""},
		{"a later redis than the table, to 8.0", "redis 8.0", all("redis 8.2.1", 6), ""},
		{"running servers unknown", "redis 7.0", []Server{{}, {}}, ""},
		{"running server older than the table", "redis 7.0", all("redis 5.0.14", 6), ""},
		{"nothing runs", "redis 7.0", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := UnreadableRDB(srv(c.target), c.running); got != c.want {
				t.Errorf("UnreadableRDB(%s) = %q\nwant %q", c.target, got, c.want)
			}
		})
	}
}

func TestImageServer(t *testing.T) {
	for _, c := range []struct {
		image string
		want  Server
		ok    bool
	}{
		{"library/redis:7.0", Server{"redis", "7.0"}, true},
		{"redis:8.0.2", Server{"redis", "8.0.2"}, true},
		{"docker.io/library/redis:7.0", Server{"redis", "7.0"}, true},
		{"docker.io/redis:7.2", Server{"redis", "7.2"}, true},
		{"index.docker.io/library/redis:6.2.14", Server{"redis", "6.2.14"}, true},
		{"valkey/valkey:9.1", Server{"valkey", "9.1"}, true},
		{"docker.io/valkey/valkey:8.1.1", Server{"valkey", "8.1.1"}, true},

		{"library/redis:7.0-alpine", Server{}, false},
		{"library/redis:7.0-b", Server{}, false},
		{"library/redis:7", Server{}, false},
		{"library/redis:latest", Server{}, false},
		{"library/redis", Server{}, false},
		{"library/redis:7.0.1.2", Server{}, false},
		{"library/redis:v7.0", Server{}, false},
		{"library/redis:7.0@sha256:0123", Server{}, false},
		{"registry.example.com/library/redis:7.0", Server{}, false},
		{"registry.example.com:5000/redis:7.0", Server{}, false},
		{"bitnami/redis:7.0", Server{}, false},
		{"valkey:9.1", Server{}, false},
		{"", Server{}, false},
	} {
		got, ok := ImageServer(c.image)
		if got != c.want || ok != c.ok {
			t.Errorf("ImageServer(%q) = %+v, %v; want %+v, %v", c.image, got, ok, c.want, c.ok)
		}
	}
}

func TestRDBUnreadable(t *testing.T) {
	for _, c := range []struct {
		target  string
		version int
		refused bool
	}{
		{"7.0.15", 10, false}, {"7.0.15", 11, true}, {"7.0.15", 12, true},
		{"8.0.2", 10, false}, {"8.0.2", 12, false}, {"8.0.2", 80, true},
		{"valkey 8.1.1", 11, false}, {"valkey 8.1.1", 12, true}, {"valkey 8.1.1", 80, true},
		{"valkey 9.1.2", 10, false}, {"valkey 9.1.2", 11, false}, {"valkey 9.1.2", 12, true}, {"valkey 9.1.2", 80, false},
		{"9.9.9", 80, false}, // not in the table: let through
	} {
		s := Server{Name: ServerRedis, Version: c.target}
		if name, v, ok := strings.Cut(c.target, " "); ok {
			s = Server{Name: name, Version: v}
		}
		if got := RDBUnreadable(s, c.version); (got != "") != c.refused {
			t.Errorf("%s, RDB %d: %q, want refused %v", s, c.version, got, c.refused)
		}
	}
}
