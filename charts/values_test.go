package charts_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the generated part of docs/reference/helm-values.md")

const (
	valuesFile  = chartDir + "/values.yaml"
	valuesDoc   = "../docs/reference/helm-values.md"
	valuesBegin = "<!-- generated from charts/redis-cluster-operator/values.yaml by TestValuesReference: do not edit -->\n"
	valuesEnd   = "<!-- end of generated values -->\n"
)

// valueRow is one line of the reference: a value's dotted path, its default and the
// comment above it in values.yaml.
type valueRow struct{ path, def, help string }

// comment turns a YAML head comment into one line of text.
func comment(c string) string {
	var words []string
	for _, l := range strings.Split(c, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if l != "" {
			words = append(words, l)
		}
	}
	return strings.Join(words, " ")
}

// documented says whether any key of a mapping has a comment of its own: then each is a
// row, else the mapping is one.
func documented(m *yaml.Node) bool {
	for i := 0; i < len(m.Content); i += 2 {
		if m.Content[i].HeadComment != "" {
			return true
		}
	}
	return false
}

// valueRows walks values.yaml. A mapping whose keys have comments is described key by key;
// a mapping of one key (a toggle such as leaderElection.enabled) is that key's row with the
// mapping's comment; anything else is one row, its default as JSON. A key without a comment
// that follows the previous one on the next line, both one-line values, shares its comment
// (nodeSelector, tolerations, affinity...).
func valueRows(t *testing.T, prefix, inherited string, m *yaml.Node) []valueRow {
	t.Helper()
	var rows []valueRow
	prevHelp, prevLine := "", -1
	for i := 0; i < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		path := prefix + k.Value
		help := comment(k.HeadComment)
		oneLine := v.Kind == yaml.ScalarNode || v.Style&yaml.FlowStyle != 0
		if help == "" && oneLine && prevLine >= 0 && k.Line == prevLine+1 {
			help = prevHelp
		}
		if help == "" && i == 0 && len(m.Content) == 2 {
			help = inherited
		}
		switch {
		case v.Kind == yaml.MappingNode && v.Style&yaml.FlowStyle == 0 && documented(v):
			if help != "" {
				rows = append(rows, valueRow{path: path, help: help})
			}
			rows = append(rows, valueRows(t, path+".", "", v)...)
		case v.Kind == yaml.MappingNode && v.Style&yaml.FlowStyle == 0 && len(v.Content) == 2:
			rows = append(rows, valueRows(t, path+".", help, v)...)
		default:
			var val any
			if err := v.Decode(&val); err != nil {
				t.Fatalf("failed to decode %s: %v", path, err)
			}
			def, err := json.Marshal(val)
			if err != nil {
				t.Fatal(err)
			}
			if help == "" {
				t.Errorf("%s: %s has no comment; say what it does in a comment above it", valuesFile, path)
			}
			rows = append(rows, valueRow{path: path, def: string(def), help: help})
		}
		prevHelp, prevLine = help, -1
		if oneLine {
			prevLine = k.Line
		}
	}
	return rows
}

func valuesTable(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("failed to parse %s: %v", valuesFile, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		t.Fatalf("%s is not one mapping", valuesFile)
	}
	var b strings.Builder
	b.WriteString("| value | default | what it does |\n|---|---|---|\n")
	esc := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;")
	for _, r := range valueRows(t, "", "", doc.Content[0]) {
		def := ""
		if r.def != "" {
			def = "`" + strings.ReplaceAll(r.def, "|", `\|`) + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.path, def, esc.Replace(r.help))
	}
	return b.String()
}

// TestValuesReference: docs/reference/helm-values.md lists every value of the chart with its
// default and the comment above it in values.yaml, so a value added, removed, changed or
// reworded without `go test ./charts/ -run TestValuesReference -update` fails here, and so
// does a value without a comment.
func TestValuesReference(t *testing.T) {
	doc, err := os.ReadFile(valuesDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i, j := strings.Index(text, valuesBegin), strings.Index(text, valuesEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated section (%q ... %q)", valuesDoc, valuesBegin, valuesEnd)
	}
	want := text[:i+len(valuesBegin)] + valuesTable(t) + text[j:]
	if want == text {
		return
	}
	if *update {
		if err := os.WriteFile(valuesDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is stale: run go test ./charts/ -run TestValuesReference -update", valuesDoc)
}
