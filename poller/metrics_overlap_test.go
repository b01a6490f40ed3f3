package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// TestCountersCollectorExportsOverlapSkips: an occurrence a consumer group
// skipped under its schedule's overlap policy shows in
// timerq_namespace_overlap_skipped_total, read from Redis.
func TestCountersCollectorExportsOverlapSkips(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q, err := queue.New(b.Client, queue.Options{Namespace: redistest.Namespace(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "s", Every: time.Hour, Overlap: queue.OverlapSkip}); err != nil {
			t.Fatal(err)
		}
		past := time.Now().Add(-time.Second)
		// Restored: Schedule refuses an occurrence's ID for a plain timer.
		if _, err := q.Restore(ctx, []queue.Timer{{ID: "s@1", State: queue.StateScheduled, Due: past, CreatedAt: past},
			{ID: "s@2", State: queue.StateScheduled, Due: past, CreatedAt: past}}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Engine().Claim(ctx, 10); err != nil {
			t.Fatal(err)
		}
		// One read gets both: s@1 is handled, s@2 skipped.
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- q.Consume(cctx, "g", "c", func(context.Context, queue.Event) error { return nil },
				queue.ConsumeOptions{Block: 20 * time.Millisecond, OnSkip: func(queue.Skip) { cancel() }})
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			cancel()
			<-done
			t.Fatal("nothing was skipped")
		}
		if got := namespaceCounter(t, q, "timerq_namespace_overlap_skipped_total"); got != 1 {
			t.Fatalf("timerq_namespace_overlap_skipped_total = %v, want 1", got)
		}
	})
}

// namespaceCounter gathers q's namespace counters as a worker exports them
// and returns the value of the counter name, or -1 if it is missing.
func namespaceCounter(t *testing.T, q *queue.Queue, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(poller.NewCountersCollector(q))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}
