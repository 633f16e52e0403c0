package redis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/conf"
)

// OperatorUser is the ACL user the operator speaks to Redis as, once a password is set.
const OperatorUser = "operator"

// DefaultUser is Redis' own user, the one clients that send AUTH with a password alone and
// replication (masterauth without masteruser) authenticate as.
const DefaultUser = "default"

// OperatorCommands are the commands the operator sends, as ACL command names
// (container|subcommand). It is the one source of the operator user's ACL rules
// (OperatorRules) and of docs/architecture.md's command table; TestOperatorUserCovers runs
// bootstrap, scale-out with MIGRATE, scale-in, healing, failover, rotation and users
// against servers where this user is the only one the operator knows and checks that
// Redis denied nothing (ACL LOG).
var OperatorCommands = []string{
	// Observing.
	"cluster|nodes", "cluster|info", "info", "dbsize",
	// Bootstrap, healing and resizing.
	"cluster|meet", "cluster|set-config-epoch", "cluster|addslotsrange", "cluster|addslots",
	"cluster|replicate", "cluster|forget", "cluster|reset",
	"cluster|failover",
	// Slot migration and open-slot fixing.
	"cluster|setslot", "cluster|getkeysinslot", "cluster|countkeysinslot",
	// A target claiming a group of slots at once (ClaimSlots).
	"multi", "exec", "cluster|bumpepoch",
	"migrate", "asking", "dump",
	// Sizing MIGRATE batches by bytes, and holding failure detection while a big key moves.
	"memory|usage", "config|get",
	// What MIGRATE sends to the target as this user (AUTH2 opens its connection).
	"select", "restore-asking",
	// Rotation and application users.
	"acl|setuser", "acl|deluser", "acl|users", "config|set",
	// Backup (redis/backup.Take): the cut pauses writes on every master and reads each
	// master's snapshot through a replication connection, diskless where the master's
	// repl-diskless-sync settings (config|get) allow; restore writes keys with RESTORE,
	// and strings with SET (half the master's time of RESTORE), those without an expiry
	// by slot in MSET (less again) once ACL DRYRUN says the user may.
	"client|pause", "client|unpause", "replconf", "psync", "restore", "set", "mset", "acl|dryrun",
}

// OperatorRules are the ACL rules of the operator user, without its password: every key
// (MIGRATE and DUMP move and compare any key), no Pub/Sub channel, only OperatorCommands.
func OperatorRules() []string {
	rules := []string{"resetkeys", "~*", "resetchannels", "-@all"}
	for _, c := range OperatorCommands {
		rules = append(rules, "+"+c)
	}
	return rules
}

// ExporterUser is the ACL user the operator makes for the exporter sidecar (monitorImage)
// of a cluster with a password, with a password of its own that only the operator and
// the sidecar know (Secret NAME-auth): the sidecar never holds the cluster's password.
const ExporterUser = "operator-exporter"

// ExporterCommands are the commands redis_exporter (v1.88) sends for its default metrics
// (INFO, the cluster, slowlog and latency series) once its CONFIG GET is turned off
// (REDIS_EXPORTER_CONFIG_COMMAND=-, templates/statefulset.cue): no CONFIG GET, which
// would give it masterauth (the cluster's password), and no key.
var ExporterCommands = []string{
	"ping", "info", "cluster|info", "cluster|nodes",
	"slowlog|get", "slowlog|len", "latency|latest", "latency|histogram",
	"client|setname", "select",
}

// ExporterRules are the ACL rules of ExporterUser, without its password: no key, no
// channel, only ExporterCommands.
func ExporterRules() []string {
	rules := []string{"resetkeys", "resetchannels", "-@all"}
	for _, c := range ExporterCommands {
		rules = append(rules, "+"+c)
	}
	return rules
}

// DefaultRules are the default user's rules besides its password: everything, as with
// requirepass.
func DefaultRules() []string { return []string{"~*", "&*", "+@all"} }

