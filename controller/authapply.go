package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis"
)

// What act does about the password and users (auth.go observes them): NAME-auth written
// before the pods that mount it, the password rotated, spec.users applied.

// ensureAuthSecret writes NAME-auth when it is absent (a new cluster, or deleted by
// hand) or lacks the exporter's password (made by an older operator): the pods cannot
// start without it, and their exporter sidecar reads its password from it. A new one
// holds the active password and the exporter user, no application user; those are
// applied live and added by reconcileUsers. One that lacked the exporter's password
// keeps its users and gains the exporter user, which reconcileUsers sets live.
func (r *Reconciler) ensureAuthSecret(ctx context.Context, s *scope) error {
	a := s.auth
	if a == nil || a.active == "" || (a.exists && !a.exporterMissing) {
		return nil
	}
	var lines []string
	if a.exists {
		live := appUserLines(a.conf)
		delete(live, redis.ExporterUser)
		lines = sortedValues(live)
	}
	if u, ok := exporterUser(s.cluster, a); ok {
		lines = append(lines, u.ConfLine())
	}
	if err := r.writeAuthSecret(ctx, s, a.active, a.previous, lines); err != nil {
		return err
	}
	a.exporterMissing = false
	r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonApplied, "Applied Secret/%s", authSecretName(s.cluster.Name))
	return nil
}

// writeAuthSecret applies NAME-auth: the users default and operator with active (and
// previous, while rotating), masterauth active, and the application users' lines.
func (r *Reconciler) writeAuthSecret(ctx context.Context, s *scope, active, previous string, appLines []string) error {
	rc := s.cluster
	hashes := []string{redis.PasswordHash(active)}
	data := map[string][]byte{authPasswordKey: []byte(active), authExporterKey: []byte(s.auth.exporter)}
	if previous != "" {
		hashes = append([]string{redis.PasswordHash(previous)}, hashes...)
		data[authPreviousKey] = []byte(previous)
	}
	conf := redis.AuthConf(active, redis.ClusterUsers(hashes...))
	if len(appLines) > 0 {
		conf += strings.Join(appLines, "\n") + "\n"
	}
	data[authConfKey] = []byte(conf)
	gvk := rc.GroupVersionKind()
	sec := corev1ac.Secret(authSecretName(rc.Name), rc.Namespace).
		WithLabels(authSecretLabels(rc.Name)).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(gvk.GroupVersion().String()).
			WithKind(gvk.Kind).WithName(rc.Name).WithUID(rc.UID).WithController(true).WithBlockOwnerDeletion(true)).
		WithType(corev1.SecretTypeOpaque).
		WithData(data)
	if s.auth.exists {
		// The operator writes only the Secret it read and found its own (readAuthSecret):
		// the API server refuses the apply (Conflict) if it was replaced or changed since,
		// instead of ForceOwnership taking over whatever is there now.
		sec.WithResourceVersion(s.auth.resourceVersion)
	}
	if err := r.Client.Apply(ctx, sec, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to apply Secret %s: %w", authSecretName(rc.Name), err)
	}
	if sec.ResourceVersion != nil {
		s.auth.resourceVersion = *sec.ResourceVersion
	}
	s.auth.exists, s.auth.conf, s.auth.active, s.auth.previous = true, conf, active, previous
	s.creds.user, s.creds.password, s.creds.previous = redis.OperatorUser, active, previous
	return nil
}

// reconcileAuth brings a formed, whole cluster to the password and users the spec asks
// for: a rotation first, then the users. Every member must answer; a step that fails is
// sent again by the next reconcile.
func (r *Reconciler) reconcileAuth(ctx context.Context, s *scope) error {
	a := s.auth
	if a == nil || !a.exists || len(s.members) == 0 {
		return nil
	}
	if a.previous != "" || (a.desired != "" && a.desired != a.active) {
		if err := r.rotatePassword(ctx, s); err != nil {
			return err
		}
	}
	if err := r.renewClusterUsers(ctx, s); err != nil {
		return err
	}
	return r.reconcileUsers(ctx, s)
}

// renewClusterUsers sets the default and operator users on every member, and writes
// NAME-auth again, when NAME-auth's lines for them are not what this operator writes: a
// cluster made by an older operator, whose user may run fewer commands than
// redis.OperatorCommands now lists (MSET and ACL DRYRUN for restores, say), would
// otherwise keep the older rules on every node, and in the file the pods load when they
// restart, until a rotation or a change of spec.users wrote them again. A rotation under
// way writes them at its end.
func (r *Reconciler) renewClusterUsers(ctx context.Context, s *scope) error {
	a := s.auth
	if a.previous != "" {
		return nil
	}
	users := redis.ClusterUsers(redis.PasswordHash(a.active))
	if strings.HasPrefix(a.conf, redis.AuthConf(a.active, users)) {
		return nil
	}
	addrs := memberAddrs(s)
	if err := redis.ApplyUsers(ctx, r.factoryFor(s), addrs, users); err != nil {
		return err
	}
	if err := r.writeAuthSecret(ctx, s, a.active, "", sortedValues(appUserLines(a.conf))); err != nil {
		return err
	}
	r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonUsersApplied, "ACL users on %d instances: set %s and %s to this operator's rules", len(addrs), redis.DefaultUser, redis.OperatorUser)
	return nil
}

