package ctl

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/timerq/timerq/queue"
)

// timeError says why a TIME or DURATION was refused, and what to write
// instead; the flag parser and the import line parser each frame it.
type timeError struct {
	problem string // follows the quoted input: "is not a time"
	fix     string
}

func (e *timeError) Error() string { return e.problem + ": " + e.fix }

// maxUnixSeconds is 9999-12-31T23:59:59Z, the last second a due time may have.
const maxUnixSeconds = 253402300799

const timeFix = "use RFC 3339 (2026-12-02T19:00:00Z) or Unix time with its unit (1796238000s or 1796238000000ms)"

// parseInstant parses a TIME: RFC 3339 (fractions allowed), or Unix time
// with an explicit unit, seconds ("1796238000s") or milliseconds
// ("1796238000000ms"). A bare number is refused rather than guessed: read as
// the wrong unit, seconds become a time in January 1970 (a timer that fires
// at once) and milliseconds one thousands of years away.
func parseInstant(s string) (time.Time, error) {
	var t time.Time
	switch {
	case isDigits(s):
		return time.Time{}, bareNumberError(s, "%ss", "%sms")
	case strings.HasSuffix(s, "ms") && isDigits(s[:len(s)-2]):
		ms, err := strconv.ParseInt(s[:len(s)-2], 10, 64)
		if err != nil {
			return time.Time{}, outOfRange()
		}
		t = time.UnixMilli(ms).UTC()
	case strings.HasSuffix(s, "s") && isDigits(s[:len(s)-1]):
		sec, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
		if err != nil || sec > maxUnixSeconds {
			return time.Time{}, outOfRange()
		}
		t = time.Unix(sec, 0).UTC()
	default:
		var err error
		if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return time.Time{}, &timeError{"is not a time", timeFix}
		}
	}
	if queue.ValidateDue(t) != nil {
		return time.Time{}, outOfRange()
	}
	return t, nil
}

func outOfRange() error {
	return &timeError{"is outside 1970-01-01 to 9999-12-31", "use a time in that range"}
}

// bareNumberError refuses the number s, showing both readings in the
// caller's syntax (secForm and msForm are formats of s).
func bareNumberError(s, secForm, msForm string) error {
	reading := func(unit string) string {
		if t, err := parseInstant(s + unit); err == nil {
			return fmtJSONTime(t)
		}
		return "out of range"
	}
	return &timeError{
		problem: "is a number without a unit",
		fix: fmt.Sprintf("write "+secForm+" for Unix seconds (%s) or "+msForm+" for Unix milliseconds (%s), or an RFC 3339 time",
			s, reading("s"), s, reading("ms")),
	}
}

func isDigits(s string) bool {
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

// parseDelay parses a DURATION: Go's syntax, 0 or more.
func parseDelay(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &timeError{"is not a duration", "use Go's syntax, e.g. 90s, 5m or 1h30m"}
	}
	if d < 0 {
		return 0, &timeError{"is negative", "use a duration of 0 or more, or --at for a time in the past"}
	}
	return d, nil
}
