package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/timerq/timerq/queue"
)

// The Redis CPU (INFO cpu) of one debounce call, beside the calls it
// replaces: ScheduleIn of a new timer, RescheduleIn of a scheduled one.
// Each starts a redis-server of its own; run them alternately with
// -count 3 and compare redis-cpu-us/call (BENCHMARKS.md, "Debounce").

// BenchmarkDebouncePush pushes one open window b.N times (the payload
// replaced each time), as a hot key does.
func BenchmarkDebouncePush(b *testing.B) {
	benchCalls(b, func(ctx context.Context, q *queue.Queue, i int) error {
		_, err := q.Debounce(ctx, "hot", queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour, Payload: benchPayload})
		return err
	})
}

// BenchmarkDebounceOpen opens b.N windows, one per key.
func BenchmarkDebounceOpen(b *testing.B) {
	benchCalls(b, func(ctx context.Context, q *queue.Queue, i int) error {
		_, err := q.Debounce(ctx, fmt.Sprint("key-", i), queue.DebounceOptions{Delay: time.Hour, MaxWait: 2 * time.Hour, Payload: benchPayload})
		return err
	})
}

// BenchmarkRescheduleInOne moves one scheduled timer b.N times.
func BenchmarkRescheduleInOne(b *testing.B) {
	benchCalls(b, func(ctx context.Context, q *queue.Queue, i int) error {
		if i == 0 {
			if _, err := q.ScheduleIn(ctx, "hot", time.Hour, benchPayload); err != nil {
				return err
			}
		}
		_, err := q.RescheduleIn(ctx, "hot", time.Hour)
		return err
	})
}

// BenchmarkScheduleInOne creates b.N timers, one call each.
func BenchmarkScheduleInOne(b *testing.B) {
	benchCalls(b, func(ctx context.Context, q *queue.Queue, i int) error {
		_, err := q.ScheduleIn(ctx, benchID(i), time.Hour, benchPayload)
		return err
	})
}

// benchCalls runs call b.N+1 times, the first (which loads the scripts)
// outside the measurement, and reports calls/s and the server's CPU per
// call.
func benchCalls(b *testing.B, call func(ctx context.Context, q *queue.Queue, i int) error) {
	q, rdb := benchQueueClient(b)
	ctx := context.Background()
	if err := call(ctx, q, 0); err != nil {
		b.Fatal(err)
	}
	cpu := redisCPU(b, rdb)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		if err := call(ctx, q, i); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric((redisCPU(b, rdb)-cpu)/float64(b.N), "redis-cpu-us/call")
}
