package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// staleClient asks node addr for key every 5 ms, as a client whose slot table still names
// that node, until stopped; it fails the test on any reply but MOVED.
type staleClient struct {
	mu         sync.Mutex
	lastMoved  time.Time
	firstMoved chan struct{}
	stop, done chan struct{}
	once       sync.Once
}

func startStaleClient(t *testing.T, addr, key string) *staleClient {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	s := &staleClient{firstMoved: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	stop := s.stop
	t.Cleanup(func() { s.halt(); <-s.done }) // before the servers stop
	go func() {
		defer close(s.done)
		defer c.Close()
		for first := true; ; {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			err := c.Get(context.Background(), key).Err()
			if err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
				t.Errorf("GET %s on %s: %v, want MOVED", key, addr, err)
				return
			}
			s.mu.Lock()
			s.lastMoved = time.Now()
			s.mu.Unlock()
			if first {
				close(s.firstMoved)
				first = false
			}
		}
	}()
	return s
}

// awaitFirstMoved returns once the client was redirected, and fails the test if it
// stopped before or nothing came within 10 s.
func (s *staleClient) awaitFirstMoved(t *testing.T) {
	select {
	case <-s.firstMoved:
	case <-s.done:
		t.Fatal("the client stopped before it was redirected")
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not redirected within 10 s")
	}
}

func (s *staleClient) halt() { s.once.Do(func() { close(s.stop) }) }

func (s *staleClient) last() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastMoved
}

// redirecting forms two masters and names a key of the second's, which the first
// redirects.
func redirecting(t *testing.T) (Factory, []topology.Member, string) {
	f, members, st := formMasters(t, 2)
	return f, members, fmt.Sprintf("{%s}:k", tagFor(st.Members[1].Self().Slots[0].Start))
}

// The leaving nodes are reset only once no client is redirected by them any more: the wait
// outlasts a client still sent elsewhere with MOVED, and ends redirectQuiet after it.
func TestAwaitNoRedirectsOutlastsAStaleClient(t *testing.T) {
	t.Parallel()
	f, members, key := redirecting(t)
	c := startStaleClient(t, members[0].Addr, key)
	c.awaitFirstMoved(t)
	time.AfterFunc(500*time.Millisecond, c.halt)
	ctx := ctxFor(t, time.Minute)

	awaitNoRedirects(ctx, f, []string{members[0].Addr})
	returned := time.Now()
	select {
	case <-c.done:
	default:
		t.Fatal("the wait ended while the client was still redirected")
	}
	if quiet := returned.Sub(c.last()); quiet < redirectQuiet-redirectPoll {
		t.Errorf("the wait ended %v after the last MOVED, want at least %v", quiet, redirectQuiet)
	}
}

// A client that never stops is not waited for past redirectWait.
func TestAwaitNoRedirectsGivesUp(t *testing.T) {
	t.Parallel()
	f, members, key := redirecting(t)
	ctx := ctxFor(t, time.Minute)
	c := startStaleClient(t, members[0].Addr, key)
	c.awaitFirstMoved(t)

	start := time.Now()
	awaitNoRedirects(ctx, f, []string{members[0].Addr})
	if took := time.Since(start); took < redirectWait || took > redirectWait+5*time.Second {
		t.Errorf("the wait took %v with a client redirected throughout, want about %v", took, redirectWait)
	}
}
