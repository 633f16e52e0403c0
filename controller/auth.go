package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// The password and ACL users (docs/security.md). The user's Secret holds the password the
// cluster should have; the operator's Secret NAME-auth holds what the instances have: the
// file redis.conf includes (users, masterauth), the password in use and, while a rotation
// is under way, the previous one. NAME-auth is the rotation's memory, so an operator
// restarted half way finishes the rotation it started, and the password is never in the
// status (which shows hashes).

// Keys of Secret NAME-auth.
const (
	// authConfKey is the file the pods mount and redis.conf includes.
	authConfKey = "auth.conf"
	// authPasswordKey is the password the instances accept and the operator uses.
	authPasswordKey = "password"
	// authPreviousKey is the password still accepted while a rotation is under way.
	authPreviousKey = "previous-password"
	// authExporterKey is the password of the operator's exporter user
	// (redis.ExporterUser), made by the operator, which the exporter sidecar reads.
	authExporterKey = "exporter-password"
)

// authSecretName is the operator's Secret of a cluster (docs/architecture.md).
func authSecretName(cluster string) string { return cluster + "-auth" }

// Event reasons of the password and users.
const (
	// ReasonPasswordRotation: a step of a password rotation was done on every instance.
	ReasonPasswordRotation = "PasswordRotation"
	// ReasonUsersApplied: spec.users were applied to (or deleted from) every instance.
	ReasonUsersApplied = "UsersApplied"
)

// authState is what observeAuth read: the password asked for, the one the instances
// have, and the application users asked for.
type authState struct {
	// desired is the password in spec.passwordSecret; "" when it cannot be read.
	desired string
	// active is the password the instances accept and the operator uses.
	active string
	// previous is still accepted while a rotation is under way, "" otherwise.
	previous string
	// conf is NAME-auth's auth.conf as live, "" when the Secret is absent.
	conf string
	// exists is true when NAME-auth exists.
	exists bool
	// resourceVersion is NAME-auth's as read (and judged this RedisCluster's) or as last
	// written: every write is preconditioned on it, so a Secret replaced meanwhile by one
	// the operator does not own is never overwritten.
	resourceVersion string
	// users are spec.users with their password hashes, in spec order, then the
	// operator's exporter user when the cluster has the exporter sidecar.
	users []redis.User
	// exporter is the exporter user's password (NAME-auth), made when NAME-auth lacks it.
	exporter string
	// exporterMissing is true when NAME-auth exists without the exporter password.
	exporterMissing bool
}

// Why a cluster has no password (scope.noPassword).
const (
	// noPasswordDisabled: spec.disablePassword, set when the cluster was created.
	noPasswordDisabled = "Disabled"
	// noPasswordLegacy: an older operator formed the cluster without a password, before
	// a password was the default; it keeps running without one (no silent lock-out).
	noPasswordLegacy = "FormedWithoutPassword"
)

// ReasonNoPassword: the Warning that a cluster formed without a password by an older
// operator keeps running without one.
const ReasonNoPassword = "NoPassword"

// legacyNoPasswordNotice is what a cluster formed without a password by an older
// operator says in its status reason, its PasswordSet condition and a Warning event.
const legacyNoPasswordNotice = "This cluster was formed without a password (by an operator before passwords were the default) and keeps running without one: " +
	"every client that reaches port 6379 may do anything. A password cannot be added in place (replicas and their masters would stop replicating during the roll): " +
	"create a new RedisCluster (it gets a generated password, or spec.passwordSecret's) and move the data to it, " +
	"or set spec.disablePassword: true to keep this one without a password on purpose (and spec.networkPolicy to limit who reaches it)"

// formedWithoutPassword reports whether the status says the cluster got past None
// without a password ever recorded: what a cluster an older operator made without
// spec.passwordSecret looks like. A cluster with a password, the generated one included,
// has status.auth from its first reconcile past None on (and NAME-auth before its pods).
func formedWithoutPassword(rc *redisv1alpha1.RedisCluster) bool {
	p := rc.Status.Phase
	return p != "" && p != redisv1alpha1.PhaseNone && rc.Status.Auth == nil
}

