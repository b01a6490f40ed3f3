package schedule_test

import (
	"errors"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/timerq/timerq/schedule"
)

func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	return loc
}

// occurrences lists the occurrences in (from, to].
func occurrences(s schedule.Schedule, from, to time.Time) []time.Time {
	var out []time.Time
	for t := s.Next(from); !t.IsZero() && !t.After(to); t = s.Next(t) {
		out = append(out, t)
	}
	return out
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestSpringForwardFiresOnceAtTheShiftedTime(t *testing.T) {
	loc := berlin(t)
	s, err := schedule.Parse("30 2 * * *", loc)
	if err != nil {
		t.Fatal(err)
	}
	// 2026-03-29: clocks go from 02:00 CET to 03:00 CEST; 02:30 does not exist.
	got := occurrences(s, utc("2026-03-27T12:00:00Z"), utc("2026-03-31T12:00:00Z"))
	want := []time.Time{
		utc("2026-03-28T01:30:00Z"), // 02:30 CET
		utc("2026-03-29T01:30:00Z"), // 03:30 CEST: 02:30 shifted by the hour the clock skipped
		utc("2026-03-30T00:30:00Z"), // 02:30 CEST
		utc("2026-03-31T00:30:00Z"),
	}
	assertTimes(t, got, want)
	if w := got[1].In(loc); w.Hour() != 3 || w.Minute() != 30 {
		t.Fatalf("spring-forward occurrence at %v local, want 03:30", w)
	}

	// robfig/cron alone skips that day: this is why Parse wraps it.
	raw, _ := cron.ParseStandard("30 2 * * *")
	raw.(*cron.SpecSchedule).Location = loc
	if n := raw.Next(utc("2026-03-28T12:00:00Z")); !n.Equal(utc("2026-03-30T00:30:00Z")) {
		t.Fatalf("robfig/cron changed: Next over the gap = %v; revisit the DST notes in schedule.go and docs", n)
	}
}

func TestFallBackFiresOnceForAFixedHour(t *testing.T) {
	loc := berlin(t)
	s, err := schedule.Parse("30 2 * * *", loc)
	if err != nil {
		t.Fatal(err)
	}
	// 2026-10-25: clocks go from 03:00 CEST back to 02:00 CET; 02:30 happens twice.
	got := occurrences(s, utc("2026-10-23T12:00:00Z"), utc("2026-10-26T12:00:00Z"))
	want := []time.Time{
		utc("2026-10-24T00:30:00Z"), // 02:30 CEST
		utc("2026-10-25T00:30:00Z"), // the first 02:30 (CEST) only
		utc("2026-10-26T01:30:00Z"), // 02:30 CET
	}
	assertTimes(t, got, want)

	raw, _ := cron.ParseStandard("30 2 * * *")
	raw.(*cron.SpecSchedule).Location = loc
	if n := raw.Next(utc("2026-10-25T00:30:00Z")); !n.Equal(utc("2026-10-25T01:30:00Z")) {
		t.Fatalf("robfig/cron changed: it no longer repeats 02:30 on fall-back (%v); revisit schedule.go", n)
	}
}

func TestFallBackKeepsBothHoursOfAnHourlySpec(t *testing.T) {
	loc := berlin(t)
	s, err := schedule.Parse("30 * * * *", loc)
	if err != nil {
		t.Fatal(err)
	}
	got := occurrences(s, utc("2026-10-24T23:00:00Z"), utc("2026-10-25T02:00:00Z"))
	want := []time.Time{utc("2026-10-24T23:30:00Z"), utc("2026-10-25T00:30:00Z"), utc("2026-10-25T01:30:00Z")}
	assertTimes(t, got, want)
	// And across spring-forward an hourly spec neither doubles nor skips.
	got = occurrences(s, utc("2026-03-28T23:00:00Z"), utc("2026-03-29T03:00:00Z"))
	want = []time.Time{utc("2026-03-28T23:30:00Z"), utc("2026-03-29T00:30:00Z"), utc("2026-03-29T01:30:00Z"), utc("2026-03-29T02:30:00Z")}
	assertTimes(t, got, want)
}

func TestCronWithSecondsAndTimeZone(t *testing.T) {
	s, err := schedule.Parse("*/15 * * * * *", nil)
	if err != nil {
		t.Fatal(err)
	}
	assertTimes(t, occurrences(s, utc("2026-01-01T00:00:00Z"), utc("2026-01-01T00:00:45Z")),
		[]time.Time{utc("2026-01-01T00:00:15Z"), utc("2026-01-01T00:00:30Z"), utc("2026-01-01T00:00:45Z")})

	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip(err)
	}
	s, err = schedule.Parse("0 9 * * MON-FRI", ny)
	if err != nil {
		t.Fatal(err)
	}
	// Friday 2026-01-02 09:00 EST, then Monday 2026-01-05.
	assertTimes(t, occurrences(s, utc("2026-01-02T00:00:00Z"), utc("2026-01-06T00:00:00Z")),
		[]time.Time{utc("2026-01-02T14:00:00Z"), utc("2026-01-05T14:00:00Z")})
}

func TestEveryIsAnchored(t *testing.T) {
	anchor := utc("2026-01-01T00:00:00Z")
	s, err := schedule.Every(90*time.Second, anchor)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Next(anchor.Add(-time.Hour)); !n.Equal(anchor) {
		t.Fatalf("Next before the anchor = %v, want the anchor", n)
	}
	// Late by 10 s: the next occurrence stays on the grid, it does not drift.
	if n := s.Next(anchor.Add(100 * time.Second)); !n.Equal(anchor.Add(180 * time.Second)) {
		t.Fatalf("Next = %v, want anchor+180s", n)
	}
	if n := s.Next(anchor.Add(90 * time.Second)); !n.Equal(anchor.Add(180 * time.Second)) {
		t.Fatalf("Next of an occurrence = %v, want the following one", n)
	}
}

func TestInvalidSpecs(t *testing.T) {
	for _, spec := range []string{"", "61 * * * *", "* * *", "CRON_TZ=UTC 0 9 * * *", "@every 10ms", "@sometimes"} {
		if _, err := schedule.Parse(spec, nil); !errors.Is(err, schedule.ErrInvalidSchedule) {
			t.Errorf("Parse(%q) error = %v, want ErrInvalidSchedule", spec, err)
		}
	}
	if _, err := schedule.Every(0, time.Time{}); !errors.Is(err, schedule.ErrInvalidSchedule) {
		t.Errorf("Every(0) error = %v", err)
	}
}

func assertTimes(t *testing.T, got, want []time.Time) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d occurrences %v, want %v", len(got), got, want)
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Fatalf("occurrence %d = %v, want %v (all: %v)", i, got[i].UTC(), want[i], got)
		}
	}
}
