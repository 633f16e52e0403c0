package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// aclCfg starts servers the way the operator's pods start: the users and masterauth from
// an included file, the default user and the operator user with password pw.
func aclCfg(pw string) redistest.Config {
	return redistest.Config{NodeTimeout: time.Second, Password: pw,
		AuthConf: AuthConf(pw, ClusterUsers(PasswordHash(pw)))}
}

// asUser is a client of one node authenticated as user.
func asUser(addr, user, pw string) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: addr, Username: user, Password: pw, MaxRetries: -1})
}

// deniedByACL lists what ACL LOG recorded on every server (a command or key refused, a
// failed AUTH), read as the default user.
func deniedByACL(t *testing.T, servers []*redistest.Server, defaultPW string) []string {
	t.Helper()
	var out []string
	for _, s := range servers {
		c := asUser(s.Addr, "", defaultPW)
		entries, err := c.Do(ctxFor(t, time.Second), "acl", "log").Slice()
		c.Close()
		if err != nil {
			t.Fatalf("ACL LOG on %s: %v", s.Addr, err)
		}
		for _, e := range entries {
			out = append(out, fmt.Sprintf("%s: %v", s.Addr, e))
		}
	}
	return out
}

// A password with every character a config line could trip on starts Redis from the
// included file, and the operator's factory reaches it as the operator user.
func TestAuthConfQuotesAnyPassword(t *testing.T) {
	pw := "p w\"q'\\x\n\t#;é"
	servers := redistest.Start(t, 1, aclCfg(pw))
	ctx := ctxFor(t, 2*time.Second)
	c := asUser(servers[0].Addr, OperatorUser, pw)
	defer c.Close()
	if err := c.Do(ctx, "cluster", "info").Err(); err != nil {
		t.Fatalf("operator user: %v", err)
	}
	if err := c.Get(ctx, "k").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("operator user may GET: %v", err)
	}
	d := asUser(servers[0].Addr, "", pw)
	defer d.Close()
	got, err := d.ConfigGet(ctx, "masterauth").Result()
	if err != nil || len(got) != 2 || got[1] != pw {
		t.Fatalf("masterauth = %q, %v", got, err)
	}
	f := newFactory(t, Options{User: OperatorUser, Password: pw})
	if _, err := f.For(servers[0].Addr).ClusterInfo(ctx); err != nil {
		t.Fatal(err)
	}
}

