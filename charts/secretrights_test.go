package charts_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// secretVerbs are the only Secret rights the operator has, and why:
//   - get: every Secret it reads is named in a spec (passwordSecret, users[].passwordSecret,
//     tls.secretName, a backup's s3 credentialsSecret and caSecret) or is its own NAME-auth,
//     and is read by name from the API server (APIReader; main.go never caches Secrets);
//   - create, patch: NAME-auth, written by server-side apply (a PATCH, authorized as create
//     too when the Secret does not exist yet). resourceNames cannot narrow them: the names
//     of clusters not created yet are unknown, so the controller refuses in code to write
//     a Secret its RedisCluster does not control (controller's
//     TestForeignAuthSecretIsNotWritten, TestAuthSecretWriteIsPreconditionedOnWhatWasRead).
//
// Never list or watch (every Secret's content where the operator runs), update or delete
// (NAME-auth goes with its RedisCluster by garbage collection).
var secretVerbs = []string{"create", "get", "patch"}

// Every role the install grants (the generated one, which the chart and config/namespaced
// copy, and the static leader-election and metrics roles) gives Secret rights only through
// the one rule, with exactly secretVerbs, on no named subset, and no wildcard reaches
// Secrets.
func TestOperatorSecretRights(t *testing.T) {
	files, err := filepath.Glob("../config/rbac/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	roles := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var role struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal(data, &role); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if role.Kind != "ClusterRole" && role.Kind != "Role" {
			continue
		}
		roles++
		for _, r := range role.Rules {
			core := slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")
			secrets := slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "*")
			if !core || !secrets {
				continue
			}
			if slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") || slices.Contains(r.Verbs, "*") {
				t.Errorf("%s: a wildcard rule reaches Secrets: %+v", f, r)
			}
			if len(r.Resources) != 1 {
				t.Errorf("%s: Secrets share a rule with %v; keep them in a rule of their own", f, r.Resources)
			}
			if len(r.ResourceNames) > 0 {
				t.Errorf("%s: the Secret rule names %v; NAME-auth of clusters not yet created would be refused", f, r.ResourceNames)
			}
			got = append(got, r.Verbs...)
		}
	}
	if roles < 3 {
		t.Fatalf("found %d roles in config/rbac, want the generated, leader-election and metrics ones", roles)
	}
	slices.Sort(got)
	if !slices.Equal(got, secretVerbs) {
		t.Errorf("Secret verbs granted: %s, want exactly %s (see secretVerbs)", strings.Join(got, ","), strings.Join(secretVerbs, ","))
	}
}
