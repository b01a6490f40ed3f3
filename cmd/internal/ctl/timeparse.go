package ctl

import (
	"time"

	"github.com/timerq/timerq/internal/timefmt"
)

// timeError says why a TIME or DURATION was refused, and what to write
// instead; the flag parser and the import line parser each frame it.
type timeError struct {
	problem string // follows the quoted input: "is not a time"
	fix     string
}

func (e *timeError) Error() string { return e.problem + ": " + e.fix }

const timeFix = timefmt.Fix

// isDigits reports whether s is a number without a unit.
func isDigits(s string) bool { return timefmt.IsBareNumber(s) }

// parseInstant parses a TIME by timefmt.Parse's rules, the dashboard's
// too: RFC 3339 (fractions allowed), or Unix time with an explicit unit,
// seconds ("1796238000s") or milliseconds ("1796238000000ms"); a bare
// number is refused rather than guessed.
func parseInstant(s string) (time.Time, error) {
	t, err := timefmt.Parse(s)
	if err != nil {
		e := err.(*timefmt.Error)
		return time.Time{}, &timeError{e.Problem, e.Fix}
	}
	return t, nil
}

// bareNumberError refuses the number s, showing both readings in the
// caller's syntax (secForm and msForm are formats of s).
func bareNumberError(s, secForm, msForm string) error {
	e := timefmt.BareNumber(s, secForm, msForm)
	return &timeError{e.Problem, e.Fix}
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
