package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hc-middleware/redis-cluster-operator/redis/conf"
)

// Password rotation and application users. Every step is sent to every node and is
// idempotent, so a step cut short (an operator restart, a node not answering) is simply
// sent again: ACL SETUSER makes a user exactly what it is given, ACL DELUSER of a missing
// user and CONFIG SET of the value already set change nothing.

// ApplyUsers makes every user exactly as given on every node, user after user (each user
// on all nodes before the next), stopping at the first error.
func ApplyUsers(ctx context.Context, f Factory, addrs []string, users []User) error {
	for _, u := range users {
		for _, addr := range addrs {
			acl := f.For(addr)
			if err := acl.ACLSetUser(ctx, u); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteUsers deletes the named users on every node.
func DeleteUsers(ctx context.Context, f Factory, addrs []string, names []string) error {
	for _, name := range names {
		for _, addr := range addrs {
			acl := f.For(addr)
			if err := acl.ACLDelUser(ctx, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetMasterAuth makes every node send password to its master.
func SetMasterAuth(ctx context.Context, f Factory, addrs []string, password string) error {
	for _, addr := range addrs {
		acl := f.For(addr)
		if err := acl.SetMasterAuth(ctx, password); err != nil {
			return err
		}
	}
	return nil
}

// MissingUsers lists the nodes that lack one of the names (a node restarted before the
// file it includes was updated), by address.
func MissingUsers(ctx context.Context, f Factory, addrs []string, names []string) ([]string, error) {
	var out []string
	for _, addr := range addrs {
		acl := f.For(addr)
		have, err := acl.ACLUsers(ctx)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if !hasString(have, n) {
				out = append(out, addr)
				break
			}
		}
	}
	return out, nil
}

func hasString(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// RulesError is ACL rules Redis refused, with Redis' own words.
type RulesError struct {
	User string
	Err  error
}

func (e *RulesError) Error() string {
	return fmt.Sprintf("Redis refuses the rules of user %s: %s", e.User, strings.TrimPrefix(e.Err.Error(), "ERR "))
}
func (e *RulesError) Unwrap() error { return e.Err }

// ParseRules splits an application user's rules (spec.users[i].rules) as Redis reads a
// line of arguments (conf.SplitArgs: quotes, escapes, any blank), the arguments ACL
// SETUSER then gets one by one, and refuses a rule that sets a password or switches the
// user on or off, judged as Redis judges rules, case-insensitively: on, off, nopass,
// resetpass, reset, or one starting with >, <, # or !. The password comes from the user's
// Secret; such a rule would add one the operator does not manage, or none. The error
// names the rule by its position and kind, never by its text (it may be a password).
func ParseRules(rules string) ([]string, error) {
	args, err := conf.SplitArgs(rules)
	if err != nil {
		return nil, fmt.Errorf("Redis cannot read them: %w", err)
	}
	for i, a := range args {
		if why := forbiddenRule(a); why != "" {
			return nil, fmt.Errorf("rule %d of %d %s; the password comes from passwordSecret and the operator switches the user on", i+1, len(args), why)
		}
	}
	return args, nil
}

// forbiddenRule says why an ACL rule may not be in spec.users, "" when it may.
func forbiddenRule(rule string) string {
	if rule != "" && strings.ContainsRune("><#!", rune(rule[0])) {
		return fmt.Sprintf("is a password rule (%q…)", rule[:1])
	}
	switch strings.ToLower(rule) {
	case "on", "off", "nopass", "resetpass", "reset":
		return fmt.Sprintf("is %q", strings.ToLower(rule))
	}
	return ""
}

// validationUser is the throwaway user rules are tried on, so a refused rule touches no
// real user.
const validationUser = "redis-cluster-operator-validate"

// ValidateRules asks one node whether it accepts the rules, by setting them on a
// throwaway user and deleting it: ACL SETUSER checks every rule, and ACL DRYRUN checks
// commands, not rules. A refusal is a *RulesError.
func ValidateRules(ctx context.Context, a Admin, user string, rules []string) error {
	err := a.ACLSetUser(ctx, User{Name: validationUser, Rules: append([]string{"off"}, rules...)})
	if delErr := a.ACLDelUser(ctx, validationUser); delErr != nil && err == nil {
		return delErr
	}
	if isRulesRefusal(err) {
		return &RulesError{User: user, Err: errors.Unwrap(err)}
	}
	return err
}

// isRulesRefusal tells a refused rule ("ERR Error in ACL SETUSER modifier ...") from a
// node that could not be asked.
func isRulesRefusal(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Error in ACL SETUSER")
}

// ClusterUsers are the users a password protects: the default user (clients, and
// replication, which sends masterauth as the default user) and the operator's own, each
// accepting every password of hashes (two while a rotation is under way).
func ClusterUsers(hashes ...string) []User {
	return []User{
		{Name: DefaultUser, Hashes: hashes, Rules: DefaultRules()},
		{Name: OperatorUser, Hashes: hashes, Rules: OperatorRules()},
	}
}
