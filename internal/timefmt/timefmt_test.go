package timefmt

import (
	"strings"
	"testing"
	"time"
)

// TestFormatParsesBack: every time Format prints, Parse reads back to the
// millisecond, and Parse keeps timerctl's rules: RFC 3339 or Unix time with
// its unit, never a bare number nor the dashboard's old space-separated form.
func TestFormatParsesBack(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 12, 3, 15, 46, 21, 26e6, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 1e6, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC),
		time.Date(2026, 12, 3, 16, 46, 21, 0, time.FixedZone("CET", 3600)),
	} {
		s := Format(tm)
		if s != tm.UTC().Format("2006-01-02T15:04:05.000Z") {
			t.Errorf("Format(%v) = %q, not RFC 3339 UTC with milliseconds", tm, s)
		}
		got, err := Parse(s)
		if err != nil || !got.Equal(tm) {
			t.Errorf("Parse(Format(%v)) = %v, %v", tm, got, err)
		}
	}
	for in, want := range map[string]time.Time{
		"1796238000s":               time.Unix(1796238000, 0).UTC(),
		"1796238000000ms":           time.UnixMilli(1796238000000).UTC(),
		"2026-12-03T16:46:21+01:00": time.Date(2026, 12, 3, 15, 46, 21, 0, time.UTC),
	} {
		if got, err := Parse(in); err != nil || !got.Equal(want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, problem := range map[string]string{
		"1796238000":               "is a number without a unit",
		"2026-12-03 15:46:21.026Z": "is not a time",
		"2026-12-03T15:46:21":      "is not a time", // no offset: which zone?
		"99999999999999s":          "is outside",
		// The range of a due time (MinDue, MaxDue), as queue.ValidateDue
		// has it: the millisecond after the last, and the one before 1970.
		"253402300800000ms":         "is outside",
		"9999-12-31T23:59:59.9995Z": "is outside",
		"1969-12-31T23:59:59.999Z":  "is outside",
		"":                          "is not a time",
	} {
		_, err := Parse(in)
		e, ok := err.(*Error)
		if !ok || !strings.HasPrefix(e.Problem, problem) || e.Fix == "" {
			t.Errorf("Parse(%q) = %v, want *Error %q with a fix", in, err, problem)
		}
	}
	if e := BareNumber("1796238000", "%ss", "%sms"); !strings.Contains(e.Fix, "1796238000s for Unix seconds (2026-12-02T19:00:00.000Z)") {
		t.Errorf("bare number fix %q does not show the seconds reading", e.Fix)
	}
}

// TestFormatExactKeepsMicroseconds: FormatExact writes milliseconds, as
// Format does, unless the time has microseconds beyond them; either way
// Parse reads back the time to the microsecond.
func TestFormatExactKeepsMicroseconds(t *testing.T) {
	for tm, want := range map[time.Time]string{
		time.Date(2031, 5, 6, 7, 8, 9, 123_456_789, time.UTC): "2031-05-06T07:08:09.123456Z",
		time.Date(2031, 5, 6, 7, 8, 9, 123_000_999, time.UTC): "2031-05-06T07:08:09.123Z",
		time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC):           "2031-05-06T07:08:09.000Z",
	} {
		if s := FormatExact(tm); s != want {
			t.Errorf("FormatExact(%v) = %q, want %q", tm, s, want)
		}
		if got, err := Parse(FormatExact(tm)); err != nil || !got.Equal(tm.Truncate(time.Microsecond)) {
			t.Errorf("Parse(FormatExact(%v)) = %v, %v", tm, got, err)
		}
		if s := Format(tm); len(s) != len("2006-01-02T15:04:05.000Z") {
			t.Errorf("Format(%v) = %q, want milliseconds", tm, s)
		}
	}
}

// TestRelative: "in", "ago" and "now" by the window each tool passes,
// at and past its edges; the distance written by the tool's own dur;
// nothing for a zero time.
func TestRelative(t *testing.T) {
	now := time.Date(2026, 12, 3, 15, 46, 21, 0, time.UTC)
	for _, c := range []struct {
		d, within time.Duration
		want      string
	}{
		{0, 0, "now"},
		{time.Nanosecond, 0, "in 1ns"},
		{-90 * time.Second, 0, "1m30s ago"},
		{time.Second, time.Second, "now"},
		{-time.Second, time.Second, "now"},
		{time.Second + time.Nanosecond, time.Second, "in 1.000000001s"},
		{-time.Second - time.Nanosecond, time.Second, "1.000000001s ago"},
		{500 * time.Millisecond, 500 * time.Millisecond, "now"},
		{-501 * time.Millisecond, 500 * time.Millisecond, "501ms ago"},
	} {
		if got := Relative(now.Add(c.d), now, c.within, time.Duration.String); got != c.want {
			t.Errorf("Relative(now%+v, within %v) = %q, want %q", c.d, c.within, got, c.want)
		}
	}
	if got := Relative(time.Time{}, now, time.Second, time.Duration.String); got != "" {
		t.Errorf("Relative(zero) = %q, want empty", got)
	}
	short := func(d time.Duration) string { return d.Round(time.Minute).String() }
	if got := Relative(now.Add(3*time.Hour+20*time.Second), now, 0, short); got != "in 3h0m0s" {
		t.Errorf("Relative with a rounding dur = %q, want in 3h0m0s", got)
	}
}
