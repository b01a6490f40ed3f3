package queue

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// State is where a timer is in its life: it starts scheduled and ends fired
// or cancelled, never to change again.
type State string

// The states of a timer.
const (
	StateScheduled State = "scheduled"
	StateFired     State = "fired"
	StateCancelled State = "cancelled"
)

// ParseState parses "scheduled", "fired" or "cancelled".
func ParseState(s string) (State, error) {
	switch st := State(s); st {
	case StateScheduled, StateFired, StateCancelled:
		return st, nil
	}
	return "", fmt.Errorf("%w: state %q is not one of scheduled, fired, cancelled", ErrInvalidOptions, s)
}

// code is the state's one-letter form in records and in list.lua.
func (s State) code() string { return string(s[:1]) }

// Timer is a timer's record. All times are the Redis server's clock, in
// milliseconds, in UTC.
type Timer struct {
	ID      string
	State   State
	Due     time.Time
	Payload []byte
	// CreatedAt is when Schedule created the timer.
	CreatedAt time.Time
	// FiredAt is when a claim fired it; zero unless State is StateFired.
	FiredAt time.Time
	// CancelledAt is when Cancel cancelled it; zero unless State is StateCancelled.
	CancelledAt time.Time
}

// NewTimer is a timer to schedule. Give it a due time in one of two ways:
// Due, an instant, or In, a delay that Redis adds to its own clock (TIME,
// read inside the script), so that a client whose clock is off cannot make
// the timer early or late.
type NewTimer struct {
	ID string
	// Due is when the timer is due. Leave it zero when In is used.
	Due     time.Time
	Payload []byte
	// In, when Due is zero, makes the timer due In after the Redis server's
	// clock at the moment the timer is created, rounded up to the
	// millisecond. A zero In counts as unset, so that a timer with neither
	// is refused; use NewTimerIn for a timer due at once by the server's
	// clock. In must not be negative.
	In time.Duration

	// relative marks a timer built by NewTimerIn, whose In may be zero.
	relative bool
}

// NewTimerIn returns a timer due d after the Redis server's clock (d may be
// 0: due at once), for ScheduleBatch.
func NewTimerIn(id string, d time.Duration, payload []byte) NewTimer {
	return NewTimer{ID: id, In: d, Payload: payload, relative: true}
}

// isRelative reports whether t's due time is In after the server's clock.
func (t NewTimer) isRelative() bool { return t.relative || t.In != 0 }

// dueArg is t's due time as schedule.lua takes it.
func (t NewTimer) dueArg() string {
	if t.isRelative() {
		return relativeArg(t.In)
	}
	return strconv.FormatInt(dueMillis(t.Due), 10)
}

// relativeArg is d as the scripts' resolve_due takes it: "+<ms>.<us>",
// rounded up to the microsecond, the resolution of Redis's TIME.
func relativeArg(d time.Duration) string {
	us := d / time.Microsecond
	if d%time.Microsecond != 0 {
		us++
	}
	return fmt.Sprintf("+%d.%03d", us/1000, us%1000)
}

// ScheduleResult is the outcome of scheduling one timer.
type ScheduleResult struct {
	// Timer is the record now in Redis: the new one, or the existing one
	// when Created is false.
	Timer Timer
	// Created is false when a timer with this ID already existed, in any
	// state; the existing timer was left unchanged.
	Created bool
}

// DeriveID derives a timer ID from an execution ID and a step number (for
// instance the position of a sleep call in a workflow), so that an
// execution replaying after a crash derives the same ID and finds its timer.
// The result is 36 characters, shaped like a UUID (version 8). The
// derivation is fixed: it will not change between releases.
func DeriveID(executionID string, step uint64) string {
	h := sha256.New()
	h.Write([]byte("timerq.DeriveID.v1\x00"))
	var n [binary.MaxVarintLen64 + 8]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(executionID)))])
	h.Write([]byte(executionID))
	binary.BigEndian.PutUint64(n[:8], step)
	h.Write(n[:8])
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x80 // version 8: custom
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}

func millis(t time.Time) int64 { return t.UnixMilli() }

// dueMillis is a due time in milliseconds, rounded up: the scripts keep
// milliseconds, and truncating would make a timer due up to 1 ms early.
func dueMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// parseMillis parses a decimal millisecond timestamp; "" gives the zero time.
func parseMillis(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return fromMillis(ms), nil
}

// decodeRecord parses "<s|f|c>:<due>:<created>:<settled>:<payload>", the
// layout written by the scripts (prelude.lua).
func decodeRecord(id, rec string) (Timer, error) {
	bad := func(why string) (Timer, error) {
		return Timer{}, fmt.Errorf("%w: timer %q (%s): was it written by something other than timerq?", ErrMalformedRecord, id, why)
	}
	f := strings.SplitN(rec, ":", 5)
	if len(f) != 5 || len(f[0]) != 1 {
		return bad("wrong field count")
	}
	t := Timer{ID: id, Payload: []byte(f[4])}
	var err error
	if t.Due, err = parseMillis(f[1]); err != nil || f[1] == "" {
		return bad("due time")
	}
	if t.CreatedAt, err = parseMillis(f[2]); err != nil {
		return bad("created time")
	}
	settled, err := parseMillis(f[3])
	if err != nil {
		return bad("settled time")
	}
	switch f[0] {
	case "s":
		t.State = StateScheduled
	case "f":
		t.State, t.FiredAt = StateFired, settled
	case "c":
		t.State, t.CancelledAt = StateCancelled, settled
	default:
		return bad("state")
	}
	return t, nil
}
