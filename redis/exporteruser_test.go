package redis

import (
	"strings"
	"testing"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// The operator's own exporter user (ExporterRules) is accepted by a real redis-server,
// allows every command redis_exporter (v1.88.0) sends for its default metrics with its
// CONFIG GET turned off, and nothing that reads a password or a key: CONFIG GET
// masterauth (the cluster's password) and GET are refused.
func TestExporterUserRules(t *testing.T) {
	const pw, userPW = "secret", "exporter-pw"
	servers := redistest.Start(t, 1, aclCfg(pw))
	ctx := ctxFor(t, 5*time.Second)
	admin := asUser(servers[0].Addr, "", pw)
	defer admin.Close()
	if err := admin.ConfigSet(ctx, "masterauth", pw).Err(); err != nil {
		t.Fatal(err)
	}
	u := User{Name: ExporterUser, Hashes: []string{PasswordHash(userPW)}, Rules: ExporterRules()}
	args := []any{"acl", "setuser", u.Name}
	for _, a := range u.SetUserArgs() {
		args = append(args, a)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %v: %v", u.SetUserArgs(), err)
	}
	c := asUser(servers[0].Addr, ExporterUser, userPW)
	defer c.Close()
	for _, cmd := range [][]any{{"ping"}, {"info", "all"}, {"cluster", "info"}, {"cluster", "nodes"},
		{"slowlog", "get", "128"}, {"slowlog", "len"}, {"latency", "latest"}, {"latency", "histogram"},
		{"client", "setname", "redis_exporter"}, {"select", "0"}} {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			t.Errorf("%v as %s: %v", cmd, ExporterUser, err)
		}
	}
	for _, cmd := range [][]any{{"config", "get", "masterauth"}, {"config", "get", "*"}, {"get", "k"}, {"keys", "*"},
		{"acl", "list"}, {"client", "list"}, {"config", "set", "masterauth", "x"}, {"migrate", "127.0.0.1", "1", "k", "0", "1"}} {
		if err := c.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%v as %s: %v, want NOPERM", cmd, ExporterUser, err)
		}
	}
}
