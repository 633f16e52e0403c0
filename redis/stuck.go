// A key that cannot move (StuckKeyError) and the backoff before its slot is tried again.

package redis

import (
	"fmt"
	"sync"
	"time"
)

// StuckKeyError is a key that could not move alone within MIGRATE's timeout. It is not
// tried again before RetryAfter.
type StuckKeyError struct {
	Slot int
	Key  string
	// Source and Target are the nodes' addresses.
	Source, Target string
	Timeout        time.Duration
	RetryAfter     time.Time
	Err            error
}

func (e *StuckKeyError) Error() string {
	return fmt.Sprintf("key %q of slot %d cannot move from %s to %s within %v (next try after %s): %v",
		e.Key, e.Slot, e.Source, e.Target, e.Timeout, e.RetryAfter.Format(time.TimeOnly), e.Err)
}

func (e *StuckKeyError) Unwrap() error { return e.Err }

// KeyConflictError is a key held, with different values, by both a node that does not
// own its slot and the owner. Neither copy is dropped: a person decides.
type KeyConflictError struct {
	Slot           int
	Key            string
	Source, Target string
}

func (e *KeyConflictError) Error() string {
	return fmt.Sprintf("key %q of slot %d has different values on %s (not the owner) and on its owner %s; "+
		"keep one with DEL on the other, then the slot is finished", e.Key, e.Slot, e.Source, e.Target)
}

// stuckKeys remembers stuck keys per source, target and slot, so a reconcile that comes
// early does not try them again and starve the source.
type stuckKeys struct {
	mu sync.Mutex
	m  map[string]*StuckKeyError
}

func stuckID(src, dst string, slot int) string { return fmt.Sprintf("%s>%s#%d", src, dst, slot) }

// check returns the remembered error while its backoff runs.
func (b *stuckKeys) check(src, dst string, slot int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.m[stuckID(src, dst, slot)]
	if e == nil || time.Now().After(e.RetryAfter) {
		return nil
	}
	return e
}

func (b *stuckKeys) remember(e *StuckKeyError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]*StuckKeyError{}
	}
	b.m[stuckID(e.Source, e.Target, e.Slot)] = e
}
