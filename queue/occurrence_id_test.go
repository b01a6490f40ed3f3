package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestPlainTimerMayNotTakeAnOccurrenceID: an ID of the form
// "<schedule>@<ms>" is refused for a plain timer by Schedule, ScheduleIn
// and ScheduleBatch (which then writes nothing), and by Restore while its
// schedule does not exist, so that a later schedule of that ID cannot
// adopt a planted timer as its occurrence. Restore takes it once the
// schedule exists, and IDs that merely contain '@' stay plain.
func TestPlainTimerMayNotTakeAnOccurrenceID(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q := newQueue(t, b, queue.Options{})
		due := time.Now().Add(time.Hour)
		// The first occurrence of the schedule "x" created below.
		anchor := time.Now().Truncate(time.Minute)
		planted := queue.OccurrenceID("x", anchor.Add(10*time.Minute))
		isRefusal := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, queue.ErrOccurrenceID) || !errors.Is(err, queue.ErrInvalidID) ||
				!strings.Contains(err.Error(), "reserved for occurrences of recurring schedules") ||
				!strings.Contains(err.Error(), `of schedule "x"`) {
				t.Fatalf("%s %s: %v; want ErrOccurrenceID (an ErrInvalidID) naming the rule and the schedule", what, planted, err)
			}
		}
		_, err := q.Schedule(ctx, planted, due, []byte("planted"))
		isRefusal("Schedule", err)
		_, err = q.ScheduleIn(ctx, planted, time.Hour, nil)
		isRefusal("ScheduleIn", err)
		_, err = q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "fine", Due: due}, {ID: planted, Due: due}})
		isRefusal("ScheduleBatch", err)
		now := time.Now()
		_, err = q.Restore(ctx, []queue.Timer{{ID: "fine2", State: queue.StateScheduled, Due: due, CreatedAt: now},
			{ID: planted, State: queue.StateScheduled, Due: due, CreatedAt: now, Payload: []byte("planted")}})
		isRefusal("Restore", err)
		for _, id := range []string{"fine", "fine2", planted} {
			if _, err := q.Get(ctx, id); !errors.Is(err, queue.ErrNotFound) {
				t.Fatalf("Get(%q) after the refusals = %v; want nothing written", id, err)
			}
		}

		// Not an occurrence's form: plain timers as before.
		for _, id := range []string{"team@example.com", "x@", "@123", "x@12a", "x@1234567890123456"} {
			if _, err := q.Schedule(ctx, id, due, nil); err != nil {
				t.Fatalf("Schedule(%q) = %v; want it accepted", id, err)
			}
		}

		// The schedule of that ID arms its own occurrences, with its payload,
		// the planted ID among them.
		info, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "x", Every: 10 * time.Minute, Anchor: anchor, Payload: []byte("mine")})
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Pending) == 0 || info.Pending[0].ID != planted {
			t.Fatalf("pending %v; want %s first", info.Pending, planted)
		}
		for _, o := range info.Pending {
			tm, err := q.Get(ctx, o.ID)
			if err != nil || string(tm.Payload) != "mine" {
				t.Fatalf("occurrence %s = %+v, %v; want the schedule's payload", o.ID, tm, err)
			}
		}
		// Now that x exists, Restore takes an occurrence of it (an import
		// into a namespace that holds the schedule).
		extra := queue.OccurrenceID("x", due.Add(24*time.Hour).Truncate(time.Minute))
		res, err := q.Restore(ctx, []queue.Timer{{ID: extra, State: queue.StateFired, Due: due, CreatedAt: now, FiredAt: due}})
		if err != nil || !res[0].Created {
			t.Fatalf("Restore of an occurrence of an existing schedule = %+v, %v", res, err)
		}
	})
}

// TestRestoreRecurringWithChecksItsOccurrences: RecurringTimers.RestoreWith takes
// only occurrences of its own schedule, and writes nothing when one is not.
func TestRestoreRecurringWithChecksItsOccurrences(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		src := newQueue(t, b, queue.Options{})
		in, _, err := src.Recurring().Put(ctx, queue.Recurring{ID: "r", Every: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		occ, err := src.Get(ctx, in.Pending[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		other := occ
		other.ID = queue.OccurrenceID("other", in.Pending[0].Nominal)
		dst := newQueue(t, b, queue.Options{})
		if _, _, err := dst.Recurring().RestoreWith(ctx, in, []queue.Timer{occ, other}); !errors.Is(err, queue.ErrInvalidID) ||
			!strings.Contains(err.Error(), `"other@`) {
			t.Fatalf("RestoreRecurringWith with another schedule's occurrence = %v; want ErrInvalidID naming it", err)
		}
		if _, err := dst.Recurring().Get(ctx, "r"); !errors.Is(err, queue.ErrRecurringNotFound) {
			t.Fatalf("GetRecurring after the refusal = %v; want nothing written", err)
		}
		if _, err := dst.Get(ctx, occ.ID); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("Get(%s) after the refusal = %v; want nothing written", occ.ID, err)
		}
	})
}
