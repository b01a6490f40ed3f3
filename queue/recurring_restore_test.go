package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestRestoreRecurringAfterItsOccurrences: an import restores the
// occurrence timers first, then the schedule, in one RecurringTimers.RestoreWith
// (timerctl export writes them in that order). The restore keeps those occurrences, creates nothing
// twice and keeps the exported count, also for an occurrence that fired in
// between.
func TestRestoreRecurringAfterItsOccurrences(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		src := newQueue(t, b, queue.Options{})
		in, _, err := src.Recurring().Put(ctx, queue.Recurring{ID: "r", Every: time.Hour, MaxCount: 6, Overlap: queue.OverlapSkip})
		if err != nil {
			t.Fatal(err)
		}
		in.Count = 5 // as if 3 had fired before the export
		var timers []queue.Timer
		for _, o := range in.Pending {
			tm, err := src.Get(ctx, o.ID)
			if err != nil {
				t.Fatal(err)
			}
			timers = append(timers, tm)
		}
		// The second one fired in the new namespace before its schedule
		// was restored.
		timers[1].State, timers[1].FiredAt = queue.StateFired, timers[1].Due
		dst := newQueue(t, b, queue.Options{})
		// Restore alone refuses them: their schedule does not exist yet.
		if _, err := dst.Restore(ctx, timers); !errors.Is(err, queue.ErrOccurrenceID) {
			t.Fatalf("Restore of occurrences without their schedule = %v, want ErrOccurrenceID", err)
		}
		created, res, err := dst.Recurring().RestoreWith(ctx, in, timers)
		if err != nil || !created || len(res) != 2 || !res[0].Created || !res[1].Created {
			t.Fatalf("RestoreRecurringWith = %v, %+v, %v", created, res, err)
		}
		got := getRec(t, dst, "r")
		if got.Count != 5 || len(got.Pending) != 1 || got.Pending[0].ID != in.Pending[0].ID || got.Overlap != queue.OverlapSkip {
			t.Fatalf("restored count %d pending %v overlap %q; want 5, [%s], skip", got.Count, got.Pending, got.Overlap, in.Pending[0].ID)
		}
		if tm, err := dst.Get(ctx, in.Pending[0].ID); err != nil || !tm.CreatedAt.Equal(timers[0].CreatedAt) {
			t.Fatalf("occurrence %+v, %v: want it kept as restored, created %v", tm, err, timers[0].CreatedAt)
		}
		// MaxCount 6, 5 counted, 1 pending: one more occurrence to come.
		if len(got.Next) != 2 {
			t.Fatalf("next %v, want the pending one and 1 more under MaxCount", got.Next)
		}
		if st, err := dst.Stats(ctx); err != nil || st.Scheduled != 1 {
			t.Fatalf("stats %+v, %v; want exactly 1 scheduled timer", st, err)
		}
	})
}
