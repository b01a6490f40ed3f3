package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/timerq/timerq/queue"
)

// BenchmarkLeaseAck is pull consumption by one consumer in batches of 100:
// one Lease and one Ack call, one round trip each, per 100 events. One op
// is one event.
func BenchmarkLeaseAck(b *testing.B) {
	q, rdb := benchQueueClient(b)
	ctx := context.Background()
	due := time.Now().Add(-time.Minute)
	const chunk = 10_000
	batch := make([]queue.NewTimer, 0, chunk)
	for start := 0; start < b.N; start += chunk {
		batch = batch[:0]
		for i := start; i < min(b.N, start+chunk); i++ {
			batch = append(batch, queue.NewTimer{ID: benchID(i), Due: due, Payload: benchPayload})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	for {
		res, err := q.Engine().Claim(ctx, queue.MaxBatch)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Fired) == 0 {
			break
		}
	}
	o := queue.LeaseOptions{Count: 100}
	if _, err := q.Ack(ctx, "g", queue.DeliveryRef{StreamID: "1-0", Attempt: 1}.String()); err != nil { // opens the pipeline connection
		b.Fatal(err)
	}
	cpu := redisCPU(b, rdb)
	b.ResetTimer()
	for done := 0; done < b.N; {
		ds, err := q.Lease(ctx, "g", "c", o)
		if err != nil {
			b.Fatal(err)
		}
		if len(ds) == 0 {
			b.Fatalf("leased %d of %d events, then none", done, b.N)
		}
		ids := make([]string, len(ds))
		for i, d := range ds {
			ids[i] = d.DeliveryID
		}
		if _, err := q.Ack(ctx, "g", ids...); err != nil {
			b.Fatal(err)
		}
		done += len(ds)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric((redisCPU(b, rdb)-cpu)/float64(b.N), "redis-cpu-us/event")
}
