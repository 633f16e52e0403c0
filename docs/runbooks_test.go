package docs

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

const runbooksPath = "runbooks.md"

// anchors are the GitHub anchors of a Markdown file's headings: lower case, spaces to
// hyphens, punctuation but hyphens and underscores dropped.
func anchors(text string) map[string]bool {
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`).FindAllStringSubmatch(text, -1) {
		h := strings.ReplaceAll(m[1], "`", "")
		out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
	}
	return out
}

// TestRunbooksCoverEveryAlert: each alert of config/prometheus/prometheusrule.yaml has a
// runbook_url pointing at docs/runbooks.md, at the anchor of a section of it, so an alert
// that fires links to what to do.
func TestRunbooksCoverEveryAlert(t *testing.T) {
	doc, err := os.ReadFile(runbooksPath)
	if err != nil {
		t.Fatal(err)
	}
	have := anchors(string(doc))
	rules, err := os.ReadFile("../config/prometheus/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Each rule from "- alert:" to the next rule or group.
	ruleRE := regexp.MustCompile(`(?ms)^\s*- alert:\s*(\S+)\n(.*?)(?:^\s*- (?:alert|name):|\z)`)
	urlRE := regexp.MustCompile(`(?m)^\s*runbook_url:\s*(\S+)\s*$`)
	found := 0
	for _, m := range ruleRE.FindAllStringSubmatch(string(rules), -1) {
		found++
		alert, body := m[1], m[2]
		u := urlRE.FindStringSubmatch(body)
		if u == nil {
			t.Errorf("alert %s has no runbook_url annotation", alert)
			continue
		}
		page, anchor, ok := strings.Cut(u[1], "#")
		if !ok || !strings.HasSuffix(page, "/docs/"+runbooksPath) {
			t.Errorf("alert %s: runbook_url %s is not docs/%s#ANCHOR", alert, u[1], runbooksPath)
			continue
		}
		if !have[anchor] {
			t.Errorf("alert %s: runbook_url anchor #%s is no heading of docs/%s", alert, anchor, runbooksPath)
		}
		if anchor != strings.ToLower(alert) {
			t.Errorf("alert %s: runbook_url anchor #%s, want #%s (its own section)", alert, anchor, strings.ToLower(alert))
		}
	}
	if found == 0 {
		t.Fatal("no alert found in config/prometheus/prometheusrule.yaml")
	}
}
