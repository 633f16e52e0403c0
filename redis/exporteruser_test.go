package redis

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// The exporter user's rules that docs/metrics.md recommends are accepted by a real
// redis-server and allow every command redis_exporter (v1.88.0) sends for its default
// metrics, and no key.
func TestExporterUserRulesFromDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)- name: exporter\n.*\n\s*rules: "([^"]+)"`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/metrics.md has no spec.users entry named exporter with rules")
	}
	const pw, userPW = "secret", "exporter-pw"
	servers := redistest.Start(t, 1, aclCfg(pw))
	ctx := ctxFor(t, 5*time.Second)
	admin := asUser(servers[0].Addr, "", pw)
	defer admin.Close()
	u := User{Name: "exporter", Hashes: []string{PasswordHash(userPW)}, Rules: strings.Fields(string(m[1]))}
	args := []any{"acl", "setuser", u.Name}
	for _, a := range u.SetUserArgs() {
		args = append(args, a)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %v: %v", u.SetUserArgs(), err)
	}
	c := asUser(servers[0].Addr, "exporter", userPW)
	defer c.Close()
	for _, cmd := range [][]any{{"ping"}, {"info", "all"}, {"config", "get", "*"}, {"cluster", "info"}, {"cluster", "nodes"},
		{"slowlog", "get", "128"}, {"slowlog", "len"}, {"latency", "latest"}, {"latency", "histogram"},
		{"client", "setname", "redis_exporter"}, {"client", "list"}, {"select", "0"}} {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			t.Errorf("%v as exporter: %v", cmd, err)
		}
	}
	if err := c.Get(ctx, "k").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("the exporter user may GET a key: %v", err)
	}
}
