package render

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// The exporter sidecar's credentials and port (docs/metrics.md): with a password, the
// operator's own exporter user and its password from NAME-auth, never the cluster's
// password nor a spec.users entry's, even one named exporter; no credentials without a
// password; its /scrape endpoint and CONFIG GET off; and a metrics port on the headless
// Service whenever the sidecar is rendered.
func TestExporterCredentialsAndPort(t *testing.T) {
	r, err := New()
	if err != nil {
		t.Fatal(err)
	}
	pw := &redisv1alpha1.SecretKeyReference{Name: "redis-pw", Key: "password"}
	exporterUser := redisv1alpha1.RedisUser{Name: "exporter", PasswordSecret: redisv1alpha1.SecretKeyReference{Name: "exp-pw", Key: "pw"}, Rules: "-@all +info +config|get"}
	appUser := redisv1alpha1.RedisUser{Name: "app", PasswordSecret: redisv1alpha1.SecretKeyReference{Name: "app-pw", Key: "password"}, Rules: "+@all ~*"}
	cases := []struct {
		name      string
		monitor   bool
		password  *redisv1alpha1.SecretKeyReference
		disabled  bool
		users     []redisv1alpha1.RedisUser
		user      string // REDIS_USER, "" for none
		secret    string // REDIS_PASSWORD's Secret/key, "" for none
		container bool
	}{
		{"no sidecar", false, pw, false, nil, "", "", false},
		{"disablePassword", true, nil, true, nil, "", "", true},
		{"the generated password", true, nil, false, nil, "operator-exporter", "NAME-auth/exporter-password", true},
		{"the operator's exporter user", true, pw, false, []redisv1alpha1.RedisUser{appUser}, "operator-exporter", "NAME-auth/exporter-password", true},
		{"a spec.users entry named exporter is not used", true, pw, false, []redisv1alpha1.RedisUser{appUser, exporterUser}, "operator-exporter", "NAME-auth/exporter-password", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rcs, err := ReadFile("../config/samples/redis_v1alpha1_rediscluster.yaml")
			if err != nil {
				t.Fatal(err)
			}
			rc := rcs[0]
			rc.Spec.PasswordSecret, rc.Spec.Users, rc.Spec.DisablePassword = c.password, c.users, c.disabled
			if len(rc.Spec.Pod) == 0 {
				rc.Spec.Pod = []redisv1alpha1.RedisPodTemplate{{}}
			}
			if c.monitor {
				rc.Spec.Pod[0].MonitorImage = "oliver006/redis_exporter:v1.88.0"
			}
			objs, err := r.Render(rc, "")
			if err != nil {
				t.Fatal(err)
			}
			var sts appsv1.StatefulSet
			var headless corev1.Service
			for _, o := range objs {
				switch {
				case o.GetKind() == "StatefulSet":
					fromUnstructured(t, o, &sts)
				case o.GetKind() == "Service" && o.GetName() == rc.Name:
					fromUnstructured(t, o, &headless)
				}
			}
			hasPort := slices.ContainsFunc(headless.Spec.Ports, func(p corev1.ServicePort) bool {
				return p.Name == "metrics" && p.Port == 9121 && p.TargetPort.IntValue() == 9121
			})
			if hasPort != c.container {
				t.Errorf("headless Service metrics port: %v, want %v (%+v)", hasPort, c.container, headless.Spec.Ports)
			}
			var exporter *corev1.Container
			for i, ct := range sts.Spec.Template.Spec.Containers {
				if ct.Name == "exporter" {
					exporter = &sts.Spec.Template.Spec.Containers[i]
				}
				if ct.Name == "redis" && slices.ContainsFunc(ct.Env, func(e corev1.EnvVar) bool { return e.Name == "REDIS_USER" || e.Name == "REDIS_PASSWORD" }) {
					t.Errorf("the redis container has credentials in its env: %+v", ct.Env)
				}
			}
			if (exporter != nil) != c.container {
				t.Fatalf("exporter container rendered: %v, want %v", exporter != nil, c.container)
			}
			if exporter == nil {
				return
			}
			user, secret := "", ""
			env := map[string]string{}
			for _, e := range exporter.Env {
				env[e.Name] = e.Value
				if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
					if ref.SecretKeyRef.Name != rc.Name+"-auth" {
						t.Errorf("exporter env %s from Secret %s, want only NAME-auth", e.Name, ref.SecretKeyRef.Name)
					}
				}
				switch e.Name {
				case "REDIS_USER":
					user = e.Value
				case "REDIS_PASSWORD":
					secret = strings.Replace(e.ValueFrom.SecretKeyRef.Name, rc.Name, "NAME", 1) + "/" + e.ValueFrom.SecretKeyRef.Key
				}
			}
			if env["REDIS_EXPORTER_DISABLE_SCRAPE_ENDPOINT"] != "true" || env["REDIS_EXPORTER_CONFIG_COMMAND"] != "-" {
				t.Errorf("exporter env %v: want /scrape and CONFIG GET off", env)
			}
			if user != c.user || secret != c.secret {
				t.Errorf("exporter REDIS_USER %q, REDIS_PASSWORD from %q; want %q, %q", user, secret, c.user, c.secret)
			}
		})
	}
}
