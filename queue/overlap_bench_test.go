package queue_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timerq/timerq/queue"
)

// BenchmarkConsumeOverlap measures what the overlap policy adds to Consume:
// one consumer drains b.N fired events of plain timers, of occurrences of
// 1,000 schedules that allow overlap, and of 1,000 under skip (where most
// are skipped: a read of 16 holds several occurrences of a schedule). It
// reports events/s and the Redis CPU per event (INFO cpu).
//
//	go test -run '^$' -bench ConsumeOverlap -benchtime 20000x ./queue/
func BenchmarkConsumeOverlap(b *testing.B) {
	for _, kind := range []string{"plain", "allow", "skip"} {
		b.Run(kind, func(b *testing.B) {
			q, rdb := benchQueueClient(b)
			ctx := context.Background()
			const schedules = 1000
			if kind != "plain" {
				ov := queue.OverlapAllow
				if kind == "skip" {
					ov = queue.OverlapSkip
				}
				for k := range schedules {
					if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: fmt.Sprint("s", k), Every: 24 * time.Hour, Overlap: ov}); err != nil {
						b.Fatal(err)
					}
				}
			}
			due := time.Now().Add(-time.Second)
			var batch []queue.NewTimer
			var occs []queue.Timer // restored, as an import would: Schedule refuses an occurrence's ID
			for i := range b.N {
				if kind == "plain" {
					batch = append(batch, queue.NewTimer{ID: benchID(i), Due: due, Payload: benchPayload})
					continue
				}
				occs = append(occs, queue.Timer{ID: queue.OccurrenceID(fmt.Sprint("s", i%schedules), time.UnixMilli(int64(1+i/schedules))),
					State: queue.StateScheduled, Due: due, CreatedAt: due, Payload: benchPayload})
			}
			for start := 0; start < len(batch); start += 10_000 {
				if _, err := q.ScheduleBatch(ctx, batch[start:min(start+10_000, len(batch))]); err != nil {
					b.Fatal(err)
				}
			}
			for start := 0; start < len(occs); start += queue.MaxBatch {
				if _, err := q.Restore(ctx, occs[start:min(start+queue.MaxBatch, len(occs))]); err != nil {
					b.Fatal(err)
				}
			}
			for {
				res, err := q.Engine().Claim(ctx, queue.MaxBatch)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Fired) < queue.MaxBatch {
					break
				}
			}
			var settled, skipped atomic.Int64
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			cpu0 := redisCPU(b, rdb)
			b.ResetTimer()
			go func() {
				defer close(done)
				_ = q.Consume(cctx, "g", "c", func(context.Context, queue.Event) error {
					if settled.Add(1) == int64(b.N) {
						cancel()
					}
					return nil
				}, queue.ConsumeOptions{Block: 10 * time.Millisecond, OnSkip: func(queue.Skip) {
					skipped.Add(1)
					if settled.Add(1) == int64(b.N) {
						cancel()
					}
				}})
			}()
			<-done
			b.StopTimer()
			cpu := redisCPU(b, rdb) - cpu0
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(cpu/float64(b.N), "redis-us/event")
			b.ReportMetric(float64(skipped.Load())/float64(b.N), "skipped/event")
		})
	}
}
