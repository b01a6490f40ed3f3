package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/timerq/timerq/scripts/lua"
)

// Bounds of a debounce call.
const (
	// MaxDebounceWait is the longest DebounceOptions.MaxWait: a year.
	// debounce.lua holds the same bound.
	MaxDebounceWait = 365 * 24 * time.Hour
	// MaxDebounceKeyBytes is the longest debounce key: a window's timer ID
	// appends "@" and up to 15 digits and must stay within MaxIDBytes.
	MaxDebounceKeyBytes = MaxIDBytes - 16
)

// ErrDebounceKeyIsSchedule means a debounce key is the ID of a recurring
// schedule of the namespace: both own the timer IDs "<id>@<ms>", so one
// name cannot be both. It wraps ErrInvalidID.
var ErrDebounceKeyIsSchedule = fmt.Errorf("%w: a debounce key may not be the ID of a recurring schedule", ErrInvalidID)

// ErrScheduleIDIsDebounceKey means a schedule's ID is a debounce key with an
// open window (its window string lives until the window's deadline): both
// own the timer IDs "<id>@<ms>". RecurringTimers.Put and RecurringTimers.Restore refuse
// it, writing nothing. It wraps ErrInvalidID.
var ErrScheduleIDIsDebounceKey = fmt.Errorf("%w: a schedule's ID may not be a debounce key with an open window", ErrInvalidID)

// DebounceOutcome says what a Debounce call did.
type DebounceOutcome string

// The outcomes of a Debounce call.
const (
	// DebounceCreated means no window of the key was open: the call
	// opened one and created its timer, due Delay after the server's clock
	// (or at the window's deadline, should MaxWait equal Delay and the
	// rounding to the millisecond pass it).
	DebounceCreated DebounceOutcome = "created"
	// DebouncePushed means the call moved the open window's timer to Delay
	// after the server's clock.
	DebouncePushed DebounceOutcome = "pushed"
	// DebounceCapped means Delay after the server's clock is past the open
	// window's deadline, so the timer is due at the deadline.
	DebounceCapped DebounceOutcome = "capped"
)

// DebounceOptions are the arguments of a Debounce call.
type DebounceOptions struct {
	// Delay is how long after the call, by the Redis server's clock, the
	// window's timer is due, unless a later call pushes it back again. It
	// must be positive and is rounded up to the millisecond.
	Delay time.Duration
	// MaxWait bounds a window: its timer is never due later than MaxWait
	// after the window opened (by the server's clock). It must be at
	// least Delay and at most MaxDebounceWait, and is rounded up to the
	// millisecond. The call that opens a window fixes its deadline; the
	// MaxWait of later calls into the window is not used.
	MaxWait time.Duration
	// Payload is the timer's payload. The newest call's payload wins,
	// unless KeepFirst is set.
	Payload []byte
	// KeepFirst leaves the window's payload as it is: a call with it
	// moves the timer only. The payload is then the opening call's, unless
	// a call without KeepFirst replaced it since. A call that opens a
	// window always sets its payload.
	KeepFirst bool
	// Endpoint, when set, names the namespace's endpoint (Endpoints.Put)
	// that the window's fire is delivered to, as NewTimer.Endpoint. It goes
	// with the payload: the call that opens the window sets it, and so
	// does each later call without KeepFirst (an empty Endpoint then
	// makes the window's fire deliver nowhere). A name the namespace has
	// no endpoint of is refused with ErrEndpointNotFound, and nothing is
	// written.
	Endpoint string
	// Owner and Labels are the window's timer's, as NewTimer.Owner and
	// Labels are a timer's: the call that opens a window sets them (with
	// its owner's epoch then), later calls into it leave them.
	Owner  string
	Labels map[string]string
}

// DebounceResult is the outcome of a Debounce call.
type DebounceResult struct {
	// Outcome is what the call did: created, pushed or capped.
	Outcome DebounceOutcome
	// Timer is the window's timer as the call left it, with the owner
	// and labels the call that opened the window gave it. Its ID is
	// DebounceID(key, opened), opened being Timer.CreatedAt unless the
	// ID of that millisecond was taken (see Debounce).
	Timer Timer
	// Now is the Redis server's clock when the call ran.
	Now time.Time
	// Deadline is the window's deadline: its opening plus MaxWait. The
	// timer is never due after it, and a call at or after it opens the
	// next window.
	Deadline time.Time
}

