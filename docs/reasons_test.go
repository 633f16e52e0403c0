// Package docs holds tests that fail the build when a page under docs/ no longer tells the
// truth about the code. It has no code of its own.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// referencePath is the catalogue of every status reason, condition and event reason.
const referencePath = "reference/status-and-events.md"

// namedConst is the shape of a constant the catalogue must list, by name: event reasons
// (Reason*), condition types (Condition*), the Configured condition's reasons
// (Configured*), the per-instance reasons (Instance*) and the phases (Phase*, also the
// Ready and Progressing conditions' reasons).
var namedConst = regexp.MustCompile(`^(Reason|Condition|Configured|Instance|Phase)[A-Z]`)

// sourceDirs are the packages whose strings reach status or events. fsm's composed
// Awaiting<Fact> and fired-guard reasons are checked by fsm's own test (fsm/reasons_test.go),
// which walks the transition table; here its literal reasons (Paused, UpToDate…) are found.
var sourceDirs = []string{"../controller", "../fsm", "../api/v1alpha1"}

// found is one string the code can emit, and where it was seen.
type found struct {
	value, where string
}

// TestReferenceListsEveryReason fails when the code declares a status reason, condition or
// event reason that docs/reference/status-and-events.md does not list as a code span
// (`Name`). Nothing is listed by hand: the sources are parsed, so a reason another branch
// adds is caught the day it lands. What is found:
//
//   - every string constant whose name starts Reason, Condition, Configured, Instance or Phase;
//   - every string literal given to a field or variable named Reason (metav1.Condition
//     literals, c.Reason = "…", d.Reason = "…");
//   - the reason argument of every Recorder.Event/Eventf/AnnotatedEventf call, when it is a
//     literal or a constant of the package (whatever its name).
func TestReferenceListsEveryReason(t *testing.T) {
	raw, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	all := discover(t)
	if len(all) < 40 {
		// The parse would find nothing if the sources moved: fail rather than pass empty.
		t.Fatalf("found only %d reasons in %v; has the code moved?", len(all), sourceDirs)
	}
	var missing []string
	for _, f := range all {
		if !strings.Contains(doc, "`"+f.value+"`") {
			missing = append(missing, f.value+" ("+f.where+")")
		}
	}
	if len(missing) > 0 {
		t.Errorf("docs/%s does not list these reasons the code can emit; add each as `Name` with what it means, when it appears and what to do:\n  %s",
			referencePath, strings.Join(missing, "\n  "))
	}
}

// TestReferenceListsEveryAlert: each alert of config/prometheus/prometheusrule.yaml has an
// entry saying what to do when it fires.
func TestReferenceListsEveryAlert(t *testing.T) {
	raw, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile("../config/prometheus/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert:\s*(\S+)`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) == 0 {
		t.Fatal("no alert found in config/prometheus/prometheusrule.yaml")
	}
	for _, a := range alerts {
		if !strings.Contains(string(raw), "`"+a[1]+"`") {
			t.Errorf("docs/%s does not list alert %s", referencePath, a[1])
		}
	}
}

// discover parses the non-test Go files of sourceDirs and returns what they can emit,
// sorted and without duplicates.
func discover(t *testing.T) []found {
	t.Helper()
	seen := map[string]found{}
	add := func(v, where string) {
		if v == "" {
			return
		}
		if _, ok := seen[v]; !ok {
			seen[v] = found{v, where}
		}
	}
	for _, dir := range sourceDirs {
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var parsed []*ast.File
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") || strings.HasPrefix(filepath.Base(name), "zz_generated") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			parsed = append(parsed, f)
		}
		if len(parsed) == 0 {
			t.Fatalf("no Go source in %s", dir)
		}
		// Every string constant of the package, by name, to resolve reasons passed by name.
		consts := map[string]string{}
		for _, f := range parsed {
			for name, v := range stringConsts(f) {
				consts[name] = v
			}
		}
		pos := func(n ast.Node) string {
			p := fset.Position(n.Pos())
			return strings.TrimPrefix(filepath.ToSlash(p.Filename), "../") + ":" + strconv.Itoa(p.Line)
		}
		for _, f := range parsed {
			for name, v := range stringConsts(f) {
				if namedConst.MatchString(name) {
					add(v, name)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.KeyValueExpr:
					if isIdent(n.Key, "Reason") {
						add(literal(n.Value), pos(n))
					}
				case *ast.AssignStmt:
					for i, lhs := range n.Lhs {
						if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "Reason" && len(n.Rhs) == len(n.Lhs) {
							add(literal(n.Rhs[i]), pos(n))
						}
					}
				case *ast.CallExpr:
					if arg := recorderReason(n); arg != nil {
						if v := literal(arg); v != "" {
							add(v, pos(n))
						} else if id, ok := arg.(*ast.Ident); ok {
							add(consts[id.Name], pos(n))
						}
					}
				}
				return true
			})
		}
	}
	var out []found
	for _, f := range seen {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].value < out[j].value })
	return out
}

// stringConsts returns the constants of f whose value is a string literal.
func stringConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if v := literal(vs.Values[i]); v != "" {
						out[name.Name] = v
					}
				}
			}
		}
	}
	return out
}

// recorderReason returns the reason argument of a call to an event recorder's Event,
// Eventf or AnnotatedEventf (x.Recorder.Event(obj, type, reason, …)), nil for other calls.
func recorderReason(c *ast.CallExpr) ast.Expr {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	recv, ok := sel.X.(*ast.SelectorExpr)
	if !ok || recv.Sel.Name != "Recorder" {
		return nil
	}
	switch sel.Sel.Name {
	case "Event", "Eventf":
		if len(c.Args) >= 3 {
			return c.Args[2]
		}
	case "AnnotatedEventf":
		if len(c.Args) >= 4 {
			return c.Args[3]
		}
	}
	return nil
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// literal is the value of a string literal, "" for anything else.
func literal(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}
	v, err := strconv.Unquote(lit.Value)
	if err != nil {
		return ""
	}
	return v
}
