package metricsauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// fakeReviewer stands for the API server: tokens maps a token to its user, allowed
// names the users that may get /metrics. It counts the reviews asked.
type fakeReviewer struct {
	tokens        map[string]string
	allowed       map[string]bool
	fail          error
	authns, authz int
}

func (f *fakeReviewer) Authenticate(_ context.Context, token string) (User, bool, error) {
	f.authns++
	if f.fail != nil {
		return User{}, false, f.fail
	}
	name, ok := f.tokens[token]
	return User{Name: name}, ok, nil
}

func (f *fakeReviewer) Authorize(_ context.Context, u User, verb, path string) (bool, error) {
	f.authz++
	if f.fail != nil {
		return false, f.fail
	}
	return f.allowed[u.Name] && verb == "get" && path == "/metrics", nil
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Unix(1_000_000, 0)} }
func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// serve builds the filtered handler; the inner handler answers 200 and records whether it
// saw the scraper's token.
func serve(t *testing.T, r Reviewer, c *clock) (func(method, path string, header map[string]string) int, *bool) {
	t.Helper()
	sawToken := false
	inner := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		sawToken = req.Header.Get("Authorization") != ""
		w.WriteHeader(http.StatusOK)
	})
	h, err := FilterWith(r, c.now)(logr.Discard(), inner)
	if err != nil {
		t.Fatal(err)
	}
	return func(method, path string, header map[string]string) int {
		req := httptest.NewRequest(method, path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}, &sawToken
}

func TestFilterAnswers(t *testing.T) {
	f := &fakeReviewer{tokens: map[string]string{"scraper": "system:serviceaccount:monitoring:prometheus", "operator": "system:serviceaccount:ops:manager"},
		allowed: map[string]bool{"system:serviceaccount:monitoring:prometheus": true}}
	do, sawToken := serve(t, f, newClock())
	for _, c := range []struct {
		name   string
		method string
		path   string
		header map[string]string
		want   int
	}{
		{"no token", "GET", "/metrics", nil, http.StatusUnauthorized},
		{"not a bearer token", "GET", "/metrics", map[string]string{"Authorization": "Basic c2NyYXBlcg=="}, http.StatusUnauthorized},
		{"an empty bearer token", "GET", "/metrics", map[string]string{"Authorization": "Bearer "}, http.StatusUnauthorized},
		{"a token the API server rejects", "GET", "/metrics", bearer("forged"), http.StatusUnauthorized},
		{"a valid token of a user not allowed", "GET", "/metrics", bearer("operator"), http.StatusForbidden},
		{"an allowed user on another path", "GET", "/debug/pprof/", bearer("scraper"), http.StatusForbidden},
		{"an allowed user with another verb", "POST", "/metrics", bearer("scraper"), http.StatusForbidden},
		{"an allowed user", "GET", "/metrics", bearer("scraper"), http.StatusOK},
		{"the scheme in lower case", "GET", "/metrics", map[string]string{"Authorization": "bearer scraper"}, http.StatusOK},
	} {
		if got := do(c.method, c.path, c.header); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
	if *sawToken {
		t.Error("the metrics handler saw the scraper's Authorization header")
	}
}

func TestFilterCachesAnswersForTheirTime(t *testing.T) {
	f := &fakeReviewer{tokens: map[string]string{"scraper": "prometheus", "operator": "manager"}, allowed: map[string]bool{"prometheus": true}}
	c := newClock()
	do, _ := serve(t, f, c)

	// An allowed scraper: one review of each kind, then none for a minute.
	for range 5 {
		if got := do("GET", "/metrics", bearer("scraper")); got != http.StatusOK {
			t.Fatalf("got %d, want 200", got)
		}
	}
	if f.authns != 1 || f.authz != 1 {
		t.Fatalf("5 scrapes asked %d TokenReviews and %d SubjectAccessReviews, want 1 and 1", f.authns, f.authz)
	}
	// After a minute the token is reviewed again; the allowed decision holds 5 minutes.
	c.advance(authenticatedTTL)
	do("GET", "/metrics", bearer("scraper"))
	if f.authns != 2 || f.authz != 1 {
		t.Fatalf("after a minute: %d TokenReviews and %d SubjectAccessReviews, want 2 and 1", f.authns, f.authz)
	}
	c.advance(allowedTTL)
	do("GET", "/metrics", bearer("scraper"))
	if f.authz != 2 {
		t.Fatalf("after 5 minutes: %d SubjectAccessReviews, want 2", f.authz)
	}

	// A refusal is kept 30 s: a permission granted since is seen within that.
	f.authns, f.authz = 0, 0
	do("GET", "/metrics", bearer("operator"))
	do("GET", "/metrics", bearer("operator"))
	if f.authz != 1 {
		t.Fatalf("two refused scrapes asked %d SubjectAccessReviews, want 1", f.authz)
	}
	f.allowed["manager"] = true
	c.advance(deniedTTL)
	if got := do("GET", "/metrics", bearer("operator")); got != http.StatusOK {
		t.Fatalf("30 s after the permission was granted: got %d, want 200", got)
	}

	// A rejected token is kept 10 s: a flood of scrapes with it costs one review.
	f.authns = 0
	for range 10 {
		do("GET", "/metrics", bearer("forged"))
	}
	if f.authns != 1 {
		t.Fatalf("10 scrapes with a rejected token asked %d TokenReviews, want 1", f.authns)
	}
	c.advance(rejectedTTL)
	do("GET", "/metrics", bearer("forged"))
	if f.authns != 2 {
		t.Fatalf("10 s later: %d TokenReviews, want 2", f.authns)
	}
}

func TestFilterFailsClosedWhenTheAPIServerDoesNotAnswer(t *testing.T) {
	f := &fakeReviewer{tokens: map[string]string{"scraper": "prometheus"}, allowed: map[string]bool{"prometheus": true}, fail: errors.New("connection refused")}
	do, _ := serve(t, f, newClock())
	if got := do("GET", "/metrics", bearer("scraper")); got != http.StatusInternalServerError {
		t.Fatalf("with the API server down: got %d, want 500", got)
	}
	// An error is not an answer: it is not cached.
	f.fail = nil
	if got := do("GET", "/metrics", bearer("scraper")); got != http.StatusOK {
		t.Fatalf("with the API server back: got %d, want 200", got)
	}
}

func TestFilterCacheIsBounded(t *testing.T) {
	f := &fakeReviewer{tokens: map[string]string{}, allowed: map[string]bool{}}
	for i := range 3 * maxCached {
		tok := fmt.Sprintf("t%d", i)
		f.tokens[tok] = tok
		f.allowed[tok] = true
	}
	c := newClock()
	g := &guard{reviewer: f, now: c.now, users: map[string]cachedUser{}, decisions: map[string]cachedDecision{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	for i := range 3 * maxCached {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Authorization", fmt.Sprintf("Bearer t%d", i))
		g.serve(logr.Discard(), h, httptest.NewRecorder(), req)
		if len(g.users) > maxCached || len(g.decisions) > maxCached {
			t.Fatalf("after %d tokens the caches hold %d users and %d decisions, more than %d", i+1, len(g.users), len(g.decisions), maxCached)
		}
	}
}
