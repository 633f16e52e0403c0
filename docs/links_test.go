package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLinksResolve: every relative link of a page in docs/ names a file that exists and,
// when it has one, an anchor that is a heading of that page, so a renamed page or section
// fails here instead of sending a reader nowhere.
func TestLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"reference", "tutorials"} {
		sub, _ := filepath.Glob(dir + "/*.md")
		pages = append(pages, sub...)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fence := regexp.MustCompile("(?ms)^```.*?^```")
	// A code span is no link, even when it holds "](" (a pattern in the API reference).
	span := regexp.MustCompile("`[^`\n]*`")
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := span.ReplaceAllString(fence.ReplaceAllString(string(raw), ""), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				if info, serr := os.Stat(path); serr == nil && info.IsDir() && anchor == "" {
					continue
				}
				t.Errorf("docs/%s links to %s, which does not exist", page, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(string(data))[anchor] {
				t.Errorf("docs/%s links to %s: no heading of %s has the anchor #%s", page, target, path, anchor)
			}
		}
	}
}
