package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// shBlocks returns the lines of every ```sh block of a Markdown text, in order, trimmed and
// without trailing comments, the blocks hack/tutorial.sh runs.
func shBlocks(text string) []string {
	var out []string
	in := false
	comment := regexp.MustCompile(`\s+#\s.*$`)
	for _, l := range strings.Split(text, "\n") {
		switch {
		case !in && l == "```sh":
			in = true
		case in && strings.HasPrefix(l, "```"):
			in = false
		case in:
			l = strings.TrimSpace(comment.ReplaceAllString(l, ""))
			if l != "" && !strings.HasPrefix(l, "#") {
				out = append(out, l)
			}
		}
	}
	return out
}

// TestReadmeQuickStartIsTheLocalTutorial: the README's quick start is not run on its own; its
// commands must be those of docs/tutorials/local.md, in the same order (the tutorial may
// add some between them), so running the tutorial (hack/test.sh) runs the quick start.
func TestReadmeQuickStartIsTheLocalTutorial(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	i := strings.Index(text, "\n## Quick start")
	if i < 0 {
		t.Fatal("README.md has no ## Quick start")
	}
	section := text[i+1:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	// The first sh block of the section is the quick start; later ones (make test) are not.
	start := strings.Index(section, "```sh\n")
	end := strings.Index(section[start+1:], "\n```\n")
	if start < 0 || end < 0 {
		t.Fatal("README.md's quick start has no sh block")
	}
	quick := shBlocks(section[start : start+1+end+5])
	if len(quick) < 5 {
		t.Fatalf("README.md's quick start has %d commands, want at least 5: %q", len(quick), quick)
	}
	tut, err := os.ReadFile("tutorials/local.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := shBlocks(string(tut))
	k := 0
	for _, l := range lines {
		if k < len(quick) && l == quick[k] {
			k++
		}
	}
	if k < len(quick) {
		t.Errorf("docs/tutorials/local.md does not run the README's quick start: its sh blocks have %d of its %d lines in order; the first missing: %q", k, len(quick), quick[k])
	}
}

// TestEveryTutorialIsRun: each page of docs/tutorials/ is run by hack/tutorial.sh from
// hack/test.sh or from an e2e test, so no tutorial goes untested.
func TestEveryTutorialIsRun(t *testing.T) {
	pages, err := filepath.Glob("tutorials/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no tutorials: %v", err)
	}
	var runners strings.Builder
	for _, glob := range []string{"../hack/test.sh", "../test/e2e/*_test.go"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			runners.Write(b)
		}
	}
	run := regexp.MustCompile(`tutorial\.sh"?\)?,?\s+"?docs/(tutorials/[a-z0-9-]+\.md)`)
	ran := map[string]bool{}
	for _, m := range run.FindAllStringSubmatch(runners.String(), -1) {
		ran[m[1]] = true
	}
	for _, p := range pages {
		if len(shBlocks(mustRead(t, p))) == 0 {
			t.Errorf("docs/%s has no sh block to run", p)
		}
		if !ran[filepath.ToSlash(p)] {
			t.Errorf("docs/%s is run by nothing: call hack/tutorial.sh docs/%s from hack/test.sh or an e2e test", p, p)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