// The operator's user is allowed exactly what the operator sends: bootstrap, MIGRATE by
// scale-out and scale-in, CLUSTER FAILOVER, a node back at a new address healed in, a
// password rotation and application users, against servers where the operator knows only
// its own user (the default user has another password), and ACL LOG records no denial.
func TestOperatorUserCovers(t *testing.T) {
	t.Parallel()
	const clientPW, opPW = "client-pw", "operator-pw"
	users := []User{
		{Name: DefaultUser, Hashes: []string{PasswordHash(clientPW)}, Rules: DefaultRules()},
		{Name: OperatorUser, Hashes: []string{PasswordHash(opPW)}, Rules: OperatorRules()},
	}
	cfg := redistest.Config{NodeTimeout: time.Second, Password: clientPW, AuthConf: AuthConf(clientPW, users)}
	servers := redistest.Start(t, 8, cfg)
	members := membersOf(servers)
	f := newFactory(t, Options{User: OperatorUser, Password: opPW})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members[:6], 3, 1); err != nil {
		t.Fatal(err)
	}
	keys := healNames(500)
	putKeysAs(t, f, members[:6], keys, clientPW)
	if moved := scaleUntilDone(t, f, members, ScaleRequest{Masters: 4, ReplicasPerMaster: 1, Keep: 8, Pipeline: 10, Budget: time.Second}); moved == 0 {
		t.Fatal("scale-out moved no key")
	}
	scaleUntilDone(t, f, members, ScaleRequest{Masters: 3, ReplicasPerMaster: 1, Keep: 6, Pipeline: 10, Budget: time.Second})
	members = members[:6]

	st, err := Observe(ctxFor(t, 5*time.Second), f, members)
	if err != nil {
		t.Fatal(err)
	}
	for i := range st.Members {
		if self := st.Members[i].Self(); self != nil && self.Replica {
			if err := f.For(st.Members[i].Addr).Failover(ctxFor(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	// A replica restarted at a new address (its nodes.conf kept) is met again by healing.
	servers[5].Stop()
	back, err := redistest.StartIn(servers[5].Dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(back.Stop)
	members[5].Addr = back.Addr
	healUntilFormed(t, f, members)

	addrs := make([]string, len(members))
	for i, m := range members {
		addrs[i] = m.Addr
	}
	ctx := ctxFor(t, 10*time.Second)
	app := User{Name: "app", Hashes: []string{PasswordHash("app-pw")}, Rules: []string{"+@read", "~app:*"}}
	if err := ValidateRules(ctx, f.For(addrs[0]), "app", app.Rules); err != nil {
		t.Fatal(err)
	}
	if err := ApplyUsers(ctx, f, addrs, []User{app}); err != nil {
		t.Fatal(err)
	}
	if missing, err := MissingUsers(ctx, f, addrs, []string{"app"}); err != nil || len(missing) > 0 {
		t.Fatalf("missing app on %v, %v", missing, err)
	}
	if err := DeleteUsers(ctx, f, addrs, []string{"app"}); err != nil {
		t.Fatal(err)
	}
	if err := SetMasterAuth(ctx, f, addrs, clientPW); err != nil {
		t.Fatal(err)
	}
	if denied := deniedByACL(t, append(servers[:5], back), clientPW); len(denied) > 0 {
		t.Fatalf("Redis denied the operator user: %v", denied)
	}
	if lost := lostKeysAs(t, f, members, keys, clientPW); lost > 0 {
		t.Fatalf("%d of %d keys lost", lost, len(keys))
	}
}

// A rotation as the controller drives it: the new password added to every node (both
// valid), masterauth switched, the old one removed. A client on the old password keeps
// writing until the switch, one on the new password writes from the switch on and never
// fails; replication links stay up; a node restarted afterwards from the new file joins.
func TestPasswordRotationKeepsServing(t *testing.T) {
	t.Parallel()
	const oldPW, newPW = "old-pw", "new-pw"
	servers := redistest.Start(t, 6, aclCfg(oldPW))
	members := membersOf(servers)
	addrs := redistest.Addrs(servers)
	f := newFactory(t, Options{User: OperatorUser, Password: oldPW})
	if _, err := Bootstrap(ctxFor(t, 30*time.Second), f, members, 3, 1); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 20*time.Second)
	oldClient := clusterClient(addrs, oldPW)
	defer oldClient.Close()
	if err := oldClient.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// 1. Both passwords valid on every node.
	if err := ApplyUsers(ctx, f, addrs, ClusterUsers(PasswordHash(oldPW), PasswordHash(newPW))); err != nil {
		t.Fatal(err)
	}
	// 2. The operator switches; a node that somehow still has only the old password is
	// reached through OldPasswords.
	nf := newFactory(t, Options{User: OperatorUser, Password: newPW, OldPasswords: []string{oldPW}})
	newClient := clusterClient(addrs, newPW)
	defer newClient.Close()
	for i := 0; i < 200; i++ {
		if err := oldClient.Set(ctx, fmt.Sprintf("old:%d", i), i, 0).Err(); err != nil {
			t.Fatalf("write with the old password during the rotation: %v", err)
		}
		if err := newClient.Set(ctx, fmt.Sprintf("new:%d", i), i, 0).Err(); err != nil {
			t.Fatalf("write with the new password during the rotation: %v", err)
		}
	}
	// 3. masterauth, 4. the old password removed.
	if err := SetMasterAuth(ctx, nf, addrs, newPW); err != nil {
		t.Fatal(err)
	}
	if err := ApplyUsers(ctx, nf, addrs, ClusterUsers(PasswordHash(newPW))); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if err := newClient.Set(ctx, fmt.Sprintf("after:%d", i), i, 0).Err(); err != nil {
			t.Fatalf("write with the new password after the switch: %v", err)
		}
	}
	if err := asUser(addrs[0], "", oldPW).Ping(ctx).Err(); err == nil {
		t.Error("the old password still works after the rotation")
	}
	for _, a := range addrs {
		r, err := nf.For(a).Replication(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Role == "slave" && !r.LinkUp {
			t.Errorf("replica %s: link down after the rotation", a)
		}
	}

	// A replica restarted from the new file (what the Secret now holds) syncs with its
	// master on the new masterauth.
	var replica int
	for i, a := range addrs {
		if r, _ := nf.For(a).Replication(ctx); r.Role == "slave" {
			replica = i
			break
		}
	}
	servers[replica].Stop()
	back, err := redistest.StartIn(servers[replica].Dir, aclCfg(newPW))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(back.Stop)
	members[replica].Addr = back.Addr
	healUntilFormed(t, nf, members)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := nf.For(back.Addr).Replication(ctx)
		if err == nil && r.InSync() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted replica not in sync on the new password: %+v, %v", r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Rules Redis refuses are reported as a RulesError and leave the real user untouched.
func TestValidateRulesRefusesWithoutTouchingUsers(t *testing.T) {
	servers := redistest.Start(t, 1, aclCfg("pw"))
	f := newFactory(t, Options{User: OperatorUser, Password: "pw"})
	ctx := ctxFor(t, 2*time.Second)
	a := f.For(servers[0].Addr)
	app := User{Name: "app", Hashes: []string{PasswordHash("app")}, Rules: []string{"+@read", "~app:*"}}
	if err := ApplyUsers(ctx, f, []string{a.Addr()}, []User{app}); err != nil {
		t.Fatal(err)
	}
	err := ValidateRules(ctx, a, "app", []string{"+@read", "+nosuchcommand"})
	var re *RulesError
	if !errors.As(err, &re) {
		t.Fatalf("bad rules: %v, want a RulesError", err)
	}
	t.Logf("refusal: %v", err)
	if err := ValidateRules(ctx, a, "app", []string{"+@write", "~x:*"}); err != nil {
		t.Fatalf("good rules: %v", err)
	}
	c := asUser(a.Addr(), "app", "app")
	defer c.Close()
	// A lone node serves no slot: CLUSTERDOWN means the password and the ACL check
	// (which Redis makes first) passed.
	if err := c.Get(ctx, "app:1").Err(); err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN") {
		t.Fatalf("app user changed by validation: %v", err)
	}
	users, err := a.ACLUsers(ctx)
	if err != nil || hasString(users, validationUser) {
		t.Fatalf("users %v, %v", users, err)
	}
}

// clusterClient is a client of the default user; the slot table comes from CLUSTER NODES
// (go-redis v8 cannot read Redis 7's CLUSTER SLOTS).
func clusterClient(addrs []string, pw string) *goredis.ClusterClient {
	f := NewFactory(Options{Password: pw})
	return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, Password: pw,
		ClusterSlots: func(ctx context.Context) ([]goredis.ClusterSlot, error) { return ClusterSlots(ctx, f, addrs) }})
}

// putKeysAs writes each key (value: its name) through a cluster client as the default user.
func putKeysAs(t *testing.T, f Factory, members []topology.Member, keys []string, pw string) {
	t.Helper()
	cc := clusterClient(addrsOf(members), pw)
	defer cc.Close()
	ctx := ctxFor(t, 20*time.Second)
	for _, k := range keys {
		if err := cc.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// lostKeysAs counts the keys a cluster client as the default user cannot read back.
func lostKeysAs(t *testing.T, f Factory, members []topology.Member, keys []string, pw string) int {
	t.Helper()
	cc := clusterClient(addrsOf(members), pw)
	defer cc.Close()
	ctx := ctxFor(t, 20*time.Second)
	lost := 0
	for _, k := range keys {
		if v, err := cc.Get(ctx, k).Result(); err != nil || v != k {
			lost++
		}
	}
	return lost
}

func addrsOf(members []topology.Member) []string {
	out := make([]string, len(members))
	for i, m := range members {
		out[i] = m.Addr
	}
	return out
}
