package redistest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
)

// A server whose port another process took must not pass for ready: the one that
// answers is a stranger, and a test driving it would act on another test's node.
func TestWaitReadyRefusesAServerThatIsNotOurs(t *testing.T) {
	ours := Start(t, 1, Config{})[0]
	if err := ours.waitReady(Config{}, time.Second); err != nil {
		t.Fatalf("our own server: %v", err)
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	stranger := &Server{Addr: ours.Addr, cmd: other, exited: make(chan struct{})}
	c := goredis.NewClient(&goredis.Options{Addr: ours.Addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := stranger.answeredByUs(ctx, c); err == nil {
		t.Fatalf("a process that does not serve %s passed for its server", ours.Addr)
	}
}