// DebounceID returns the timer ID of debounce key key's window opened at
// the Unix millisecond opened: "<key>@<opened>". It has the form of a
// recurring schedule's occurrence ID, so it lives in the shard of key,
// beside the key's window, and ParseOccurrenceID reads key and the opening
// back from it.
func DebounceID(key string, opened int64) string {
	return key + "@" + strconv.FormatInt(opened, 10)
}

// Debounce runs "this, Delay after the last call, but never later than
// MaxWait after the first" for key, in one atomic script, by the Redis
// server's clock. When key has an open window (its timer is scheduled and
// its deadline has not passed), the window's timer is pushed back to
// Delay after now, or to the deadline if that is sooner (capped), and its
// payload replaced unless KeepFirst. Otherwise the call opens the next
// window: it creates a timer due Delay after now, whose deadline is
// MaxWait after now.
//
// A window's timer, once fired or cancelled, is never re-armed: the next
// call opens a new window with a new timer. The ID of a window's timer is
// DebounceID(key, the server's Unix ms when the window opened), or a
// millisecond later than that should the clock have gone back or a timer
// with that ID exist, so a key's windows never share an ID and their IDs
// grow. The result names the timer: Get, Wait, Cancel and FireNow work on
// it as on any timer, and its fire event carries it as Event.ID.
// docs/debounce.md says what a replaying caller can rely on.
//
// key must be a valid timer ID of at most MaxDebounceKeyBytes bytes and
// not the ID of a recurring schedule of the namespace
// (ErrDebounceKeyIsSchedule). Every check runs before anything is
// written, so an error other than ErrOutcomeUnknown means nothing
// changed. On ErrOutcomeUnknown, calling again is the way to learn the
// state: at worst the window was pushed twice.
func (q *Queue) Debounce(ctx context.Context, key string, opts DebounceOptions) (res DebounceResult, err error) {
	ctx, span, tp := q.startSchedule(ctx, []NewTimer{{ID: key}})
	defer func() {
		var out []ScheduleResult
		if err == nil {
			out = []ScheduleResult{{Timer: res.Timer, Created: res.Outcome == DebounceCreated}}
			// The window's timer, not the key the span started with.
			span.SetAttributes(attrTimerID.String(res.Timer.ID))
		}
		endSchedule(span, out, err)
	}()
	return q.debounce(ctx, key, opts, tp)
}

// debounce is Debounce, storing the traceparent tp ("" for none) with a
// window's timer it creates.
func (q *Queue) debounce(ctx context.Context, key string, opts DebounceOptions, tp string) (DebounceResult, error) {
	if err := ValidateID(key); err != nil {
		return DebounceResult{}, errorf("debounce key: %w", err)
	}
	if len(key) > MaxDebounceKeyBytes {
		return DebounceResult{}, fmt.Errorf("%w: debounce key %q is %d bytes long; use at most %d, so that its window IDs (<key>@<ms>) fit in %d",
			ErrInvalidID, key, len(key), MaxDebounceKeyBytes, MaxIDBytes)
	}
	// A refused option is a FieldError naming the field of DebounceOptions.
	refuse := func(field string, err error) error {
		return &FieldError{Field: field, Err: errorf("debounce %q: %w", key, err)}
	}
	delay, wait, field, err := debounceMillis(opts)
	if err != nil {
		return DebounceResult{}, refuse(field, err)
	}
	if err := q.validatePayload(key, opts.Payload); err != nil {
		return DebounceResult{}, refuse("Payload", err)
	}
	if opts.Endpoint != "" {
		if err := ValidateEndpointName(opts.Endpoint); err != nil {
			return DebounceResult{}, refuse("Endpoint", err)
		}
	}
	if err := (NewTimer{Owner: opts.Owner, Labels: opts.Labels}).validateMeta(refuse); err != nil {
		return DebounceResult{}, err
	}
	keep := "0"
	if opts.KeepFirst {
		keep = "1"
	}
	reply, err := q.debounceRun(ctx, key, delay, wait, keep, tp, opts)
	if errors.Is(err, errRelayout) {
		// Refused before any write: the namespace was created with more
		// shards since the layout was read, and is read again now.
		reply, err = q.debounceRun(ctx, key, delay, wait, keep, tp, opts)
	}
	if err != nil {
		if mayHaveRun(err) || errors.Is(err, ErrNotReplicated) {
			return DebounceResult{}, errorf("%w: debounce %q: %w", ErrOutcomeUnknown, key, err)
		}
		return DebounceResult{}, errorf("debounce %q: %w", key, err)
	}
	return q.debounceResult(key, reply)
}

