package timerqtest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// testingT is the part of testing.TB the assertions use. It is an
// interface so that their failure paths can be tested with a fake that
// records failures instead of ending the test (as rivertest does).
type testingT interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	FailNow()
}

// testingTB is the part of testing.TB that New uses.
type testingTB interface {
	testingT
	Cleanup(func())
	Logf(format string, args ...any)
}

// testing.TB, and so *testing.T, *testing.B and *testing.F, fit both.
var _ testingTB = testing.TB(nil)

// RequireScheduledOpts are the optional checks of RequireScheduled. A nil
// *RequireScheduledOpts, like the zero value, checks only that the timer
// is scheduled.
type RequireScheduledOpts struct {
	// Due, if not zero, is the due time the timer must have, compared to
	// the microsecond (timerq's resolution; a due time between two
	// microseconds is stored rounded up).
	Due time.Time
	// Payload, if not nil, is the payload the timer must have. Use
	// []byte{} to require an empty payload.
	Payload []byte
}

// RequireScheduled fails the test unless timer id is scheduled in q, and
// has the due time and payload opts asks for. It returns the timer. The
// failure message names the timer, the state it is in, its due time and
// how far that is from the server's clock.
func RequireScheduled(tb testing.TB, q *queue.Queue, id string, opts *RequireScheduledOpts) queue.Timer {
	tb.Helper()
	return requireScheduled(tb, q, id, opts)
}

func requireScheduled(tb testingT, q *queue.Queue, id string, opts *RequireScheduledOpts) queue.Timer {
	tb.Helper()
	t, now, ok := get(tb, q, id, "scheduled")
	if !ok {
		return queue.Timer{}
	}
	if t.State != queue.StateScheduled {
		failf(tb, "timerqtest: timer %q is %s, want scheduled", id, describe(t, now))
		return t
	}
	if opts == nil {
		return t
	}
	var wrong []string
	if !opts.Due.IsZero() && !t.Due.Equal(ceilMicro(opts.Due)) {
		wrong = append(wrong, "want due "+stamp(ceilMicro(opts.Due)))
	}
	if opts.Payload != nil && !bytes.Equal(t.Payload, opts.Payload) {
		wrong = append(wrong, fmt.Sprintf("want payload %q", opts.Payload))
	}
	if len(wrong) > 0 {
		failf(tb, "timerqtest: timer %q is %s; %s", id, describe(t, now), strings.Join(wrong, "; "))
	}
	return t
}

// RequireNotScheduled fails the test if timer id is scheduled in q. A
// timer that does not exist, fired or was cancelled passes.
func RequireNotScheduled(tb testing.TB, q *queue.Queue, id string) {
	tb.Helper()
	requireNotScheduled(tb, q, id)
}

func requireNotScheduled(tb testingT, q *queue.Queue, id string) {
	tb.Helper()
	ctx, cancel := testContext(tb)
	defer cancel()
	t, err := q.Get(ctx, id)
	if errors.Is(err, queue.ErrNotFound) {
		return
	}
	if err != nil {
		tb.Fatalf("timerqtest: read timer %q: %v", id, err)
		return
	}
	if t.State == queue.StateScheduled {
		now, hint := serverNow(q), ""
		if !now.IsZero() && !t.Due.After(now) {
			hint = "; it is due: call Env.FireDue to fire it"
		}
		failf(tb, "timerqtest: timer %q is %s, want it not scheduled%s", id, describe(t, now), hint)
	}
}

// RequireFired fails the test unless timer id has fired in q, and returns
// it. A timer still scheduled gets a hint: FireDue fires only what is due
// by the server clock, so Advance past its due time first.
func RequireFired(tb testing.TB, q *queue.Queue, id string) queue.Timer {
	tb.Helper()
	return requireFired(tb, q, id)
}

func requireFired(tb testingT, q *queue.Queue, id string) queue.Timer {
	tb.Helper()
	t, now, ok := get(tb, q, id, "fired")
	if !ok {
		return queue.Timer{}
	}
	switch t.State {
	case queue.StateFired:
	case queue.StateScheduled:
		hint := "; call Env.FireDue to fire what is due"
		if !now.IsZero() && t.Due.After(now) {
			hint = "; Env.Advance the clock past its due time, then call Env.FireDue"
		}
		failf(tb, "timerqtest: timer %q is %s, want fired%s", id, describe(t, now), hint)
	default:
		failf(tb, "timerqtest: timer %q is %s, want fired", id, describe(t, now))
	}
	return t
}

// get reads timer id and the server clock; a missing timer or a Redis
// error fails the test with want in the message.
func get(tb testingT, q *queue.Queue, id, want string) (queue.Timer, time.Time, bool) {
	tb.Helper()
	ctx, cancel := testContext(tb)
	defer cancel()
	t, err := q.Get(ctx, id)
	if errors.Is(err, queue.ErrNotFound) {
		failf(tb, "timerqtest: timer %q does not exist in namespace %q (never scheduled, or purged), want %s",
			id, q.Namespace(), want)
		return t, time.Time{}, false
	}
	if err != nil {
		tb.Fatalf("timerqtest: read timer %q: %v", id, err)
		return t, time.Time{}, false
	}
	return t, serverNow(q), true
}

func failf(tb testingT, format string, args ...any) {
	tb.Helper()
	tb.Errorf(format, args...)
	tb.FailNow()
}

// serverNow is the Redis server's clock, or zero if it cannot be read
// (the messages then leave out the relative times).
func serverNow(q *queue.Queue) time.Time {
	ctx, cancel := testContext(nil)
	defer cancel()
	now, err := q.Client().Time(ctx).Result()
	if err != nil {
		return time.Time{}
	}
	return now.UTC()
}

// describe says what state t is in, with its times relative to now: the
// heart of every failure message.
func describe(t queue.Timer, now time.Time) string {
	var b strings.Builder
	b.WriteString(string(t.State))
	b.WriteString(", due ")
	b.WriteString(stamp(t.Due))
	if !now.IsZero() {
		fmt.Fprintf(&b, " (%s by the server clock, now %s)", timefmt.Relative(t.Due, now, 0, time.Duration.String), stamp(now))
	}
	switch t.State {
	case queue.StateFired:
		b.WriteString(", fired " + stamp(t.FiredAt))
	case queue.StateCancelled:
		b.WriteString(", cancelled " + stamp(t.CancelledAt))
	}
	return b.String()
}

// stamp writes t as timerctl export does: ms, or µs when it has some.
func stamp(t time.Time) string { return timefmt.FormatExact(t) }

// ceilMicro rounds t up to the microsecond, as timerq stores due times.
func ceilMicro(t time.Time) time.Time {
	r := t.Truncate(time.Microsecond)
	if r.Before(t) {
		r = r.Add(time.Microsecond)
	}
	return r.UTC()
}
