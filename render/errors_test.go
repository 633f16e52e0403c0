package render

import (
	"errors"
	"strings"
	"testing"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

const validSpec = `"replicas": 6, "version": "7.2"`

// TestMalformedInputFailsAtRender checks that what the Kubernetes schemas or the input
// schema refuse fails at render, with the CUE path of the bad value in the message.
// Raw JSON reaches values the Go types cannot hold (a string replicas).
func TestMalformedInputFailsAtRender(t *testing.T) {
	r := newRenderer(t)
	for _, tc := range []struct {
		name, spec, wantPath, wantText string
	}{
		{"replicas as a string", `"replicas": "6", "version": "7.2"`,
			"input.spec.replicas", "mismatched types string and int"},
		{"resources not a quantity", validSpec + `, "pod": [{"resources": {"limits": {"cpu": "two"}}}]`,
			"input.spec.pod.0.resources.limits.cpu", "invalid value"},
		{"fewer than 3 masters", `"replicas": 5, "version": "7.2"`,
			"input.spec.replicas", "out of bound >=6"},
		{"toleration field of the wrong type", validSpec + `, "pod": [{"tolerations": [{"key": "k", "tolerationSeconds": "soon"}]}]`,
			"input.spec.pod.0.tolerations.0.tolerationSeconds", "mismatched types"},
		{"unknown field of a Kubernetes type", validSpec + `, "pod": [{"securityContext": {"runAsUsr": 1}}]`,
			"input.spec.pod.0.securityContext.runAsUsr", "not allowed"},
		{"unknown field in the affinity terms", validSpec + `, "pod": [{"affinity": {"podAntiAffinity": {"requiredDuringScheduling": []}}}]`,
			"statefulSet.spec.template.spec.affinity.podAntiAffinity.requiredDuringScheduling", "not allowed"},
		{"two pod entries", validSpec + `, "pod": [{}, {}]`,
			"input.spec.pod", "list.MaxItems"},
		{"nfs without a claim", validSpec + `, "pod": [{"volumes": {"type": "nfs"}}]`,
			"input.spec.pod.0.volumes.persistentVolumeClaimName", "required"},
		{"empty version", `"replicas": 6, "version": ""`,
			"input.spec.version", "invalid value"},
		{"AssignReceive without strategies", validSpec + `, "updateStrategy": {"type": "AssignReceive"}`,
			"input.spec.updateStrategy.assignStrategies", "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := `{"apiVersion": "redis.middleware.hc.cn/v1alpha1", "kind": "RedisCluster",
				"metadata": {"name": "bad"}, "spec": {` + tc.spec + `}}`
			_, err := r.renderJSON([]byte(in), "")
			if err == nil {
				t.Fatal("render succeeded, want an error")
			}
			var renderErr *Error
			if !errors.As(err, &renderErr) {
				t.Errorf("error %T is not a *render.Error", err)
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.Contains(msg, tc.wantPath+":") || !strings.Contains(msg, tc.wantText) {
				t.Errorf("error does not name %q with %q:\n%s", tc.wantPath, tc.wantText, msg)
			}
		})
	}
}

// TestRenderErrorNamesCluster checks the typed path: a spec the Go types allow but the
// CRD refuses (here an unknown Service type) fails with the cluster and the path.
func TestRenderErrorNamesCluster(t *testing.T) {
	r := newRenderer(t)
	rc := &redisv1alpha1.RedisCluster{}
	rc.Name, rc.Namespace = "typed", "ns"
	rc.Spec.Replicas, rc.Spec.Version = 6, "7.2"
	rc.Spec.ClientService.Type = "ExternalName"
	_, err := r.Render(rc, "")
	if err == nil {
		t.Fatal("render succeeded, want an error")
	}
	for _, want := range []string{"ns/typed", "input.spec.clientService.type:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
