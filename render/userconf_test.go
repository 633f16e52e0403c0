package render

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hc-middleware/redis-cluster-operator/redis/conf"
)

// evilConf writes directives the operator sets (user, requirepass, tls-auth-clients) the
// ways Redis reads them but a word-by-word filter does not: quoted, quoted mid-word,
// escaped, upper case after a tab; a password on each.
const evilConf = `"user" backdoor on >s3cret1 +@all ~*
"tls-auth-clients" no
us"er" b2 on >s3cret2 +@all
"\x75ser" b3 on >s3cret3
	USER b4 on >s3cret4
requirepass s3cret5
"requirepass" 's3cret6'
'\x72equirepass' s3cret7
"masteruser" x
'MAXMEMORY' 2gb
maxmemory-policy "allkeys-lru"
masterauth "s3cret8
`

// A user ConfigMap cannot make a user, set a password or turn off client certificates by
// quoting a directive: the rendered redis.conf, read line by line as Redis reads it (the
// last value of a directive wins), has no user and no requirepass, tls-auth-clients yes,
// and no password of the user's text anywhere; an ignored line names its directive only,
// and the settings a user may make are kept.
func TestUserConfQuotedDirectivesAreIgnored(t *testing.T) {
	r := newRenderer(t)
	rcs, err := ReadFile("../config/samples/redis_v1alpha1_rediscluster_tls.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := r.Render(rcs[0], evilConf)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	fromUnstructured(t, byKind(objs, "ConfigMap"), &cm)
	text := cm.Data["redis.conf"]
	if strings.Contains(text, "s3cret") {
		t.Errorf("the rendered redis.conf holds a password of the user's ConfigMap:\n%s", text)
	}
	last := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		l, ok, err := conf.ParseLine(line)
		if err != nil {
			t.Errorf("Redis cannot read line %q: %v", line, err)
		}
		if ok {
			last[l.Name] = l.Args
		}
	}
	for _, d := range []string{"user", "requirepass", "masteruser", "masterauth"} {
		if args, ok := last[d]; ok {
			t.Errorf("Redis reads %s %q from the rendered redis.conf", d, args)
		}
	}
	if got := strings.Join(last["tls-auth-clients"], " "); got != "yes" {
		t.Errorf("Redis reads tls-auth-clients %q, want yes", got)
	}
	if got := strings.Join(last["maxmemory"], " ") + "," + strings.Join(last["maxmemory-policy"], " "); got != "2gb,allkeys-lru" {
		t.Errorf("maxmemory, maxmemory-policy = %s, want the user's 2gb,allkeys-lru", got)
	}
	for _, want := range []string{"# ignored, set by the operator: user", "# ignored, set by the operator: requirepass",
		"# ignored, set by the operator: tls-auth-clients", conf.UnreadableLine} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("redis.conf lacks %q:\n%s", want, text)
		}
	}
}

// Text the operator did not normalize (the templates alone, as the cue CLI preview fills
// them) is judged safely too: a directive name that is not a plain word is ignored.
func TestUserConfTemplatesIgnoreQuotedNames(t *testing.T) {
	r := newRenderer(t)
	rcs, err := ReadFile("../config/samples/redis_v1alpha1_rediscluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(input{APIVersion: "redis.middleware.hc.cn/v1alpha1", Kind: "RedisCluster",
		Metadata: inputMetadata{Name: rcs[0].Name, Namespace: rcs[0].Namespace}, Spec: rcs[0].Spec})
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.renderJSON(data, evilConf)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	fromUnstructured(t, byKind(objs, "ConfigMap"), &cm)
	for _, line := range strings.Split(cm.Data["redis.conf"], "\n") {
		l, ok, err := conf.ParseLine(line)
		if err == nil && ok && (l.Name == "user" || l.Name == "requirepass" || l.Name == "tls-auth-clients" || l.Name == "masteruser") {
			t.Errorf("Redis reads %s from line %q", l.Name, line)
		}
		if strings.Contains(line, "s3cret") && !strings.HasPrefix(strings.TrimSpace(line), "masterauth") {
			t.Errorf("line %q holds a password", line)
		}
	}
}
