package queue

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/timefmt"
)

// Bounds of timer fields.
const (
	// MaxIDBytes is the longest timer ID, in bytes.
	MaxIDBytes = 256
	// MaxNamespaceLen is the longest namespace name.
	MaxNamespaceLen = 64
)

// minDue and maxDue bound a due time. They are defined below queue, in
// internal/timefmt, so that the operator tools' time parser refuses the
// same times without importing queue.
var (
	minDue = timefmt.MinDue
	maxDue = timefmt.MaxDue
)

// ValidateID reports whether id is a valid timer ID: 1-256 bytes of UTF-8
// without control characters. The error wraps ErrInvalidID.
func ValidateID(id string) error {
	const want = "use 1-256 bytes of UTF-8 without control characters"
	switch {
	case id == "":
		return fmt.Errorf("%w: the ID is empty; %s", ErrInvalidID, want)
	case len(id) > MaxIDBytes:
		return fmt.Errorf("%w: the ID is %d bytes long; %s", ErrInvalidID, len(id), want)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: %q is not valid UTF-8; %s", ErrInvalidID, id, want)
	}
	for i, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %q has a control character at byte %d; %s", ErrInvalidID, id, i, want)
		}
	}
	return nil
}

// ValidateNamespace reports whether ns is a valid namespace: 1-64 characters
// of [A-Za-z0-9_.-]. The error wraps ErrInvalidNamespace.
func ValidateNamespace(ns string) error {
	const want = "use 1-64 characters of A-Z, a-z, 0-9, '_', '.' and '-'"
	if ns == "" || len(ns) > MaxNamespaceLen {
		return fmt.Errorf("%w: %q is %d characters long; %s", ErrInvalidNamespace, ns, len(ns), want)
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("%w: %q has %q at position %d; %s", ErrInvalidNamespace, ns, c, i, want)
		}
	}
	return nil
}