// observeAuth decides whether the cluster has a password and reads it: spec.passwordSecret,
// or without it the password the operator generates and keeps in NAME-auth; none with
// spec.disablePassword or for a cluster an older operator formed without one. It reads
// NAME-auth and the Secrets of spec.users. A missing Secret is a refusal (s.specErr): the
// operator never falls back to no password, it keeps the password the instances have
// (NAME-auth, or the one it last used).
func (r *Reconciler) observeAuth(ctx context.Context, s *scope) error {
	rc := s.cluster
	ref := rc.Spec.PasswordSecret
	a := &authState{}
	s.auth = a
	if ref != nil && ref.Name == authSecretName(rc.Name) {
		s.specErr = fmt.Errorf("spec.passwordSecret.name: %q is the Secret the operator writes for this RedisCluster (NAME-auth); put the password in a Secret of your own", ref.Name)
		return nil
	}
	if err := r.readAuthSecret(ctx, s); err != nil {
		return err
	}
	legacy := formedWithoutPassword(rc) && !a.exists
	switch {
	case rc.Spec.DisablePassword && legacy, rc.Spec.DisablePassword && !a.exists && rc.Status.Auth == nil:
		s.auth, s.noPassword = nil, noPasswordDisabled
		return nil
	case rc.Spec.DisablePassword:
		// The instances have a password: rendering them without one would roll every pod
		// to a server that accepts anyone, and cut the operator off meanwhile.
		if s.specErr == nil {
			s.specErr = errors.New("spec.disablePassword: this cluster has a password (Secret NAME-auth); it cannot be removed in place: remove spec.disablePassword, or create a new RedisCluster with it")
		}
		ref = nil
	case legacy:
		s.auth, s.noPassword, s.passwordNotice = nil, noPasswordLegacy, legacyNoPasswordNotice
		s.notices = append(s.notices, legacyNoPasswordNotice)
		switch {
		case ref != nil && s.specErr == nil:
			s.specErr = errors.New("spec.passwordSecret: this cluster was formed without a password and cannot be given one in place (replicas and their masters would stop replicating during the roll); remove spec.passwordSecret, or create a new RedisCluster with it and move the data")
		case len(rc.Spec.Users) > 0 && s.specErr == nil:
			s.specErr = errors.New("spec.users: this cluster was formed without a password, and ACL users need one on the default user; remove spec.users, or create a new RedisCluster with them")
		}
		return nil
	}
	var err error
	if ref == nil {
		err = r.generatedPassword(s)
	} else {
		err = r.namedPassword(ctx, s, ref)
	}
	if err != nil {
		return err
	}
	if a.exporter == "" {
		if a.exporter, err = newRandomPassword("the exporter's password"); err != nil {
			return err
		}
		a.exporterMissing = a.exists
	}
	s.creds.user, s.creds.password, s.creds.previous = redis.OperatorUser, a.active, a.previous
	return r.observeUsers(ctx, s)
}

// namedPassword is the password of a cluster with spec.passwordSecret: the Secret's as the
// one asked for; the instances keep the one they have (NAME-auth, or the one the operator
// last used) until reconcileAuth rotates it. A missing Secret or key refuses the spec.
func (r *Reconciler) namedPassword(ctx context.Context, s *scope, ref *redisv1alpha1.SecretKeyReference) error {
	rc, a := s.cluster, s.auth
	pw, missing, err := readSecretKey(ctx, r.APIReader, rc.Namespace, ref.Name, ref.Key, "spec.passwordSecret")
	if err != nil {
		return err
	}
	a.desired = pw
	if a.active == "" {
		if last, ok := r.redis.lastPassword(client.ObjectKeyFromObject(rc)); ok {
			a.active = last
		} else {
			a.active = a.desired
		}
	}
	if missing != "" && s.specErr == nil {
		s.specErr = fmt.Errorf("%s; %s", missing, keepingPassword(a))
	}
	return nil
}

// generatedPassword is the password of a cluster without spec.passwordSecret: the one the
// instances have (NAME-auth, or the one the operator last used), as if a Secret named it,
// so removing spec.passwordSecret keeps the password it gave. A new cluster gets 32 random
// bytes, written to NAME-auth (key password) before any pod starts; never logged. A cluster
// that had a password (status.auth) whose NAME-auth is gone, with an operator that has not
// used it since it started, is refused: a new password would lock the instances' clients
// and the operator out.
func (r *Reconciler) generatedPassword(s *scope) error {
	a := s.auth
	if a.active == "" {
		if last, ok := r.redis.lastPassword(client.ObjectKeyFromObject(s.cluster)); ok {
			a.active = last
		}
	}
	switch {
	case a.active != "":
	case s.cluster.Status.Auth != nil:
		if s.specErr == nil {
			s.specErr = errors.New("spec.passwordSecret: the cluster's generated password was in Secret NAME-auth, which is gone, and the operator has not used it since it started; " +
				"restore NAME-auth, or put the password the instances have in a Secret of your own and name it in spec.passwordSecret; nothing is changed until then")
		}
		return nil
	default:
		pw, err := newRandomPassword("the cluster's password")
		if err != nil {
			return err
		}
		a.active = pw
	}
	a.desired = a.active
	return nil
}

