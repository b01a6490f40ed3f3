// Package schedule says when a recurring timer fires next: a Schedule maps
// an instant to the next occurrence after it. Parse reads cron specs (with an
// optional seconds field, and descriptors such as @daily) through
// github.com/robfig/cron/v3; Every is a fixed interval from an anchor.
//
// Time zones and daylight saving follow cron's rules rather than
// robfig/cron's raw output, which skips a wall time that falls in a
// spring-forward gap and fires twice on a wall time that repeats at
// fall-back (see Parse).
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ErrInvalidSchedule means a cron spec or an interval cannot be used.
var ErrInvalidSchedule = errors.New("timerq: invalid schedule")

// Schedule gives the occurrences of a recurring timer. It has the shape of
// river's PeriodicSchedule and robfig/cron's Schedule.
type Schedule interface {
	// Next returns the first occurrence strictly after t, or the zero time
	// if there is none.
	Next(t time.Time) time.Time
}

// parser accepts five fields, or six with seconds first, and descriptors.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse parses a cron spec: "m h dom mon dow", "s m h dom mon dow", or a
// descriptor (@yearly, @monthly, @weekly, @daily, @hourly, @every <d>).
// Wall times are read in loc (nil means UTC); a CRON_TZ= or TZ= prefix in
// the spec is refused, since the location is a separate field.
//
// Daylight saving, as Vixie cron does it:
//   - A wall time that a spring-forward transition skips fires once, at the
//     instant it has under the offset before the transition, i.e. shifted
//     by the gap: a daily "30 2 * * *" in Europe/Berlin fires at 03:30 CEST
//     on the last Sunday of March. Where the shifted instant is also a
//     regular occurrence (as for "30 * * * *"), it is one occurrence.
//   - A wall time that a fall-back transition repeats fires once, at its
//     first instance, unless the spec's hour field is "*": then the hour
//     is a real hour apart and fires again, as an hourly job should.
//
// robfig/cron alone (v3.0.1) does neither: it skips the gap's occurrence
// and fires the repeated one twice; schedule_test.go pins both.
func Parse(spec string, loc *time.Location) (Schedule, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, fmt.Errorf("%w: the cron spec is empty; use e.g. \"0 9 * * MON-FRI\" or \"@every 90s\"", ErrInvalidSchedule)
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, fmt.Errorf("%w: %q sets a time zone in the spec; pass the zone separately (--tz, Recurring.Location)", ErrInvalidSchedule, spec)
	}
	if loc == nil {
		loc = time.UTC
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: cron spec %q: %v; use 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or a descriptor such as @daily", ErrInvalidSchedule, spec, err)
	}
	switch s := s.(type) {
	case *cron.SpecSchedule:
		s.Location = loc
		return &cronSchedule{spec: s, loc: loc}, nil
	case cron.ConstantDelaySchedule:
		// robfig/cron silently rounds a shorter @every up to 1s.
		if d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(spec, "@every"))); err != nil || d < time.Second {
			return nil, fmt.Errorf("%w: %q: @every needs at least 1s; give a shorter interval as the schedule's Every instead of a spec", ErrInvalidSchedule, spec)
		}
		return s, nil
	}
	return s, nil
}

// starBit marks a robfig/cron field written as "*".
const starBit = 1 << 63

// cronSchedule corrects robfig/cron's handling of daylight saving.
type cronSchedule struct {
	spec *cron.SpecSchedule
	loc  *time.Location
}

// Next implements Schedule.
func (c *cronSchedule) Next(t time.Time) time.Time {
	for range 1000 { // bounded: each pass moves t forward
		n := c.spec.Next(t)
		if n.IsZero() {
			return n
		}
		if g := c.gapOccurrence(t, n); !g.IsZero() {
			n = g
		}
		if c.spec.Hour&starBit == 0 && c.repeated(n) {
			t = n
			continue
		}
		return n
	}
	return time.Time{}
}

// gapOccurrence returns the earliest occurrence in (t, n) that robfig/cron
// skipped because its wall time fell in a spring-forward gap, or zero.
func (c *cronSchedule) gapOccurrence(t, n time.Time) time.Time {
	cur := t.In(c.loc)
	for range 100 {
		_, end := cur.ZoneBounds()
		if end.IsZero() || !end.Before(n) {
			return time.Time{}
		}
		_, before := cur.Zone()
		_, after := end.Zone()
		if gap := time.Duration(after-before) * time.Second; gap > 0 {
			// Wall times of the gap, read with the old offset, are the
			// shifted instants [end, end+gap).
			old := *c.spec
			old.Location = time.FixedZone("", before)
			if m := old.Next(end.Add(-time.Nanosecond).In(old.Location)); m.Before(end.Add(gap)) && m.After(t) && m.Before(n) {
				return m.In(c.loc)
			}
		}
		cur = end
	}
	return time.Time{}
}

// repeated reports whether n's wall time already happened earlier, because
// a fall-back transition turned the clock back over it.
func (c *cronSchedule) repeated(n time.Time) bool {
	n = n.In(c.loc)
	_, off := n.Zone()
	start, _ := n.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, prev := start.Add(-time.Nanosecond).Zone()
	back := time.Duration(prev-off) * time.Second
	if back <= 0 || n.Sub(start) >= back {
		return false
	}
	m := n.Add(-back).In(c.loc)
	y1, mo1, d1 := m.Date()
	y2, mo2, d2 := n.Date()
	return y1 == y2 && mo1 == mo2 && d1 == d2 && m.Hour() == n.Hour() && m.Minute() == n.Minute() && m.Second() == n.Second()
}

// Every returns a fixed interval d (at least 1 ms) whose occurrences are
// anchor + k*d for every integer k, so they do not drift however late the
// previous one fired. Daylight saving does not apply: an interval is
// elapsed time.
func Every(d time.Duration, anchor time.Time) (Schedule, error) {
	if d < time.Millisecond {
		return nil, fmt.Errorf("%w: interval %v is below 1ms", ErrInvalidSchedule, d)
	}
	return interval{d: d, anchor: anchor}, nil
}

type interval struct {
	d      time.Duration
	anchor time.Time
}

// Next implements Schedule.
func (i interval) Next(t time.Time) time.Time {
	if t.Before(i.anchor) {
		return i.anchor
	}
	k := t.Sub(i.anchor)/i.d + 1
	return i.anchor.Add(k * i.d)
}
