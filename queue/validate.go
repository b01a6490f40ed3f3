package queue

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds of timer fields.
const (
	// MaxIDBytes is the longest timer ID, in bytes.
	MaxIDBytes = 256
	// MaxNamespaceLen is the longest namespace name.
	MaxNamespaceLen = 64
)

var (
	minDue = time.Unix(0, 0).UTC()
	maxDue = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)
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
// are truncated when stored. The error wraps ErrInvalidDue.
func ValidateDue(due time.Time) error {
	switch {
	case due.IsZero():
		return fmt.Errorf("%w: the due time is the zero time.Time; set it, e.g. time.Now().Add(d)", ErrInvalidDue)
	case due.Before(minDue) || due.After(maxDue):
		return fmt.Errorf("%w: %s is outside 1970-01-01 to 9999-12-31 UTC", ErrInvalidDue, due.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// validateTimer checks one new timer against the queue's limits.
func (q *Queue) validateTimer(t NewTimer) error {
	if err := ValidateID(t.ID); err != nil {
		return err
	}
	if err := ValidateDue(t.Due); err != nil {
		return fmt.Errorf("timer %q: %w", t.ID, err)
	}
	if len(t.Payload) > q.opts.MaxPayloadBytes {
		return fmt.Errorf("%w: timer %q has %d bytes of payload, over the limit of %d; store large data elsewhere and keep a reference, or raise Options.MaxPayloadBytes (at most 1 MiB)",
			ErrPayloadTooLarge, t.ID, len(t.Payload), q.opts.MaxPayloadBytes)
	}
	return nil
}
