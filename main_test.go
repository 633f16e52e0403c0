package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

var update = flag.Bool("update", false, "rewrite the generated part of docs/reference/flags.md")

const (
	flagsDoc   = "docs/reference/flags.md"
	flagsBegin = "<!-- generated from main.go's flags by TestFlagsReference: do not edit -->\n"
	flagsEnd   = "<!-- end of generated flags -->\n"
)

// flagsTable is the reference table of every flag bindFlags declares, with its default and
// its help text, in the order `manager --help` lists them.
func flagsTable(t *testing.T) string {
	t.Helper()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	bindFlags(fs, &options{}, &zap.Options{})
	var b strings.Builder
	b.WriteString("| flag | default | what it does |\n|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if f.Name == "operator-namespace" {
			def = "" // read from the environment at start; the text says how
		}
		if def != "" {
			def = "`" + def + "`"
		}
		usage := strings.ReplaceAll(strings.ReplaceAll(f.Usage, "|", `\|`), "\n", " ")
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", f.Name, def, usage)
	})
	return b.String()
}

// The flags reference is generated from the flags themselves, so it cannot go stale: a
// flag added, removed or reworded without `go test . -run TestFlagsReference -update`
// fails here.
func TestFlagsReference(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	doc, err := os.ReadFile(flagsDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i, j := strings.Index(text, flagsBegin), strings.Index(text, flagsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated section (%q ... %q)", flagsDoc, flagsBegin, flagsEnd)
	}
	want := text[:i+len(flagsBegin)] + flagsTable(t) + text[j:]
	if want == text {
		return
	}
	if *update {
		if err := os.WriteFile(flagsDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is stale: run go test . -run TestFlagsReference -update", flagsDoc)
}
