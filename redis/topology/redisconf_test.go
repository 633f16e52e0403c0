package topology

import (
	"reflect"
	"testing"
	"time"
)

func TestLiveSettingsAndDiff(t *testing.T) {
	conf := "port 6379\n# maxmemory 1gb\nmaxmemory 1gb\nMAXMEMORY 2gb\nnotify-keyspace-events \"\"\nappendonly yes\nsave 900 1\nsave 300 10\n"
	want := map[string]string{"maxmemory": "2gb", "notify-keyspace-events": ""}
	if got := LiveSettings(conf); !reflect.DeepEqual(got, want) {
		t.Errorf("LiveSettings = %v, want %v", got, want)
	}
	for name, want := range map[string]string{"maxmemory": "2gb", "Save": "300 10", "notify-keyspace-events": "", "hz": "none", "timeout": "7"} {
		if got := ConfValue(conf+"timeout\t7\n", name, "none"); got != want {
			t.Errorf("ConfValue(%q) = %q, want %q", name, got, want)
		}
	}
	// Read as Redis reads it: a quoted or escaped name, a tab, quoted values.
	for name, want := range map[string]string{"maxmemory": "4gb", "hz": "15", "cluster-node-timeout": "a b"} {
		if got := ConfValue("\"MaxMemory\"\t'4gb'\n\"\\x68z\" 15\ncluster-node-timeout \"a b\"\n", name, "none"); got != want {
			t.Errorf("ConfValue(%q) of quoted lines = %q, want %q", name, got, want)
		}
	}
	if d := DiffConf("maxmemory 1gb\n", "\"maxmemory\" '1gb'\n"); len(d.Live)+len(d.Restart) != 0 {
		t.Errorf("DiffConf of the same setting quoted: %+v, want no change", d)
	}
	next := "port 6379\nmaxmemory 3gb\nappendonly no\nsave 900 1\nsave 300 10\nhz 20\n"
	got := DiffConf(conf, next)
	if want := (ConfChange{Live: []string{"hz", "maxmemory", "notify-keyspace-events"}, Restart: []string{"appendonly"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("DiffConf = %+v, want %+v", got, want)
	}
	cmds := LiveCommands(map[string]string{"hz": "20", "timeout": "5"}, map[string]string{"hz": "30", "maxmemory": "1gb"})
	wantCmds := []Setting{{"hz", "30"}, {"maxmemory", "1gb"}, {"timeout", "0"}}
	if !reflect.DeepEqual(cmds, wantCmds) {
		t.Errorf("LiveCommands = %v, want %v", cmds, wantCmds)
	}
}

// The node timeout a redis.conf gives is its last line's, read as Redis reads it.
func TestConfNodeTimeout(t *testing.T) {
	cases := map[string]struct {
		conf string
		want time.Duration
		ok   bool
	}{
		"the template's":         {"cluster-node-timeout 5000\n", 5 * time.Second, true},
		"a user's line after it": {"cluster-node-timeout 5000\n# From ConfigMap x\nCLUSTER-NODE-TIMEOUT \"1500\"\n", 1500 * time.Millisecond, true},
		"none":                   {"appendonly yes\n", 0, false},
		"not a number":           {"cluster-node-timeout soon\n", 0, false},
		"commented out":          {"# cluster-node-timeout 100\n", 0, false},
	}
	for name, c := range cases {
		got, ok := ConfNodeTimeout(c.conf)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %v %v, want %v %v", name, got, ok, c.want, c.ok)
		}
	}
}
