// Package render turns a RedisCluster into the objects the operator applies, by filling
// the embedded CUE templates (package templates). The templates are compiled by New; the
// compiled value is shared, read-only, by every Render, and compiled again in a new CUE
// context every renewAfter evaluations (see compiled).
package render

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	cuejson "cuelang.org/go/encoding/json"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/conf"
	"github.com/hc-middleware/redis-cluster-operator/templates"
)

// Paths of the templates' interface (templates/config.cue, templates/objects.cue).
var (
	inputPath         = cue.ParsePath("input")
	userRedisConfPath = cue.ParsePath("context.userRedisConf")
	operatorNSPath    = cue.ParsePath("context.operatorNamespace")
	objectsPath       = cue.ParsePath("objects")
)

// Renderer renders RedisClusters with the compiled templates. It is safe for
// concurrent use: Render only reads the shared compiled value (FillPath returns a new
// value) and cuelang.org/go v0.17 supports concurrent use of a cue.Value.
type Renderer struct {
	// compiled is the current compilation; renders in flight keep the one they started with.
	compiled atomic.Pointer[compiled]
	// renewing is held by the one render that compiles the next compilation.
	renewing sync.Mutex
	// cache holds the objects of recent renders (see cache.go).
	cache renderCache
	// operatorNamespace is the namespace of the operator's pods, for the NetworkPolicy
	// (context.operatorNamespace); "" when unknown.
	operatorNamespace string
}

// Option configures a Renderer.
type Option func(*Renderer)

// OperatorNamespace tells the templates the namespace the operator's pods run in: the
// NetworkPolicy admits the operator's pods from there only. Without it (or with ""),
// only from the cluster's own namespace.
func OperatorNamespace(ns string) Option {
	return func(r *Renderer) { r.operatorNamespace = ns }
}

// OperatorNamespace is the namespace of the operator's pods the Renderer was given, ""
// when unknown: the store pods' NetworkPolicies admit the operator from it, as the
// clusters' do.
func (r *Renderer) OperatorNamespace() string { return r.operatorNamespace }

// renewAfter is how many evaluations one compilation serves. A CUE context keeps part of
// every value built in it (about 30 KiB a render of the sample, measured with
// cuelang.org/go v0.17), so a long-lived operator that renders every spec change would
// grow without bound (3 MiB a hundred renders); a fresh context every renewAfter renders
// bounds it (measured: the heap swings between 10 and 16 MiB over 600 distinct renders;
// without renewal it went from 9 to 15 MiB in the first 200 and kept growing), for one
// compile (BenchmarkCompile) per renewAfter evaluations.
const renewAfter = 128

// compiled is the templates compiled in one CUE context, and how many evaluations it
// has served.
type compiled struct {
	// template is the compiled package with `input` still open.
	template    cue.Value
	evaluations atomic.Int64
}

// New compiles the embedded templates. Call it once at start and share the Renderer.
func New(opts ...Option) (*Renderer, error) {
	c, err := compileTemplates()
	if err != nil {
		return nil, err
	}
	r := &Renderer{}
	for _, o := range opts {
		o(r)
	}
	r.compiled.Store(c)
	return r, nil
}

func compileTemplates() (*compiled, error) {
	v, err := compile(newContext(), templates.FS)
	if err != nil {
		return nil, err
	}
	return &compiled{template: v}, nil
}

// template returns the compilation to evaluate with, renewing it first when the current
// one has served renewAfter evaluations. Renders that come while another one compiles
// use the current one; a failed renewal (it cannot fail for templates that compiled
// once) keeps it.
func (r *Renderer) template() cue.Value {
	c := r.compiled.Load()
	if c.evaluations.Add(1) <= renewAfter || !r.renewing.TryLock() {
		return c.template
	}
	defer r.renewing.Unlock()
	if r.compiled.Load() != c {
		return r.compiled.Load().template
	}
	fresh, err := compileTemplates()
	if err != nil {
		return c.template
	}
	fresh.evaluations.Add(1)
	r.compiled.Store(fresh)
	return fresh.template
}

// input is the part of a RedisCluster the templates read: the CR as a user writes it,
// without status and without server-set metadata.
type input struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Metadata   inputMetadata                  `json:"metadata"`
	Spec       redisv1alpha1.RedisClusterSpec `json:"spec"`
}

