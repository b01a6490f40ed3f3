package queue

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
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
	// Owner is the timer's owner (NewTimer.Owner), "" for none.
	Owner string
	// Epoch is the fencing epoch its owner had when the timer was
	// scheduled (BumpEpoch); 0 for a timer without an owner.
	Epoch uint64
	// Labels are the timer's labels (NewTimer.Labels), nil for none.
	Labels map[string]string
	// Deadline is the latest time its fire may be delivered
	// (NewTimer.FireWithin, FireBy); zero for none.
	Deadline time.Time
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
	// Endpoint, when set, names the namespace's endpoint (Endpoints.Put)
	// that the fire is delivered to; its payload is the request body. Only
	// the name is stored with the timer, and the fire event carries it
	// (Event.Endpoint). Scheduling refuses a name the namespace has no
	// endpoint of, with ErrEndpointNotFound, and writes nothing.
	Endpoint string
	// FlowKey, when set, is the timer's flow key (a tenant ID, say): its
	// fire's delivery, to its endpoint or to a consumer group, is held to
	// the namespace's flow policy for the key (Flows.PutPolicy), apart from
	// other keys' deliveries. The fire itself is never delayed. At most
	// MaxFlowKeyBytes of UTF-8 without control characters.
	FlowKey string
	// URL, with Endpoint, delivers the fire to this URL instead of the
	// endpoint's, signed with the endpoint's secrets and under its
	// headers, timeout, retry policy and in-flight limit. The namespace's
	// delivery policy must allow it (DeliveryPolicy.AllowTimerURLs), else
	// scheduling fails with ErrTimerURLsOff and writes nothing. It is
	// checked with ValidateTimerURL (address literals in private ranges
	// are refused), and stored with the timer beside the endpoint's name.
	URL string
	// Owner, when set, names who owns the timer (a workflow's ID, say):
	// CancelMatching selects an owner's timers, NextWake finds the
	// earliest, and the timer records its owner's fencing epoch
	// (BumpEpoch), which its fire carries. See ValidateOwner.
	Owner string
	// Epoch, when not 0, is the owner epoch the caller acts under: the
	// timer is scheduled only if it is the owner's current epoch, else the
	// call fails with ErrStaleEpoch and writes nothing, so an executor
	// that lost the owner to another cannot schedule for it. 0 takes the
	// current epoch, unchecked: an executor that wants to be fenced takes
	// its epoch from BumpEpoch when it starts. It needs Owner.
	Epoch uint64
	// Labels are a few key=value pairs (ValidateLabels) that List and
	// CancelMatching select timers by.
	Labels map[string]string
	// FireWithin, when positive, is how long after its due time the fire
	// may still be delivered: a delivery (to an endpoint or a consumer
	// group) that cannot happen by then is dead-lettered with the reason
	// "deadline", never delivered late. Rounded up to the millisecond; a
	// deadline past the end of 9999, the latest time timerq stores, is that end.
	FireWithin time.Duration
	// FireBy is FireWithin as an instant; set at most one of them. It may
	// not be before the due time: for a timer of NewTimerIn, whose due
	// time the server's clock resolves, the schedule script refuses it
	// with the error validation gives a Due (ErrInvalidOptions, a
	// FieldError naming FireBy), and writes nothing.
	FireBy time.Time

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
	return dueScore(t.Due)
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

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// dueScore is a due time as the scripts take it and the due set keeps it:
// milliseconds with the microseconds as a fraction, "<ms>" or
// "<ms>.<us>" (three digits), rounded up to the microsecond (the
// resolution of Redis's TIME) so that a timer is never early. A score is
// the double nearest that decimal, which holds the microsecond exactly
// until the year 2248.
func dueScore(t time.Time) string {
	us := t.UnixMicro()
	if t.After(time.UnixMicro(us)) {
		us++
	}
	return formatMicros(us)
}

// restoreDueArg is t's due time as the restore scripts take it: a
// scheduled timer's due score (dueScore); a settled timer's record keeps
// whole milliseconds, floored as a claim floors them, so that a restored
// timer never shows a due time after its fire time.
func restoreDueArg(t Timer) string {
	if t.State == StateScheduled {
		return dueScore(t.Due)
	}
	return strconv.FormatInt(millis(t.Due), 10)
}

// formatMicros writes a time in µs (not negative) as a due score string.
func formatMicros(us int64) string {
	if us%1000 == 0 {
		return strconv.FormatInt(us/1000, 10)
	}
	return fmt.Sprintf("%d.%03d", us/1000, us%1000)
}