// rotatePassword rolls the password of spec.passwordSecret in with both passwords valid
// meanwhile: (1) the new one added to the default and operator users on every member,
// (2) NAME-auth records it (the file has both, masterauth the new one) and the operator
// switches, (3) CONFIG SET masterauth new everywhere, (4) the old one removed from every
// member and from NAME-auth. A rotation found under way (previous set) resumes at (3).
func (r *Reconciler) rotatePassword(ctx context.Context, s *scope) error {
	a := s.auth
	logger := log.FromContext(ctx)
	addrs := memberAddrs(s)
	apps := sortedValues(appUserLines(a.conf))
	if a.previous == "" {
		old, next := a.active, a.desired
		logger.Info("Rotating the password: adding the new one", "members", len(addrs))
		if err := redis.ApplyUsers(ctx, r.factoryFor(s), addrs, redis.ClusterUsers(redis.PasswordHash(old), redis.PasswordHash(next))); err != nil {
			return fmt.Errorf("failed to add the new password: %w", err)
		}
		if err := r.writeAuthSecret(ctx, s, next, old, apps); err != nil {
			return err
		}
		r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonPasswordRotation, "New password added on %d instances; both are valid until every instance has it; the operator uses the new one", len(addrs))
	}
	f := r.factoryFor(s)
	if err := redis.SetMasterAuth(ctx, f, addrs, a.active); err != nil {
		return fmt.Errorf("failed to switch masterauth: %w", err)
	}
	if err := redis.ApplyUsers(ctx, f, addrs, redis.ClusterUsers(redis.PasswordHash(a.active))); err != nil {
		return fmt.Errorf("failed to remove the old password: %w", err)
	}
	if err := r.writeAuthSecret(ctx, s, a.active, "", apps); err != nil {
		return err
	}
	logger.Info("Rotated the password", "members", len(addrs))
	r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonPasswordRotation, "Password rotated: masterauth switched and the old password removed on %d instances", len(addrs))
	return nil
}

// reconcileUsers applies spec.users: a new or changed user (its rules or password) is
// set on every member with ACL SETUSER, a removed one deleted with ACL DELUSER, and a
// member that lacks one (restarted before NAME-auth was updated) gets them all again.
// Rules Redis refuses stop it before any member is touched, naming spec.users[i].rules.
func (r *Reconciler) reconcileUsers(ctx context.Context, s *scope) error {
	a := s.auth
	f := r.factoryFor(s)
	addrs := memberAddrs(s)
	live := appUserLines(a.conf)
	var changed []redis.User
	var names, lines []string
	for _, u := range a.users {
		names = append(names, u.Name)
		lines = append(lines, u.ConfLine())
		if live[u.Name] != u.ConfLine() {
			changed = append(changed, u)
		}
	}
	var removed []string
	for name := range live {
		if !slices.Contains(names, name) {
			removed = append(removed, name)
		}
	}
	slices.Sort(removed)
	lacking, err := redis.MissingUsers(ctx, f, addrs, names)
	if err != nil {
		return err
	}
	if len(changed) == 0 && len(removed) == 0 && len(lacking) == 0 {
		return nil
	}
	for i, u := range a.users {
		if !slices.ContainsFunc(changed, func(c redis.User) bool { return c.Name == u.Name }) {
			continue
		}
		err := redis.ValidateRules(ctx, f.For(addrs[0]), u.Name, u.Rules)
		if re := (*redis.RulesError)(nil); errors.As(err, &re) {
			r.warnOnce(s, ReasonInvalidSpec, fmt.Sprintf("spec.users[%d].rules: %v; no user was changed", i, re))
			return nil
		} else if err != nil {
			return err
		}
	}
	if len(lacking) > 0 {
		changed = a.users
	}
	if err := redis.ApplyUsers(ctx, f, addrs, changed); err != nil {
		return err
	}
	if err := redis.DeleteUsers(ctx, f, addrs, removed); err != nil {
		return err
	}
	if err := r.writeAuthSecret(ctx, s, a.active, "", lines); err != nil {
		return err
	}
	r.Recorder.Eventf(s.cluster, corev1.EventTypeNormal, ReasonUsersApplied, "ACL users on %d instances: set %s; deleted %s", len(addrs), userNames(changed), orNone(removed))
	return nil
}

func userNames(us []redis.User) string {
	var n []string
	for _, u := range us {
		n = append(n, u.Name)
	}
	return orNone(n)
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// appUserLines are the application users' lines of an auth.conf, by user name.
func appUserLines(conf string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(conf, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "user" || f[1] == redis.DefaultUser || f[1] == redis.OperatorUser {
			continue
		}
		out[f[1]] = l
	}
	return out
}

// sortedValues are the map's values ordered by key.
func sortedValues(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// authSecretLabels are the labels of every object the operator renders.
func authSecretLabels(cluster string) map[string]string {
	l := redisv1alpha1.SelectorLabels(cluster)
	l[redisv1alpha1.LabelManagedBy] = redisv1alpha1.ManagedBy
	return l
}

func memberAddrs(s *scope) []string {
	out := make([]string, len(s.members))
	for i, m := range s.members {
		out[i] = m.Addr
	}
	return out
}

// authStatus is status.auth: hashes of the passwords, salted with the cluster's UID, and
// the users applied.
func authStatus(s *scope) *redisv1alpha1.AuthStatus {
	a := s.auth
	if a == nil || a.active == "" {
		return nil
	}
	st := &redisv1alpha1.AuthStatus{PasswordHash: saltedHash(s, a.active)}
	if a.previous != "" {
		st.PreviousPasswordHash = saltedHash(s, a.previous)
	}
	for name := range appUserLines(a.conf) {
		st.Users = append(st.Users, name)
	}
	slices.Sort(st.Users)
	return st
}

func saltedHash(s *scope, pw string) string {
	sum := sha256.Sum256([]byte(string(s.cluster.UID) + pw))
	return hex.EncodeToString(sum[:])[:16]
}

// factoryFor is the cluster's Redis client factory with the credentials observed.
func (r *Reconciler) factoryFor(s *scope) redis.Factory {
	return r.redis.factory(client.ObjectKeyFromObject(s.cluster), s.creds)
}