// keepingPassword says which password the operator keeps using while the Secret is missing.
func keepingPassword(a *authState) string {
	if a.active == "" {
		return "the operator has no password for this cluster (neither NAME-auth nor a password it used since it started) and changes nothing until the Secret is back"
	}
	return "the operator keeps using the password the instances have (Secret NAME-auth) and changes nothing until the Secret is back; the cluster keeps serving"
}

// readAuthSecret reads NAME-auth into s.auth; one this RedisCluster does not control is a
// refusal, never overwritten.
func (r *Reconciler) readAuthSecret(ctx context.Context, s *scope) error {
	rc := s.cluster
	sec := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: authSecretName(rc.Name)}, sec)
	switch {
	case client.IgnoreNotFound(err) != nil:
		return fmt.Errorf("failed to get Secret %s: %w", authSecretName(rc.Name), err)
	case err != nil:
		return nil
	}
	if why := notOurs("Secret", sec, rc); why != "" {
		s.specErr = &refusal{reason: ReasonNotOwner, err: errors.New(why)}
		return nil
	}
	a := s.auth
	a.exists, a.resourceVersion = true, sec.ResourceVersion
	a.conf = string(sec.Data[authConfKey])
	a.active = string(sec.Data[authPasswordKey])
	a.previous = string(sec.Data[authPreviousKey])
	a.exporter = string(sec.Data[authExporterKey])
	return nil
}

// newRandomPassword makes a password: 32 random bytes, hex (64 characters, nothing a
// redis.conf line would need to quote). The exporter user's is never rotated (the sidecar
// reads it from its env when its pod starts) and grants only metrics
// (redis.ExporterRules); the cluster's generated one is the default user's.
func newRandomPassword(what string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("failed to make %s: %w", what, err)
	}
	return hex.EncodeToString(b), nil
}

// exporterUser is the operator's ACL user for the exporter sidecar: only with a sidecar
// (spec.pod[0].monitorImage) on a cluster with a password.
func exporterUser(rc *redisv1alpha1.RedisCluster, a *authState) (redis.User, bool) {
	if a == nil || len(rc.Spec.Pod) == 0 || rc.Spec.Pod[0].MonitorImage == "" {
		return redis.User{}, false
	}
	return redis.User{Name: redis.ExporterUser, Hashes: []string{redis.PasswordHash(a.exporter)}, Rules: redis.ExporterRules()}, true
}

// readSecretKey reads one key of a Secret; a missing Secret or key is said in missing,
// naming the field.
func readSecretKey(ctx context.Context, c client.Reader, ns, name, key, field string) (value, missing string, err error) {
	if key == "" {
		key = "password"
	}
	sec := &corev1.Secret{}
	err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec)
	switch {
	case client.IgnoreNotFound(err) != nil:
		return "", "", fmt.Errorf("failed to get Secret %s: %w", name, err)
	case err != nil:
		return "", fmt.Sprintf("%s.name: Secret %q not found in namespace %s", field, name, ns), nil
	case len(sec.Data[key]) == 0:
		return "", fmt.Sprintf("%s.key: Secret %q has no key %q", field, name, key), nil
	}
	return string(sec.Data[key]), "", nil
}

// observeUsers reads the password of each spec.users entry.
func (r *Reconciler) observeUsers(ctx context.Context, s *scope) error {
	for i, u := range s.cluster.Spec.Users {
		pw, missing, err := readSecretKey(ctx, r.APIReader, s.cluster.Namespace, u.PasswordSecret.Name, u.PasswordSecret.Key, fmt.Sprintf("spec.users[%d].passwordSecret", i))
		if err != nil {
			return err
		}
		if missing != "" {
			if s.specErr == nil {
				s.specErr = fmt.Errorf("%s; the users stay as they are until it is back", missing)
			}
			continue
		}
		rules, err := redis.ParseRules(u.Rules)
		if err != nil {
			// Nothing is applied: the user's rules would give it a password the operator
			// does not manage (or none), which the CRD's check, word by word, let by.
			if s.specErr == nil {
				s.specErr = fmt.Errorf("spec.users[%d].rules: %v; no user was changed", i, err)
			}
			continue
		}
		s.auth.users = append(s.auth.users, redis.User{Name: u.Name, Hashes: []string{redis.PasswordHash(pw)}, Rules: rules})
	}
	if u, ok := exporterUser(s.cluster, s.auth); ok {
		s.auth.users = append(s.auth.users, u)
	}
	return nil
}