// fromScore turns a due score (ms, maybe with a fraction) into a time,
// rounded to the microsecond: a score written from "<ms>.<us>" comes back
// as those digits.
func fromScore(score float64) time.Time {
	ms := math.Floor(score)
	return time.UnixMicro(int64(ms)*1000 + int64(math.Round((score-ms)*1000))).UTC()
}

// parseScore parses a due score as the scripts reply with one: a due
// score string ("<ms>" or "<ms>.<us>"), or the score as Redis prints it
// (real Redis prints 1700000000123.456 as 1700000000123.4561). The zero
// time if it is no number.
func parseScore(s string) time.Time {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return time.Time{}
	}
	return fromScore(f)
}

// isDueScore reports whether s is a due score string as the scripts write
// one (scripts/lua/includes/score_ms.lua): 1 to 15 digits of at most maxMillis,
// optionally "." and three digits.
func isDueScore(s string) bool {
	ms, frac, ok := strings.Cut(s, ".")
	if ok && (len(frac) != 3 || !isDigits(frac)) {
		return false
	}
	return isMillis(ms)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// decodeRecord parses a record as the scripts reply with it: the stored
// record (decodeStored) with a scheduled timer's due time filled in from
// the due set, "s:<due>:<created>::<payload>" (scripts/lua/includes/full.lua).
func decodeRecord(id, rec string) (Timer, error) {
	if rest, ok := strings.CutPrefix(rec, "s:"); ok {
		if due, stored, ok := strings.Cut(rest, ":"); ok && due != "" {
			if !isDueScore(due) {
				return Timer{}, malformedRecord(id, "due time")
			}
			score, _ := strconv.ParseFloat(due, 64)
			return decodeStored(id, "s::"+stored, score, true)
		}
	}
	return decodeStored(id, rec, 0, false)
}

// maxMillis is maxDue in milliseconds: the latest time a record holds.
const maxMillis = 253402300799999

// isMillis reports whether a record's time field is one timerq writes: 1 to
// 15 ASCII digits of at most maxMillis (scripts/lua/includes/is_ms.lua).
func isMillis(s string) bool {
	if len(s) < 1 || len(s) > 15 || !isDigits(s) {
		return false
	}
	ms, _ := strconv.ParseInt(s, 10, 64)
	return ms <= maxMillis
}

func malformedRecord(id, why string) error {
	return fmt.Errorf("%w: timer %q (%s): was it written by something other than timerq?", ErrMalformedRecord, id, why)
}

// decodeStored parses a record as it is stored in the timers hash,
// "<s|f|c>:<due>:<created>:<settled>:<payload>" (scripts/lua/includes/encode.lua),
// where a scheduled timer has no due and no settled time: its due time is
// the due set's score, given as due when hasDue. It accepts exactly what
// the scripts accept (scripts/lua/includes decode and score_ms): the claim
// quarantines a record if and only if decodeStored rejects it, which
// FuzzQuarantineMatchesDecoder checks.
func decodeStored(id, rec string, due float64, hasDue bool) (Timer, error) {
	f := strings.SplitN(rec, ":", 5)
	if len(f) != 5 || len(f[0]) != 1 {
		return Timer{}, malformedRecord(id, "wrong field count")
	}
	t := Timer{ID: id, Payload: []byte(f[4])}
	if !isMillis(f[2]) {
		return Timer{}, malformedRecord(id, "created time")
	}
	t.CreatedAt = fromMillis(atoi(f[2]))
	switch f[0] {
	case "s":
		if f[1] != "" || f[3] != "" {
			return Timer{}, malformedRecord(id, "a scheduled record holds no due or settled time")
		}
		if !hasDue {
			return Timer{}, malformedRecord(id, "scheduled without a due time")
		}
		// Any score in range: ms, with the µs as a fraction (score_ms).
		if !(due >= 0 && due < maxMillis+1) {
			return Timer{}, malformedRecord(id, "due score is not a due time")
		}
		t.State, t.Due = StateScheduled, fromScore(due)
		return t, nil
	case "f", "c":
		if !isMillis(f[1]) {
			return Timer{}, malformedRecord(id, "due time")
		}
		if !isMillis(f[3]) {
			return Timer{}, malformedRecord(id, "settled time")
		}
		t.Due = fromMillis(atoi(f[1]))
		if f[0] == "f" {
			t.State, t.FiredAt = StateFired, fromMillis(atoi(f[3]))
		} else {
			t.State, t.CancelledAt = StateCancelled, fromMillis(atoi(f[3]))
		}
		return t, nil
	}
	return Timer{}, malformedRecord(id, "state")
}
