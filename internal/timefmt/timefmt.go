// Package timefmt is the one way timerq's operator tools write and read a
// point in time: timerctl and the dashboard both print times with Format
// and read them with Parse, so any time one of them prints can be pasted
// into the other. It also holds the range a due time must lie in (MinDue,
// MaxDue), which package queue enforces, so that Parse accepts exactly the
// times a timer may be due at without importing queue: timefmt sits below
// the library (docs/development.md, "Floors").
package timefmt

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Layout is the one layout: RFC 3339 with milliseconds, in UTC
// (2026-12-03T15:46:21.026Z).
const Layout = "2006-01-02T15:04:05.000Z07:00"

// LayoutMicro is Layout with microseconds (2026-12-03T15:46:21.026512Z),
// for a time that has some: a scheduled timer's due time is kept to the
// microsecond.
const LayoutMicro = "2006-01-02T15:04:05.000000Z07:00"

// Format writes t in Layout, in UTC: milliseconds, truncated, as every
// answer of the API and timerctl shows times (the contract's format).
func Format(t time.Time) string { return t.UTC().Format(Layout) }

// FormatExact writes t in Layout, in UTC, or in LayoutMicro when t has
// microseconds beyond the millisecond: for what is read back, such as
// timerctl export's due times, where a time truncated to the millisecond
// would make the restored timer fire up to 1 ms early.
func FormatExact(t time.Time) string {
	if t.Nanosecond()%int(time.Millisecond) >= int(time.Microsecond) {
		return t.UTC().Format(LayoutMicro)
	}
	return t.UTC().Format(Layout)
}

// Relative says how far t is from now: "in " and dur(t-now), dur(now-t)
// and " ago", or "now" when they are at most within apart; empty when t
// is zero. The tools differ in dur on purpose: timerctl's two units read
// at a glance, the dashboard rounds by magnitude, and timerqtest's
// failure messages keep every digit.
func Relative(t, now time.Time, within time.Duration, dur func(time.Duration) string) string {
	if t.IsZero() {
		return ""
	}
	switch d := t.Sub(now); {
	case d > within:
		return "in " + dur(d)
	case d < -within:
		return dur(-d) + " ago"
	}
	return "now"
}

// Error says why a time was refused and what to write instead; callers
// frame it with the input and where it came from.
type Error struct {
	Problem string // follows the quoted input: "is not a time"
	Fix     string
}

func (e *Error) Error() string { return e.Problem + ": " + e.Fix }

// MinDue and MaxDue bound a due time: 1970-01-01 to 9999-12-31 UTC, to
// the millisecond a timer's record keeps. queue.ValidateDue refuses a time
// outside them, and so does Parse.
var (
	MinDue = time.Unix(0, 0).UTC()
	MaxDue = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)
)

// maxUnixSeconds is 9999-12-31T23:59:59Z, the last second a due time may have.
const maxUnixSeconds = 253402300799

// Fix is what to write instead of a string that is not a time.
const Fix = "use RFC 3339 (2026-12-02T19:00:00Z) or Unix time with its unit (1796238000s or 1796238000000ms)"

// Parse reads a time: RFC 3339 (fractions allowed, an offset required), or
// Unix time with an explicit unit, seconds ("1796238000s") or milliseconds
// ("1796238000000ms"). A bare number is refused rather than guessed: read
// as the wrong unit, seconds become a time in January 1970 (a timer that
// fires at once) and milliseconds one thousands of years away. The time
// must lie in 1970-01-01 to 9999-12-31, as due times do. Errors are *Error.
func Parse(s string) (time.Time, error) {
	var t time.Time
	switch {
	case IsBareNumber(s):
		return time.Time{}, BareNumber(s, "%ss", "%sms")
	case strings.HasSuffix(s, "ms") && IsBareNumber(s[:len(s)-2]):
		ms, err := strconv.ParseInt(s[:len(s)-2], 10, 64)
		if err != nil {
			return time.Time{}, outOfRange()
		}
		t = time.UnixMilli(ms).UTC()
	case strings.HasSuffix(s, "s") && IsBareNumber(s[:len(s)-1]):
		sec, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
		if err != nil || sec > maxUnixSeconds {
			return time.Time{}, outOfRange()
		}
		t = time.Unix(sec, 0).UTC()
	default:
		var err error
		if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return time.Time{}, &Error{"is not a time", Fix}
		}
	}
	if t.Before(MinDue) || t.After(MaxDue) {
		return time.Time{}, outOfRange()
	}
	return t, nil
}

func outOfRange() *Error {
	return &Error{"is outside 1970-01-01 to 9999-12-31", "use a time in that range"}
}

// BareNumber refuses the number s, showing both readings in the caller's
// syntax (secForm and msForm are formats of s, such as "%ss" and "%sms").
func BareNumber(s, secForm, msForm string) *Error {
	reading := func(unit string) string {
		if t, err := Parse(s + unit); err == nil {
			return Format(t)
		}
		return "out of range"
	}
	return &Error{
		Problem: "is a number without a unit",
		Fix: fmt.Sprintf("write "+secForm+" for Unix seconds (%s) or "+msForm+" for Unix milliseconds (%s), or an RFC 3339 time",
			s, reading("s"), s, reading("ms")),
	}
}

// IsBareNumber reports whether s is digits only: a number without a unit,
// which Parse refuses.
func IsBareNumber(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
