package topology

import (
	"errors"
	"testing"
)

// A refusal names the operation refused, and is still found as ErrRefused and as the
// planner's own error: healing's never says "bootstrap refused".
func TestRefusedNamesTheOperation(t *testing.T) {
	cause := &AssignError{Index: 0, Field: "slots", Problem: "too many"}
	for _, op := range []string{"bootstrap", "healing"} {
		err := Refused(op, cause)
		if want := op + " refused: " + cause.Error(); err.Error() != want {
			t.Errorf("%s: %q, want %q", op, err, want)
		}
		var ae *AssignError
		if !errors.Is(err, ErrRefused) || !errors.As(err, &ae) || ae != cause {
			t.Errorf("%s: %v does not wrap ErrRefused and its cause", op, err)
		}
	}
}
