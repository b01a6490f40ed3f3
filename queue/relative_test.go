package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// serverClockBounds runs fn between two readings of the server's clock.
func serverClockBounds(t *testing.T, b *redistest.Backend, fn func()) (before, after time.Time) {
	t.Helper()
	before = serverNow(t, b)
	fn()
	return before, serverNow(t, b)
}

func TestScheduleInCountsFromTheServerClock(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		if b.Mini != nil {
			// A server clock a year away from this process's, and 0.7 ms
			// past a millisecond: 3 s later is ...03.0007, to the µs.
			b.Mini.SetTime(time.Date(2030, 1, 1, 0, 0, 0, 700_000, time.UTC))
			res, err := q.ScheduleIn(ctx, "in", 3*time.Second, nil)
			want := time.Date(2030, 1, 1, 0, 0, 3, 700_000, time.UTC)
			if err != nil || !res.Timer.Due.Equal(want) || !res.Created {
				t.Fatalf("ScheduleIn = %+v, %v; want due %v", res, err, want)
			}
			got, err := q.RescheduleIn(ctx, "in", 1500*time.Microsecond)
			want = time.Date(2030, 1, 1, 0, 0, 0, 2_200_000, time.UTC) // .7 + 1.5 = 2.2 ms
			if err != nil || !got.Due.Equal(want) {
				t.Fatalf("RescheduleIn = %+v, %v; want due %v", got, err, want)
			}
			// 1 ns is rounded up to the µs, never down to "now".
			b.Mini.SetTime(time.Date(2030, 1, 1, 0, 0, 1, 0, time.UTC))
			batch, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "ns", In: time.Nanosecond}, queue.NewTimerIn("zero", 0, nil)})
			if err != nil || !batch[0].Timer.Due.Equal(time.Date(2030, 1, 1, 0, 0, 1, 1_000, time.UTC)) ||
				!batch[1].Timer.Due.Equal(time.Date(2030, 1, 1, 0, 0, 1, 0, time.UTC)) {
				t.Fatalf("ScheduleBatch In 1ns and 0 = %+v, %v", batch, err)
			}
			return
		}
		var res queue.ScheduleResult
		var err error
		before, after := serverClockBounds(t, b, func() { res, err = q.ScheduleIn(ctx, "in", 3*time.Second, []byte("p")) })
		if err != nil {
			t.Fatal(err)
		}
		if d := res.Timer.Due; d.Before(before.Add(3*time.Second)) || d.After(after.Add(3*time.Second+time.Millisecond)) {
			t.Fatalf("due %v is not 3 s after the server clock (%v to %v)", d, before, after)
		}
		var got queue.Timer
		before, after = serverClockBounds(t, b, func() { got, err = q.RescheduleIn(ctx, "in", time.Minute) })
		if err != nil {
			t.Fatal(err)
		}
		if d := got.Due; d.Before(before.Add(time.Minute)) || d.After(after.Add(time.Minute+time.Millisecond)) {
			t.Fatalf("rescheduled due %v is not 1 m after the server clock (%v to %v)", d, before, after)
		}
	})
}

func TestRelativeDueIsValidated(t *testing.T) {
	m, c := redistest.Mini(t)
	q, err := queue.New(c, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	for name, nt := range map[string]queue.NewTimer{
		"negative In":  {ID: "a", In: -time.Second},
		"Due and In":   {ID: "a", In: time.Second, Due: time.Now()},
		"neither":      {ID: "a"},
		"negative via": queue.NewTimerIn("a", -1, nil),
	} {
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{nt}); !errors.Is(err, queue.ErrInvalidDue) {
			t.Errorf("%s: err = %v, want ErrInvalidDue", name, err)
		}
	}
	if _, err := q.ScheduleIn(ctx, "a", -time.Millisecond, nil); !errors.Is(err, queue.ErrInvalidDue) {
		t.Errorf("ScheduleIn negative: %v", err)
	}
	if _, err := q.RescheduleIn(ctx, "a", -time.Millisecond); !errors.Is(err, queue.ErrInvalidDue) {
		t.Errorf("RescheduleIn negative: %v", err)
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Fatalf("invalid input wrote %v", keys)
	}
}

