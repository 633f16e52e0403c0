package fsm

import (
	"fmt"
	"strings"
)

// Mermaid draws the table as a Mermaid stateDiagram-v2, one edge per
// (from, event) with the guard's name in brackets, UML style.
func Mermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	fmt.Fprintf(&b, "    [*] --> %s\n", None)
	for _, t := range table {
		for _, f := range t.From {
			fmt.Fprintf(&b, "    %s --> %s: %s [%s]\n", f, t.To, t.Event, t.Guard.Name)
		}
	}
	fmt.Fprintf(&b, "    %s --> [*]\n", Deleting)
	return b.String()
}

// Markdown renders the generated part of docs/fsm.md: the diagram, the table
// as the code holds it, and every guard spelled out down to its facts.
func Markdown() string {
	var b strings.Builder
	b.WriteString("```mermaid\n")
	b.WriteString(Mermaid())
	b.WriteString("```\n\n")
	b.WriteString("Every event except `delete` also needs `not Paused`; Evaluate offers events in the order delete, fail, then the forward ones.\n\n")

	b.WriteString("| from | event | guard | to |\n|---|---|---|---|\n")
	for _, t := range table {
		from := make([]string, len(t.From))
		for i, f := range t.From {
			from[i] = string(f)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", strings.Join(from, ", "), t.Event, t.Guard.Name, t.To)
	}

	b.WriteString("\n| guard | holds when | built from |\n|---|---|---|\n")
	seen := map[string]bool{}
	var walk func(g Guard)
	walk = func(g Guard) {
		if seen[g.Name] {
			return
		}
		seen[g.Name] = true
		fmt.Fprintf(&b, "| %s | %s | %s |\n", g.Name, g.Doc, g.Formula())
		for _, p := range g.Parts() {
			walk(p)
		}
	}
	walk(paused)
	for _, t := range table {
		walk(t.Guard)
	}
	return b.String()
}
