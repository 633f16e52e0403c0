package v1alpha1_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The CRD's CEL rule on spec.users[].rules, as generated into the CRD, refuses password
// and on/off rules in any case, after any blank, quoted or not: Redis reads ACL keywords
// case-insensitively and splits on every blank. The rule's regular expression is run
// here with Go's regexp, which has RE2's syntax, as CEL's matches() has, on the text
// lower-cased as lowerAscii() does. What CEL cannot see (escapes, a quote opened mid-word)
// the operator refuses (redis.ParseRules).
func TestUsersRulesCELRefusesBypasses(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "redis.middleware.hc.cn_redisclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]struct {
								Items struct {
									Properties map[string]struct {
										Validations []struct {
											Rule string `json:"rule"`
										} `json:"x-kubernetes-validations"`
									} `json:"properties"`
								} `json:"items"`
							} `json:"properties"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	vals := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["users"].Items.Properties["rules"].Validations
	if len(vals) != 1 {
		t.Fatalf("spec.users[].rules has %d CEL rules, want 1", len(vals))
	}
	m := regexp.MustCompile(`^!self(\.lowerAscii\(\))?\.matches\('(.*)'\)$`).FindStringSubmatch(vals[0].Rule)
	if m == nil {
		t.Fatalf("CEL rule %q is not !self[.lowerAscii()].matches('…')", vals[0].Rule)
	}
	// A CEL single-quoted string: \\ is one backslash (the only escape the rule uses).
	re := regexp.MustCompile(strings.ReplaceAll(m[2], `\\`, `\`))
	refused := func(rules string) bool {
		if m[1] != "" {
			rules = strings.ToLower(rules)
		}
		return re.MatchString(rules)
	}
	for _, rules := range []string{
		"+@all ~* nopass", "+@all ~* NOPASS", "+@all ~* NoPass", "+@all\t>password", "+@all\v>password",
		"+@all \f>pw", ">pw +@all", "+@all <pw", "+@all #abcd", "+@all !abcd", "ON +@all", "+@all Off",
		"+@all RESET", "resetpass +@all", `+@all "nopass"`, `+@all '>pw'`, `+@all ">pw"`, `"ON"`,
	} {
		if !refused(rules) {
			t.Errorf("the CRD admits rules %q", rules)
		}
	}
	for _, rules := range []string{
		"+@read ~app:*", "+@all -@dangerous ~cache:* &notifications", "%R~foo +get", "+client|setname",
		"~only* +@read", "resetkeys ~a* resetchannels", "+@all ~on*", "allkeys allcommands", "-@all +info",
	} {
		if refused(rules) {
			t.Errorf("the CRD refuses rules %q", rules)
		}
	}
}
