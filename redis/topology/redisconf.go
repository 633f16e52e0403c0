package topology

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/conf"
)

// Live configuration: the redis.conf directives the operator applies to running nodes with
// CONFIG SET, so changing them restarts no pod. Every other directive needs a restart (the
// pods roll through Upgrading). The list is explicit: a directive is here only if Redis
// 7.0 takes it with CONFIG SET on a cluster node and a running node changes behaviour at
// once (TestLiveDirectivesAreSettable runs each on a real redis-server). templates/
// configmap.cue keeps a copy (_liveDirectives) to leave these out of the pod template's
// config hash; render's TestLiveDirectivesMatchGo checks the two agree.
//
// Not here, on purpose: cluster-node-timeout (the operator itself raises it while a big
// key moves, bigkey.go), appendonly and save (persistence is a restart's business), and
// anything with several values per line (client-output-buffer-limit).

// LiveDirective is one directive CONFIG SET applies, with Redis 7.0's default (as CONFIG
// GET prints it), which a node is set back to when the directive leaves redis.conf.
type LiveDirective struct {
	Name    string
	Default string
}

// LiveDirectives are the directives applied live, sorted by name.
var LiveDirectives = []LiveDirective{
	{"active-expire-effort", "1"},
	{"hz", "10"},
	{"latency-monitor-threshold", "0"},
	{"lazyfree-lazy-eviction", "no"},
	{"lazyfree-lazy-expire", "no"},
	{"lazyfree-lazy-server-del", "no"},
	{"lazyfree-lazy-user-del", "no"},
	{"maxmemory", "0"},
	{"maxmemory-policy", "noeviction"},
	{"maxmemory-samples", "5"},
	{"min-replicas-max-lag", "10"},
	{"min-replicas-to-write", "0"},
	{"notify-keyspace-events", ""},
	{"repl-backlog-size", "1048576"},
	{"repl-diskless-sync-delay", "5"},
	{"repl-timeout", "60"},
	{"slowlog-log-slower-than", "10000"},
	{"slowlog-max-len", "128"},
	{"tcp-keepalive", "300"},
	{"timeout", "0"},
}

// IsLiveDirective reports whether name (any case) is applied with CONFIG SET.
func IsLiveDirective(name string) bool {
	_, ok := liveDefault(name)
	return ok
}

func liveDefault(name string) (string, bool) {
	name = strings.ToLower(name)
	for _, d := range LiveDirectives {
		if d.Name == name {
			return d.Default, true
		}
	}
	return "", false
}

// ConfDirectives reads a redis.conf into its directives (lower case) and, for each, the
// arguments of every line that sets it, in order, each line's arguments as one string in
// a canonical quoting (conf.Quote), so lines Redis reads alike compare equal. Lines are
// split as Redis splits them (conf.ParseLine); comments, blank lines and lines Redis could
// not read (unbalanced quotes) are skipped.
func ConfDirectives(text string) map[string][]string {
	out := map[string][]string{}
	for name, lines := range confArgs(text) {
		for _, args := range lines {
			q := make([]string, len(args))
			for i, a := range args {
				q[i] = conf.Quote(a)
			}
			out[name] = append(out[name], strings.Join(q, " "))
		}
	}
	return out
}

// confArgs reads a redis.conf into its directives and, for each, the arguments of every
// line that sets it, unquoted.
func confArgs(text string) map[string][][]string {
	out := map[string][][]string{}
	for _, line := range strings.Split(text, "\n") {
		l, ok, err := conf.ParseLine(line)
		if !ok || err != nil {
			continue
		}
		out[l.Name] = append(out[l.Name], l.Args)
	}
	return out
}

// LiveSettings are the live directives a redis.conf sets, with the value Redis keeps (the
// last line's), unquoted.
func LiveSettings(text string) map[string]string {
	out := map[string]string{}
	for name, lines := range confArgs(text) {
		if IsLiveDirective(name) {
			out[name] = strings.Join(lines[len(lines)-1], " ")
		}
	}
	return out
}

// ConfValue is the value redis.conf gives name (the last line's arguments, unquoted, joined
// by a space), or def when no line sets it.
func ConfValue(text, name, def string) string {
	if lines := confArgs(text)[strings.ToLower(name)]; len(lines) > 0 {
		return strings.Join(lines[len(lines)-1], " ")
	}
	return def
}

// ConfChange names the directives that differ between two redis.conf texts, split into
// those applied live and those that need a restart, each sorted.
type ConfChange struct {
	Live, Restart []string
}

// DiffConf compares two redis.conf texts directive by directive.
func DiffConf(from, to string) ConfChange {
	a, b := ConfDirectives(from), ConfDirectives(to)
	var c ConfChange
	for _, name := range unionKeys(a, b) {
		if strings.Join(a[name], "\n") == strings.Join(b[name], "\n") {
			continue
		}
		if IsLiveDirective(name) {
			c.Live = append(c.Live, name)
		} else {
			c.Restart = append(c.Restart, name)
		}
	}
	return c
}

func unionKeys[V any](maps ...map[string]V) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range maps {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// LiveCommands are the CONFIG SET pairs that take a node from the live settings applied
// before (applied) to want: each directive of want, and a directive applied before but no
// longer in redis.conf back to its default. Sorted by directive.
func LiveCommands(applied, want map[string]string) []Setting {
	var out []Setting
	for _, name := range unionKeys(applied, want) {
		if v, ok := want[name]; ok {
			out = append(out, Setting{name, v})
		} else if def, ok := liveDefault(name); ok {
			out = append(out, Setting{name, def})
		}
	}
	return out
}

// Setting is one directive and its value.
type Setting struct {
	Name, Value string
}

// ConfNodeTimeout is the cluster-node-timeout a redis.conf gives (its last line, as Redis
// reads it); false when it gives none or a value Redis would refuse.
func ConfNodeTimeout(text string) (time.Duration, bool) {
	lines := confArgs(text)["cluster-node-timeout"]
	if len(lines) == 0 || len(lines[len(lines)-1]) != 1 {
		return 0, false
	}
	ms, err := strconv.ParseInt(lines[len(lines)-1][0], 10, 64)
	if err != nil || ms <= 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