// ValidateDue reports whether due can be a timer's due time: not the zero
// time, and between 1970-01-01 and 9999-12-31 UTC. Sub-millisecond parts
// are rounded up to the next millisecond when stored, so that a timer is
// never early. The error wraps ErrInvalidDue.
func ValidateDue(due time.Time) error {
	switch {
	case due.IsZero():
		return fmt.Errorf("%w: the due time is the zero time.Time; set it, e.g. time.Now().Add(d)", ErrInvalidDue)
	case due.Before(minDue) || due.After(maxDue):
		return fmt.Errorf("%w: %s is outside 1970-01-01 to 9999-12-31 UTC", ErrInvalidDue, due.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// validateTimer checks one new timer against the queue's limits. Its ID
// may not have an occurrence's form: a plain timer "x@<ms>" would be
// adopted by a later schedule "x" as its own occurrence, with the planted
// payload and due time. Each refusal is a *FieldError naming the field of
// NewTimer, so that a caller can name the field of its own input.
func (q *Queue) validateTimer(t NewTimer) error {
	if q.validated != nil {
		q.validated(t)
	}
	if err := ValidateID(t.ID); err != nil {
		return &FieldError{Field: "ID", Err: err}
	}
	if err := notOccurrence(t.ID); err != nil {
		return &FieldError{Field: "ID", Err: err}
	}
	refuse := func(field string, err error) error {
		return &FieldError{Field: field, Err: errorf("timer %q: %w", t.ID, err)}
	}
	switch {
	case t.isRelative() && !t.Due.IsZero():
		return &FieldError{Field: "In", Err: fmt.Errorf("%w: timer %q has both Due and In; set one of them", ErrInvalidDue, t.ID)}
	case t.isRelative():
		if err := validateIn(t.In); err != nil {
			return refuse("In", err)
		}
	default:
		if err := ValidateDue(t.Due); err != nil {
			return refuse("Due", err)
		}
	}
	if t.Endpoint != "" {
		if err := ValidateEndpointName(t.Endpoint); err != nil {
			return refuse("Endpoint", err)
		}
	}
	if t.FlowKey != "" {
		if err := ValidateFlowKey(t.FlowKey); err != nil {
			return refuse("FlowKey", err)
		}
	}
	if t.URL != "" {
		if t.Endpoint == "" {
			return refuse("Endpoint", fmt.Errorf("%w: a delivery URL needs an endpoint to take its secrets and policy from; set Endpoint", ErrInvalidOptions))
		}
		if err := ValidateTimerURL(t.URL, q.opts.TimerURLAllow); err != nil {
			return refuse("URL", err)
		}
	}
	if err := t.validateMeta(refuse); err != nil {
		return err
	}
	if err := q.validatePayload(t.ID, t.Payload); err != nil {
		return &FieldError{Field: "Payload", Err: err}
	}
	return nil
}

// notOccurrence refuses an occurrence-shaped ID for a plain timer, with
// an error wrapping ErrOccurrenceID.
func notOccurrence(id string) error {
	sid, ms, ok := keyspace.SplitOccurrence(id)
	if !ok {
		return nil
	}
	return fmt.Errorf("%w: %q is one (of schedule %q); give a plain timer another ID, e.g. %q",
		ErrOccurrenceID, id, sid, sid+"-"+ms)
}

func (q *Queue) validatePayload(id string, p []byte) error {
	if len(p) > q.opts.MaxPayloadBytes {
		return fmt.Errorf("%w: timer %q has %d bytes of payload, over the limit of %d; store large data elsewhere and keep a reference, or raise Options.MaxPayloadBytes (at most 1 MiB)",
			ErrPayloadTooLarge, id, len(p), q.opts.MaxPayloadBytes)
	}
	return nil
}

// validateIn checks a delay from the server's clock. Every non-negative
// time.Duration (at most 292 years) lands before 9999-12-31.
func validateIn(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: the delay %v is negative; use 0 or more, or an absolute due time in the past", ErrInvalidDue, d)
	}
	return nil
}

// validateRestored checks a timer to restore: a known state, its times in
// range, and exactly the settled time its state calls for.
func (q *Queue) validateRestored(t Timer) error {
	if err := ValidateID(t.ID); err != nil {
		return err
	}
	if _, err := ParseState(string(t.State)); err != nil {
		return errorf("timer %q: %w", t.ID, err)
	}
	if t.Owner != "" {
		if err := ValidateOwner(t.Owner); err != nil {
			return errorf("timer %q: %w", t.ID, err)
		}
	} else if t.Epoch != 0 {
		return fmt.Errorf("%w: timer %q has an epoch but no owner", ErrInvalidOptions, t.ID)
	}
	if err := ValidateLabels(t.Labels); err != nil {
		return errorf("timer %q: %w", t.ID, err)
	}
	if !t.Deadline.IsZero() {
		if err := ValidateDue(t.Deadline); err != nil {
			return errorf("timer %q: deadline: %w", t.ID, err)
		}
	}
	check := func(name string, tm time.Time, want bool) error {
		switch {
		case want && tm.IsZero():
			return fmt.Errorf("%w: timer %q is %s but has no %s", ErrInvalidDue, t.ID, t.State, name)
		case !want && !tm.IsZero():
			return fmt.Errorf("%w: timer %q is %s but has a %s", ErrInvalidDue, t.ID, t.State, name)
		case want && (tm.Before(minDue) || tm.After(maxDue)):
			return fmt.Errorf("%w: timer %q has %s %s, outside 1970-01-01 to 9999-12-31 UTC",
				ErrInvalidDue, t.ID, name, tm.UTC().Format(time.RFC3339Nano))
		}
		return nil
	}
	for _, c := range []struct {
		name string
		tm   time.Time
		want bool
	}{
		{"due time", t.Due, true},
		{"creation time", t.CreatedAt, true},
		{"fired time", t.FiredAt, t.State == StateFired},
		{"cancelled time", t.CancelledAt, t.State == StateCancelled},
	} {
		if err := check(c.name, c.tm, c.want); err != nil {
			return err
		}
	}
	return q.validatePayload(t.ID, t.Payload)
}