// debounceRun runs debounce.lua for key in the layout the queue knows.
func (q *Queue) debounceRun(ctx context.Context, key string, delay, wait int64, keep, tp string, opts DebounceOptions) (any, error) {
	l, err := q.layout(ctx)
	if err != nil {
		return nil, err
	}
	k := l.scheduleShard(key)
	quotas, err := q.quotas(ctx)
	if err != nil {
		return nil, err
	}
	args := []any{key, delay, wait, opts.Payload, keep, l.spaces[k].Wake(), tp, opts.Endpoint,
		shardQuota(quotas.Pending, len(l.spaces)), NewTimer{Owner: opts.Owner, Labels: opts.Labels}.metaArg()}
	var reply any
	if l.replicas > 0 {
		var acks int
		reply, acks, err = q.runWaitKeys(ctx, l, lua.Debounce, k, key, args...)
		if err == nil && acks < l.replicas {
			err = shardErr(l, k, fmt.Errorf("%w; debounce again, which at worst pushes the window once more",
				q.notReplicated(l, "the debounced timer", acks)))
		}
	} else {
		reply, err = q.runKeysTries(ctx, l, lua.Debounce, k, key, migrationAttempts, args...)
	}
	return reply, err
}

// debounceResult decodes debounce.lua's reply for key.
func (q *Queue) debounceResult(key string, reply any) (DebounceResult, error) {
	r, err := replyStrings(reply)
	if err != nil || len(r) < 5 || len(r) > 6 {
		return DebounceResult{}, errorf("debounce %q: unexpected reply %v", key, reply)
	}
	if r[0] == "schedule" {
		return DebounceResult{}, fmt.Errorf("%w: %q is a recurring schedule of namespace %q; use another debounce key",
			ErrDebounceKeyIsSchedule, key, q.opts.Namespace)
	}
	switch o := DebounceOutcome(r[0]); o {
	case DebounceCreated, DebouncePushed, DebounceCapped:
		t, err := decodeRecord(r[1], r[2])
		if err == nil && len(r) == 6 {
			t, err = t.withMeta(r[5])
		}
		if err != nil {
			return DebounceResult{}, err
		}
		now, deadline := atoi(r[3]), atoi(r[4])
		return DebounceResult{Outcome: o, Timer: t, Now: fromMillis(now), Deadline: fromMillis(deadline)}, nil
	}
	return DebounceResult{}, errorf("debounce %q: unexpected script status %q", key, r[0])
}

// debounceMillis checks a call's Delay and MaxWait and returns them in
// milliseconds, rounded up; on a refusal, field names the refused field.
func debounceMillis(o DebounceOptions) (delay, wait int64, field string, err error) {
	switch {
	case o.Delay <= 0:
		return 0, 0, "Delay", fmt.Errorf("%w: the debounce delay is %v; use a positive delay, such as 5s", ErrInvalidOptions, o.Delay)
	case o.MaxWait <= 0:
		return 0, 0, "MaxWait", fmt.Errorf("%w: the debounce max wait is %v; use a positive max wait, at least the delay (%v)", ErrInvalidOptions, o.MaxWait, o.Delay)
	case o.MaxWait < o.Delay:
		return 0, 0, "MaxWait", fmt.Errorf("%w: the debounce max wait %v is shorter than the delay %v; use a max wait of at least the delay", ErrInvalidOptions, o.MaxWait, o.Delay)
	case o.MaxWait > MaxDebounceWait:
		return 0, 0, "MaxWait", fmt.Errorf("%w: the debounce max wait %v is over the limit of %v; use a schedule for longer waits", ErrInvalidOptions, o.MaxWait, MaxDebounceWait)
	}
	ceil := func(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }
	return ceil(o.Delay), ceil(o.MaxWait), "", nil
}
