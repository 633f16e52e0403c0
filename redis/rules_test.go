package redis

import (
	"reflect"
	"strings"
	"testing"
)

// ParseRules reads spec.users[i].rules as Redis reads arguments and refuses every way of
// writing a password or on/off rule that the CRD's word-by-word check let through: any
// case, any blank, quotes, escapes, a quote opened mid-word. Its error never holds the
// rule's text (a password).
func TestParseRulesRefusesBypasses(t *testing.T) {
	for _, rules := range []string{
		"+@all ~* NOPASS", "+@all ~* nopass", "+@all\t>hunter2", "+@all \v>hunter2", "+@all \f>hunter2",
		`+@all "nopass"`, `+@all no"pass"`, `+@all "\x6eopass"`, `+@all "\x3ehunter2"`, `+@all '>hunter2'`,
		`+@all ">hunter2"`, "+@all On", "OFF", "+@all ResetPass", "+@all RESET", "+@all <hunter2",
		"+@all #0123abcd", "+@all !0123abcd", `+@all "unbalanced`, `+@all "a"b`,
	} {
		got, err := ParseRules(rules)
		if err == nil {
			t.Errorf("ParseRules(%q) = %q, want a refusal", rules, got)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "0123abcd") {
			t.Errorf("ParseRules(%q): the error %q holds the rule's text", rules, err)
		}
	}
	for rules, want := range map[string][]string{
		"+@read ~app:*":                            {"+@read", "~app:*"},
		"+@all\t-@dangerous  ~cache:* ":            {"+@all", "-@dangerous", "~cache:*"},
		`"~my key*" +get`:                          {"~my key*", "+get"},
		"resetkeys %R~foo +client|setname allkeys": {"resetkeys", "%R~foo", "+client|setname", "allkeys"},
	} {
		got, err := ParseRules(rules)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseRules(%q) = %q, %v; want %q", rules, got, err, want)
		}
	}
}
