package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
)

// A timer is validated once per call, at the public entry, whether or not
// the call is coalesced: the paths below it (ScheduleBatch, the coalescer,
// scheduleBatch) take the validated value.
func TestScheduleValidatesOnce(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		for _, coalesce := range []bool{false, true} {
			q, err := New(b.Client, Options{Namespace: redistest.Namespace(t), CoalesceSchedules: coalesce})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			seen := map[string]int{}
			q.validated = func(n NewTimer) { mu.Lock(); seen[n.ID]++; mu.Unlock() }
			ctx := context.Background()
			if _, err := q.Schedule(ctx, "one", time.Now().Add(time.Hour), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := q.ScheduleIn(ctx, "in", time.Hour, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := q.ScheduleBatch(ctx, []NewTimer{NewTimerIn("b1", time.Hour, nil), NewTimerIn("b2", time.Hour, nil)}); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"one", "in", "b1", "b2"} {
				if seen[id] != 1 {
					t.Errorf("coalesce=%v: timer %q validated %d times in one call, want 1", coalesce, id, seen[id])
				}
			}
			q.Close()
		}
	})
}
