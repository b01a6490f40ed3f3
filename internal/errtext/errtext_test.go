package errtext_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/timerq/timerq/internal/errtext"
)

var errSentinel = errors.New("timerq: timer not found")

type codeErr struct{ code string }

func (e *codeErr) Error() string { return e.code + " refused" }

func TestErrorfPrintsThePrefixOnce(t *testing.T) {
	inner := errtext.Errorf("timer %q: %w", "a", fmt.Errorf("%w: %q", errSentinel, "a"))
	outer := errtext.Errorf("batch item %d: %w", 3, inner)
	if got, want := outer.Error(), `timerq: batch item 3: timer "a": timer not found: "a"`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if !errors.Is(outer, errSentinel) {
		t.Fatal("errors.Is lost the sentinel")
	}
	// Text from Redis that merely contains the prefix further on is kept.
	redis := errtext.Errorf("claim: %w", &codeErr{"NOPERM timerq: no right"})
	if got, want := redis.Error(), "timerq: claim: NOPERM timerq: no right refused"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	var ce *codeErr
	if !errors.As(redis, &ce) {
		t.Fatal("errors.As lost the cause")
	}
	// A plain value among args is untouched, and the args slice is not changed.
	args := []any{errSentinel, "timerq: x"}
	if got := errtext.Errorf("%v %s", args...).Error(); got != "timerq: timer not found timerq: x" {
		t.Fatalf("got %s", got)
	}
	if args[0] != errSentinel {
		t.Fatal("Errorf changed its caller's args")
	}
}
