// Package metricsauth guards the operator's metrics endpoint the way the API server guards
// its own: a request must carry a bearer token the API server accepts (a TokenReview), and
// the token's user must be allowed the request's verb on its path (a SubjectAccessReview
// of a non-resource URL, e.g. get /metrics, which ClusterRole metrics-reader grants).
//
// It does what controller-runtime's metrics/filters package does with the API server's
// delegating authenticator and authorizer, with two reviews and a small cache, without
// linking k8s.io/apiserver: that package and what it brings (CEL, the admission and
// audit machinery, every informer) are a sixth of the operator's binary, and a Go
// binary's code is resident memory.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long a review's answer is reused, as controller-runtime's filter does: an accepted
// token for a minute, an allowed request for five, a refused one for 30 s. A token the
// API server rejects is remembered for 10 s, so a scraper with a bad token costs one
// review per 10 s and not one per scrape.
const (
	authenticatedTTL = time.Minute
	rejectedTTL      = 10 * time.Second
	allowedTTL       = 5 * time.Minute
	deniedTTL        = 30 * time.Second
	// reviewTimeout bounds each review; the scrape fails (500) rather than hangs.
	reviewTimeout = 10 * time.Second
	// maxCached bounds each cache; when full, expired answers are dropped, then all.
	maxCached = 1024
)

// User is who a token stands for, as a TokenReview answers.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Reviewer asks the API server the two questions.
type Reviewer interface {
	// Authenticate reports who the token stands for; ok is false when the API server
	// does not accept it.
	Authenticate(ctx context.Context, token string) (u User, ok bool, err error)
	// Authorize reports whether the user may use verb on the non-resource path.
	Authorize(ctx context.Context, u User, verb, path string) (allowed bool, err error)
}

// Filter is the metrics server's filter that asks the API server behind cfg.
func Filter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	r, err := NewAPIReviewer(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return FilterWith(r, time.Now), nil
}

// FilterWith is the filter with a given Reviewer and clock.
func FilterWith(r Reviewer, now func() time.Time) metricsserver.Filter {
	g := &guard{reviewer: r, now: now, users: map[string]cachedUser{}, decisions: map[string]cachedDecision{}}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			g.serve(log, next, w, req)
		}), nil
	}
}

type guard struct {
	reviewer Reviewer
	now      func() time.Time

	mu        sync.Mutex
	users     map[string]cachedUser     // by the token's SHA-256
	decisions map[string]cachedDecision // by the token's SHA-256, verb and path
}

type cachedUser struct {
	user    User
	ok      bool
	expires time.Time
}

type cachedDecision struct {
	allowed bool
	expires time.Time
}

func (g *guard) serve(log logr.Logger, next http.Handler, w http.ResponseWriter, req *http.Request) {
	token, found := bearerToken(req)
	if !found {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	u, ok, err := g.authenticate(req.Context(), key, token)
	if err != nil {
		log.Error(err, "Authentication failed")
		http.Error(w, "Authentication failed", http.StatusInternalServerError)
		return
	}
	if !ok {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	verb, path := strings.ToLower(req.Method), req.URL.Path
	allowed, err := g.authorize(req.Context(), key+"\x00"+verb+"\x00"+path, u, verb, path)
	if err != nil {
		msg := fmt.Sprintf("Authorization for user %s failed", u.Name)
		log.Error(err, msg)
		http.Error(w, msg, http.StatusInternalServerError)
		return
	}
	if !allowed {
		http.Error(w, fmt.Sprintf("Authorization denied for user %s", u.Name), http.StatusForbidden)
		return
	}
	// The token is the scraper's credential, not the handler's business.
	req.Header.Del("Authorization")
	next.ServeHTTP(w, req)
}

// bearerToken is the token of an "Authorization: Bearer <token>" header.
func bearerToken(req *http.Request) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !found || !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", false
	}
	return token, true
}

func (g *guard) authenticate(ctx context.Context, key, token string) (User, bool, error) {
	now := g.now()
	g.mu.Lock()
	c, hit := g.users[key]
	g.mu.Unlock()
	if hit && now.Before(c.expires) {
		return c.user, c.ok, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	u, ok, err := g.reviewer.Authenticate(ctx, token)
	if err != nil {
		return User{}, false, err
	}
	ttl := authenticatedTTL
	if !ok {
		ttl = rejectedTTL
	}
	g.mu.Lock()
	put(g.users, key, cachedUser{user: u, ok: ok, expires: now.Add(ttl)}, now, func(c cachedUser) time.Time { return c.expires })
	g.mu.Unlock()
	return u, ok, nil
}

func (g *guard) authorize(ctx context.Context, key string, u User, verb, path string) (bool, error) {
	now := g.now()
	g.mu.Lock()
	c, hit := g.decisions[key]
	g.mu.Unlock()
	if hit && now.Before(c.expires) {
		return c.allowed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	allowed, err := g.reviewer.Authorize(ctx, u, verb, path)
	if err != nil {
		return false, err
	}
	ttl := allowedTTL
	if !allowed {
		ttl = deniedTTL
	}
	g.mu.Lock()
	put(g.decisions, key, cachedDecision{allowed: allowed, expires: now.Add(ttl)}, now, func(c cachedDecision) time.Time { return c.expires })
	g.mu.Unlock()
	return allowed, nil
}

// put stores v under key, first making room when the cache is full: expired entries go,
// and if none had expired, all go (a flood of distinct tokens costs reviews, not memory).
func put[V any](m map[string]V, key string, v V, now time.Time, expires func(V) time.Time) {
	if _, ok := m[key]; !ok && len(m) >= maxCached {
		for k, old := range m {
			if !now.Before(expires(old)) {
				delete(m, k)
			}
		}
		if len(m) >= maxCached {
			clear(m)
		}
	}
	m[key] = v
}

// apiReviewer asks the API server with TokenReviews and SubjectAccessReviews.
type apiReviewer struct {
	authn authnclient.TokenReviewInterface
	authz authzclient.SubjectAccessReviewInterface
}

// NewAPIReviewer is the Reviewer that asks the API server behind cfg.
func NewAPIReviewer(cfg *rest.Config, httpClient *http.Client) (Reviewer, error) {
	authn, err := authnclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("failed to create the TokenReview client: %w", err)
	}
	authz, err := authzclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("failed to create the SubjectAccessReview client: %w", err)
	}
	return &apiReviewer{authn: authn.TokenReviews(), authz: authz.SubjectAccessReviews()}, nil
}

func (a *apiReviewer) Authenticate(ctx context.Context, token string) (User, bool, error) {
	tr, err := a.authn.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return User{}, false, fmt.Errorf("failed to review a token: %w", err)
	}
	if !tr.Status.Authenticated {
		return User{}, false, nil
	}
	u := User{Name: tr.Status.User.Username, UID: tr.Status.User.UID, Groups: tr.Status.User.Groups}
	if len(tr.Status.User.Extra) > 0 {
		u.Extra = make(map[string][]string, len(tr.Status.User.Extra))
		for k, v := range tr.Status.User.Extra {
			u.Extra[k] = v
		}
	}
	return u, true, nil
}

func (a *apiReviewer) Authorize(ctx context.Context, u User, verb, path string) (bool, error) {
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:                  u.Name,
		UID:                   u.UID,
		Groups:                u.Groups,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
	}}
	if len(u.Extra) > 0 {
		sar.Spec.Extra = make(map[string]authzv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			sar.Spec.Extra[k] = v
		}
	}
	out, err := a.authz.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("failed to review %s %s for %s: %w", verb, path, u.Name, err)
	}
	return out.Status.Allowed && !out.Status.Denied, nil
}