func TestSubMillisecondDueIsKept(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		base := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
		res, err := q.Schedule(ctx, "half", base.Add(500*time.Microsecond), nil)
		if err != nil || !res.Timer.Due.Equal(base.Add(500*time.Microsecond)) {
			t.Fatalf("Schedule at +0.5 ms = %+v, %v; want due %v", res, err, base.Add(500*time.Microsecond))
		}
		if got, err := q.Get(ctx, "half"); err != nil || !got.Due.Equal(base.Add(500*time.Microsecond)) {
			t.Fatalf("Get = %+v, %v; want due +0.5 ms", got, err)
		}
		// Below the microsecond, rounded up.
		got, err := q.Reschedule(ctx, "half", base.Add(2*time.Millisecond+time.Nanosecond))
		if err != nil || !got.Due.Equal(base.Add(2*time.Millisecond+time.Microsecond)) {
			t.Fatalf("Reschedule at +2.000001 ms = %+v, %v", got, err)
		}
		got, err = q.Reschedule(ctx, "half", base.Add(500*time.Microsecond))
		if err != nil || !got.Due.Equal(base.Add(500*time.Microsecond)) {
			t.Fatalf("Reschedule back = %+v, %v", got, err)
		}
		// List from +0.5 ms starts at the timer due then, not at one due at
		// +0 ms, which is before it; List to +0.499 ms stops before it.
		if _, err := q.Schedule(ctx, "zero", base, nil); err != nil {
			t.Fatal(err)
		}
		page, err := q.List(ctx, queue.ListOptions{DueFrom: base.Add(500 * time.Microsecond)})
		if err != nil || len(page.Timers) != 1 || page.Timers[0].ID != "half" {
			t.Fatalf("List from +0.5 ms = %+v, %v; want only half", page.Timers, err)
		}
		page, err = q.List(ctx, queue.ListOptions{DueTo: base.Add(499 * time.Microsecond)})
		if err != nil || len(page.Timers) != 1 || page.Timers[0].ID != "zero" {
			t.Fatalf("List to +0.499 ms = %+v, %v; want only zero", page.Timers, err)
		}
		// A cursor between the two, inside one millisecond, pages on.
		page, err = q.List(ctx, queue.ListOptions{Limit: 1})
		if err != nil || len(page.Timers) != 1 || page.Timers[0].ID != "zero" || page.NextCursor == "" {
			t.Fatalf("List page 1 = %+v, %v", page, err)
		}
		page, err = q.List(ctx, queue.ListOptions{Limit: 1, Cursor: page.NextCursor})
		if err != nil || len(page.Timers) != 1 || page.Timers[0].ID != "half" {
			t.Fatalf("List page 2 = %+v, %v", page, err)
		}
		if _, err := q.Cancel(ctx, "zero"); err != nil {
			t.Fatal(err)
		}
		if b.Mini == nil {
			return
		}
		// At +0.3 ms and +0.499 ms by the server clock the timer due at
		// +0.5 ms is not due yet; at +0.5 ms it is, not a millisecond later.
		for _, at := range []time.Duration{300 * time.Microsecond, 499 * time.Microsecond} {
			b.Mini.SetTime(base.Add(at))
			if f := claimAll(t, q); len(f) != 0 {
				t.Fatalf("fired %+v at +%v, before its due time +0.5 ms", f, at)
			}
		}
		b.Mini.SetTime(base.Add(500 * time.Microsecond))
		f := claimAll(t, q)
		if len(f) != 1 || !f[0].Due.Equal(base) || !f[0].FiredAt.Equal(base) {
			t.Fatalf("fired %+v at +0.5 ms, want the timer, due and fired at the millisecond %v", f, base)
		}
		// Settled, it keeps whole milliseconds: due floored, as TIME is for the fire time.
		if got, err := q.Get(ctx, "half"); err != nil || !got.Due.Equal(base) || !got.FiredAt.Equal(base) {
			t.Fatalf("Get after the fire = %+v, %v", got, err)
		}
	})
}