type inputMetadata struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Render returns the objects for rc, in the order of the templates' `objects`:
// ConfigMap, headless Service, client Service, StatefulSet. userRedisConf is the
// redis.conf text of the user ConfigMap named by spec.pod[0].configmap ("" for none).
// Owner references are left to the caller, who owns the returned objects. An error
// names the CUE path that failed. A render of an input seen recently is a copy of the
// earlier result.
func (r *Renderer) Render(rc *redisv1alpha1.RedisCluster, userRedisConf string) ([]*unstructured.Unstructured, error) {
	return r.render(rc, userRedisConf, true)
}

// render is Render with the cache optional, so the benchmark can measure evaluation.
func (r *Renderer) render(rc *redisv1alpha1.RedisCluster, userRedisConf string, useCache bool) ([]*unstructured.Unstructured, error) {
	// Directive names as Redis reads them, so the templates judge what Redis would run.
	userRedisConf = conf.Normalize(userRedisConf)
	in := input{
		// The templates accept only this group/version/kind; a typed object read from
		// the API server may carry an empty TypeMeta.
		APIVersion: redisv1alpha1.GroupVersion.String(),
		Kind:       "RedisCluster",
		Metadata: inputMetadata{
			Name:        rc.Name,
			Namespace:   rc.Namespace,
			Labels:      rc.Labels,
			Annotations: rc.Annotations,
		},
		Spec: rc.Spec,
	}
	data, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("failed to encode RedisCluster %s/%s: %w", rc.Namespace, rc.Name, err)
	}
	key := cacheKey(data, userRedisConf)
	if useCache {
		if out, ok := r.cache.get(key); ok {
			return decodeObjects(out)
		}
	}
	out, err := r.renderJSON(data, userRedisConf)
	if err != nil {
		return nil, fmt.Errorf("failed to render RedisCluster %s/%s: %w", rc.Namespace, rc.Name, err)
	}
	r.cache.put(key, out)
	return decodeObjects(out)
}

// renderJSON fills the template with a CR given as JSON and returns the objects as a JSON list.
func (r *Renderer) renderJSON(data []byte, userRedisConf string) ([]byte, error) {
	expr, err := cuejson.Extract("input.json", data)
	if err != nil {
		return nil, fmt.Errorf("failed to parse input: %w", err)
	}
	template := r.template()
	v := template.FillPath(inputPath, template.Context().BuildExpr(expr))
	if userRedisConf != "" {
		v = v.FillPath(userRedisConfPath, userRedisConf)
	}
	if r.operatorNamespace != "" {
		v = v.FillPath(operatorNSPath, r.operatorNamespace)
	}
	objects := v.LookupPath(objectsPath)
	// input is validated too: some of its constraints (e.g. updateStrategy) feed no
	// object, so checking the objects alone would let them pass.
	for _, p := range []cue.Path{inputPath, objectsPath} {
		if err := v.LookupPath(p).Validate(cue.Concrete(true)); err != nil {
			return nil, cueError(err)
		}
	}
	out, err := objects.MarshalJSON()
	if err != nil {
		return nil, cueError(err)
	}
	return out, nil
}

// decodeObjects decodes a JSON list of objects; each call returns new objects, so
// callers may change them.
func decodeObjects(out []byte) ([]*unstructured.Unstructured, error) {
	var list []map[string]interface{}
	// k8s.io/apimachinery's json decodes numbers as int64 where they are whole, as
	// unstructured objects require.
	if err := utiljson.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("failed to decode objects: %w", err)
	}
	objs := make([]*unstructured.Unstructured, len(list))
	for i, o := range list {
		objs[i] = &unstructured.Unstructured{Object: o}
	}
	return objs, nil
}

// cueError flattens a CUE error into one error whose text starts with the path of each
// failing value, e.g. `input.spec.replicas: conflicting values "6" and int32`. The same
// root cause is often reported once per object that uses it; only the first report of
// each message is kept.
func cueError(err error) error {
	var b strings.Builder
	seen := map[string]bool{}
	for _, e := range cueerrors.Errors(err) {
		msg := e.Error()
		if seen[msg] {
			continue
		}
		seen[msg] = true
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(msg)
	}
	return &Error{msg: b.String(), err: err}
}

// Error is a render error; its message names the CUE paths that failed. Unwrap gives
// the CUE error (cuelang.org/go/cue/errors) for positions and details.
type Error struct {
	msg string
	err error
}

func (e *Error) Error() string { return e.msg }
func (e *Error) Unwrap() error { return e.err }
