package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestCountersCollectorExportsDeadlineDeadLetters: a fire that a consumer
// group's lease dead-lettered because its deadline had passed shows in
// timerq_namespace_deadline_dead_letters_total, read from Redis.
func TestCountersCollectorExportsDeadlineDeadLetters(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q, err := queue.New(b.Client, queue.Options{Namespace: redistest.Namespace(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		due := time.Now().Add(-time.Minute)
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "late", Due: due, FireWithin: time.Second},
			{ID: "plain", Due: due}}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Engine().Claim(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if got := namespaceCounter(t, q, "timerq_namespace_deadline_dead_letters_total"); got != 0 {
			t.Fatalf("timerq_namespace_deadline_dead_letters_total = %v before any lease, want 0", got)
		}
		ds, err := q.Lease(ctx, "g", "c", queue.LeaseOptions{})
		if err != nil || len(ds) != 1 || ds[0].Event.ID != "plain" {
			t.Fatalf("Lease = %+v, %v; want plain alone", ds, err)
		}
		if got := namespaceCounter(t, q, "timerq_namespace_deadline_dead_letters_total"); got != 1 {
			t.Fatalf("timerq_namespace_deadline_dead_letters_total = %v, want 1", got)
		}
	})
}
