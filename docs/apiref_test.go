package docs

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the generated references under docs/reference/")

const (
	apiDoc   = "reference/api.md"
	apiBegin = "<!-- generated from config/crd/bases by TestAPIReference: do not edit -->\n"
	apiEnd   = "<!-- end of generated API reference -->\n"
	apiTypes = "../api/v1alpha1"
	crdGlob  = "../config/crd/bases/*.yaml"
)

// TestAPIReference regenerates docs/reference/api.md from the CRDs (the OpenAPI schemas
// controller-gen writes from the Go types and their markers) and fails when the committed
// page differs: a field added, removed, re-described or re-validated without
// `go test ./docs/ -run TestAPIReference -update` fails `make test`. The Go types in
// api/v1alpha1 say which fields are the project's own (described field by field) and
// which are Kubernetes types (named and linked, not expanded).
func TestAPIReference(t *testing.T) {
	doc, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i, j := strings.Index(text, apiBegin), strings.Index(text, apiEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated section (%q ... %q)", apiDoc, apiBegin, apiEnd)
	}
	want := text[:i+len(apiBegin)] + apiReference(t) + text[j:]
	if want == text {
		return
	}
	if *update {
		if err := os.WriteFile(apiDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is stale (the CRDs or the API's doc comments changed): run go test ./docs/ -run TestAPIReference -update", apiDoc)
}

// goField is one field of a Go struct of the API: its JSON name and its type expression.
type goField struct {
	json string
	typ  ast.Expr
}

// goStructs parses the API package: struct name → its fields by JSON name (inline
// embeddings of the package's own structs flattened in).
func goStructs(t *testing.T) map[string]map[string]ast.Expr {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(apiTypes, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	raw := map[string]*ast.StructType{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(filepath.Base(f), "zz_") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					raw[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	out := map[string]map[string]ast.Expr{}
	var fields func(st *ast.StructType) map[string]ast.Expr
	fields = func(st *ast.StructType) map[string]ast.Expr {
		m := map[string]ast.Expr{}
		for _, f := range st.Fields.List {
			tag := ""
			if f.Tag != nil {
				s, _ := strconv.Unquote(f.Tag.Value)
				tag = reflect.StructTag(s).Get("json")
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			if len(f.Names) == 0 && (name == "" && strings.Contains(opts, "inline")) {
				if id, ok := f.Type.(*ast.Ident); ok && raw[id.Name] != nil {
					for k, v := range fields(raw[id.Name]) {
						m[k] = v
					}
				}
				continue
			}
			if name != "" {
				m[name] = f.Type
			}
		}
		return m
	}
	for name, st := range raw {
		out[name] = fields(st)
	}
	return out
}

// exprString prints a Go type expression as written (`[]corev1.Toleration`).
func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return exprString(e.X)
	case *ast.ArrayType:
		return "[]" + exprString(e.Elt)
	case *ast.MapType:
		return "map[" + exprString(e.Key) + "]" + exprString(e.Value)
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return fmt.Sprintf("%T", e)
}

// elem strips pointers, slices and maps down to the named type a field holds.
func elem(e ast.Expr) ast.Expr {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.ArrayType:
			e = x.Elt
		case *ast.MapType:
			e = x.Value
		default:
			return e
		}
	}
}

// externalDocs links the Kubernetes types the API embeds to their reference.
var externalDocs = map[string]string{
	"corev1":       "https://kubernetes.io/docs/reference/generated/kubernetes-api/v1.36/#%s-v1-core",
	"networkingv1": "https://kubernetes.io/docs/reference/generated/kubernetes-api/v1.36/#%s-v1-networking-k8s-io",
	"metav1":       "https://kubernetes.io/docs/reference/generated/kubernetes-api/v1.36/#%s-v1-meta",
}

// apiRef is the generator's state: the Go structs, and the output.
type apiRef struct {
	t       *testing.T
	structs map[string]map[string]ast.Expr
	b       strings.Builder
}

func apiReference(t *testing.T) string {
	files, err := filepath.Glob(crdGlob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs at %s: %v", crdGlob, err)
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		crds = append(crds, crd)
	}
	// RedisCluster first, then the others by name.
	sort.Slice(crds, func(i, j int) bool {
		a, b := crds[i].Spec.Names.Kind, crds[j].Spec.Names.Kind
		if (a == "RedisCluster") != (b == "RedisCluster") {
			return a == "RedisCluster"
		}
		return a < b
	})
	r := &apiRef{t: t, structs: goStructs(t)}
	r.b.WriteString("Kinds:")
	for _, crd := range crds {
		k := crd.Spec.Names.Kind
		fmt.Fprintf(&r.b, " [%s](#%s)", k, strings.ToLower(k))
	}
	r.b.WriteString(".\n")
	for _, crd := range crds {
		r.kind(crd)
	}
	return r.b.String()
}

func (r *apiRef) kind(crd apiextensionsv1.CustomResourceDefinition) {
	n := crd.Spec.Names
	for _, v := range crd.Spec.Versions {
		fmt.Fprintf(&r.b, "\n## %s\n\n", n.Kind)
		fmt.Fprintf(&r.b, "`apiVersion: %s/%s`, `kind: %s`; %s, plural `%s`", crd.Spec.Group, v.Name, n.Kind, strings.ToLower(string(crd.Spec.Scope)), n.Plural)
		if len(n.ShortNames) > 0 {
			fmt.Fprintf(&r.b, ", short name `%s`", strings.Join(n.ShortNames, "`, `"))
		}
		if v.Subresources != nil && v.Subresources.Status != nil {
			r.b.WriteString("; the status is a subresource")
		}
		if v.Subresources != nil && v.Subresources.Scale != nil {
			fmt.Fprintf(&r.b, "; `kubectl scale` sets `%s`", strings.TrimPrefix(v.Subresources.Scale.SpecReplicasPath, "."))
		}
		r.b.WriteString(".\n\n")
		s := v.Schema.OpenAPIV3Schema
		if s.Description != "" {
			r.b.WriteString(paragraph(s.Description) + "\n\n")
		}
		if len(v.AdditionalPrinterColumns) > 0 {
			r.b.WriteString("`kubectl get` shows: ")
			var cols []string
			for _, c := range v.AdditionalPrinterColumns {
				cols = append(cols, fmt.Sprintf("%s (`%s`)", c.Name, c.JSONPath))
			}
			r.b.WriteString(strings.Join(cols, ", ") + ".\n")
		}
		goRoot := r.structs[n.Kind]
		if goRoot == nil {
			r.t.Fatalf("no Go struct %s in %s for the CRD %s", n.Kind, apiTypes, crd.Name)
		}
		for _, top := range []string{"spec", "status"} {
			p, ok := s.Properties[top]
			if !ok {
				continue
			}
			fmt.Fprintf(&r.b, "\n### %s.%s\n\n", n.Kind, top)
			r.b.WriteString("| field | type | default | validation | description |\n|---|---|---|---|---|\n")
			r.row(top, p, goRoot[top], contains(s.Required, top))
			r.walk(top, p, goRoot[top])
		}
	}
}

// walk writes a row for each property of an object schema, then descends into those the
// API defines itself.
func (r *apiRef) walk(path string, s apiextensionsv1.JSONSchemaProps, goType ast.Expr) {
	fields := r.ownStruct(goType)
	if fields == nil {
		return
	}
	// An array or map of objects: describe its element.
	suffix := ""
	switch {
	case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
		s, suffix = *s.Items.Schema, "[]"
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		s, suffix = *s.AdditionalProperties.Schema, ".*"
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.Properties[name]
		ft, ok := fields[name]
		if !ok {
			r.t.Fatalf("%s%s.%s is in the CRD but no field of the Go type %s has that JSON name", path, suffix, name, exprString(goType))
		}
		child := path + suffix + "." + name
		r.row(child, p, ft, contains(s.Required, name))
		r.walk(child, p, ft)
	}
}

// ownStruct returns the fields of the API struct a type expression holds, or nil when it
// holds a Kubernetes type or a scalar.
func (r *apiRef) ownStruct(e ast.Expr) map[string]ast.Expr {
	if e == nil {
		return nil
	}
	if id, ok := elem(e).(*ast.Ident); ok {
		return r.structs[id.Name]
	}
	return nil
}

func (r *apiRef) row(path string, s apiextensionsv1.JSONSchemaProps, goType ast.Expr, required bool) {
	typ := schemaType(s)
	if goType != nil {
		if sel, ok := elem(goType).(*ast.SelectorExpr); ok {
			pkg := exprString(sel.X)
			name := exprString(goType)
			if f, ok := externalDocs[pkg]; ok {
				typ = fmt.Sprintf("[%s](%s)", name, fmt.Sprintf(f, strings.ToLower(sel.Sel.Name)))
			} else {
				typ = "`" + name + "`"
			}
			if s.XIntOrString {
				typ = "integer or string"
			}
		}
	}
	def := ""
	if s.Default != nil {
		def = "`" + cell(string(s.Default.Raw)) + "`"
	}
	var v []string
	if required {
		v = append(v, "required")
	}
	v = append(v, validation(s)...)
	if s.Type == "array" && s.Items != nil && s.Items.Schema != nil {
		for _, x := range validation(*s.Items.Schema) {
			v = append(v, "each: "+x)
		}
	}
	fmt.Fprintf(&r.b, "| `%s` | %s | %s | %s | %s |\n", path, typ, def, strings.Join(v, "; "), cell(paragraph(s.Description)))
}

// schemaType names an OpenAPI type the way a reader of YAML thinks of it.
func schemaType(s apiextensionsv1.JSONSchemaProps) string {
	switch {
	case s.XIntOrString:
		return "integer or string"
	case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
		return "[]" + schemaType(*s.Items.Schema)
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map[string]" + schemaType(*s.AdditionalProperties.Schema)
	case s.Format != "" && s.Format != "int32" && s.Format != "int64":
		return s.Type + " (" + s.Format + ")"
	case s.Type == "":
		return "any"
	}
	return s.Type
}

// validation lists what the API server enforces on one schema.
func validation(s apiextensionsv1.JSONSchemaProps) []string {
	var v []string
	if len(s.Enum) > 0 {
		var vals []string
		for _, e := range s.Enum {
			vals = append(vals, "`"+cell(string(e.Raw))+"`")
		}
		v = append(v, "one of "+strings.Join(vals, ", "))
	}
	num := func(label string, f *float64, exclusive bool) {
		if f != nil {
			if exclusive {
				label += " (exclusive)"
			}
			v = append(v, fmt.Sprintf("%s %s", label, strconv.FormatFloat(*f, 'f', -1, 64)))
		}
	}
	num("minimum", s.Minimum, s.ExclusiveMinimum)
	num("maximum", s.Maximum, s.ExclusiveMaximum)
	ints := func(label string, n *int64) {
		if n != nil {
			v = append(v, fmt.Sprintf("%s %d", label, *n))
		}
	}
	ints("min length", s.MinLength)
	ints("max length", s.MaxLength)
	ints("min items", s.MinItems)
	ints("max items", s.MaxItems)
	ints("min properties", s.MinProperties)
	ints("max properties", s.MaxProperties)
	if s.Pattern != "" {
		v = append(v, "pattern `"+cell(s.Pattern)+"`")
	}
	if s.XListType != nil && *s.XListType != "atomic" {
		l := "list type " + *s.XListType
		if len(s.XListMapKeys) > 0 {
			l += " (keys " + strings.Join(s.XListMapKeys, ", ") + ")"
		}
		v = append(v, l)
	}
	for _, c := range s.XValidations {
		if c.Message != "" {
			v = append(v, "rule: "+cell(paragraph(c.Message)))
		} else {
			v = append(v, "rule `"+cell(c.Rule)+"`")
		}
	}
	return v
}

// paragraph joins a description's lines into one.
func paragraph(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