// PasswordHash is the hex sha256 of a password, the form Redis' ACL rules take with "#"
// (add) and "!" (remove), so the plain password need not be sent or written for a user.
func PasswordHash(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

// User is one ACL user as the operator applies it: name, passwords (as hashes) and rules.
type User struct {
	Name string
	// Hashes are PasswordHash values; a user with two is in a password rotation.
	Hashes []string
	// Rules are ACL SETUSER rules without passwords or on/off.
	Rules []string
}

// SetUserArgs are the arguments of ACL SETUSER that make the user exactly u: reset first,
// so the user has these rules and passwords and nothing left from before. Redis applies
// them atomically: a refused rule leaves the user as it was.
func (u User) SetUserArgs() []string {
	args := []string{"reset", "on"}
	for _, h := range u.Hashes {
		args = append(args, "#"+h)
	}
	return append(args, u.Rules...)
}

// ConfLine is u as a redis.conf `user` directive, every argument quoted for Redis' config
// parser, so a rule cannot end the line or start another directive.
func (u User) ConfLine() string {
	parts := []string{"user", u.Name}
	for _, a := range u.SetUserArgs() {
		parts = append(parts, conf.QuoteAlways(a))
	}
	return strings.Join(parts, " ")
}

// AuthConf is the text of the file redis.conf includes when a password is set: the users
// and masterauth (the one place the plain password is written, because a replica sends
// it to its master).
func AuthConf(masterAuth string, users []User) string {
	var b strings.Builder
	b.WriteString("# Written by redis-cluster-operator into the Secret NAME-auth; included by redis.conf.\n")
	for _, u := range users {
		b.WriteString(u.ConfLine())
		b.WriteByte('\n')
	}
	b.WriteString("masterauth " + conf.QuoteAlways(masterAuth) + "\n")
	return b.String()
}

// ACLSetUser makes the user exactly u on this node.
func (a *admin) ACLSetUser(ctx context.Context, u User) error {
	args := []interface{}{"acl", "setuser", u.Name}
	for _, s := range u.SetUserArgs() {
		args = append(args, s)
	}
	if err := a.c.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("failed to set ACL user %s on %s: %w", u.Name, a.addr, err)
	}
	return nil
}

// ACLDelUser deletes the user on this node; a user that is not there is no error.
func (a *admin) ACLDelUser(ctx context.Context, name string) error {
	if err := a.c.Do(ctx, "acl", "deluser", name).Err(); err != nil {
		return fmt.Errorf("failed to delete ACL user %s on %s: %w", name, a.addr, err)
	}
	return nil
}

// ACLUsers lists the node's users, sorted.
func (a *admin) ACLUsers(ctx context.Context) ([]string, error) {
	users, err := a.c.Do(ctx, "acl", "users").StringSlice()
	if err != nil {
		return nil, fmt.Errorf("failed to list ACL users of %s: %w", a.addr, err)
	}
	sort.Strings(users)
	return users, nil
}

// SetMasterAuth sets the password this node sends to its master (CONFIG SET masterauth).
// The error never holds the password.
func (a *admin) SetMasterAuth(ctx context.Context, password string) error {
	if err := a.c.ConfigSet(ctx, "masterauth", password).Err(); err != nil {
		return fmt.Errorf("failed to set masterauth on %s: %w", a.addr, err)
	}
	return nil
}

// isWrongPass reports an AUTH refused for a wrong password or an unknown user.
func isWrongPass(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGPASS")
}

// authOnConnect authenticates a new connection as user with the first of passwords the
// node accepts (during a rotation a node may hold the old password or the new one),
// falling back to the default user when Redis does not know user: a node started before
// the operator had its own user (its pod not yet rolled) still answers.
func authOnConnect(user string, passwords []string) func(ctx context.Context, cn *goredis.Conn) error {
	return func(ctx context.Context, cn *goredis.Conn) error {
		var err error
		for _, pw := range passwords {
			if pw == "" {
				continue
			}
			if user != "" {
				if err = cn.AuthACL(ctx, user, pw).Err(); !isWrongPass(err) {
					return err
				}
			}
			if err = cn.Auth(ctx, pw).Err(); !isWrongPass(err) {
				return err
			}
		}
		return err
	}
}
