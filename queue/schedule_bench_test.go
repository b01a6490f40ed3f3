package queue_test

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// BenchmarkScheduleCPU reports the Redis CPU (INFO cpu deltas) that
// ScheduleBatch costs, per timer and per ScheduleBatch call, for batches of
// 1, 4 and 10,000 timers of 36-character IDs and 16-byte payloads into one
// shard:
//
//	go test -run '^$' -bench ScheduleCPU -benchtime 200000x ./queue/
//
// The per-call figure of the small batches is the script's fixed cost plus
// its per-timer cost; the bulk batch's per-timer figure is what a large
// import pays. BENCHMARKS.md ("Enqueue") splits the two. client-cpu-us is
// this process's CPU (the client's encoding and decoding, and the
// benchmark's loop), which bounds one client's rate as Redis's does.
func BenchmarkScheduleCPU(b *testing.B) {
	for _, size := range []int{1, 4, 10_000} {
		b.Run(map[int]string{1: "batch=1", 4: "batch=4", 10_000: "batch=10000"}[size], func(b *testing.B) {
			q, rdb := benchQueueClient(b)
			ctx := context.Background()
			due := time.Now().Add(time.Hour)
			// One call first, so the script is loaded outside the window.
			if _, err := q.Schedule(ctx, "warm-up", due, benchPayload); err != nil {
				b.Fatal(err)
			}
			batch := make([]queue.NewTimer, 0, size)
			calls := 0
			cpu, own := redisCPU(b, rdb), ownCPU(b)
			b.ResetTimer()
			for start := 0; start < b.N; start += size {
				batch = batch[:0]
				for i := start; i < min(b.N, start+size); i++ {
					batch = append(batch, queue.NewTimer{ID: benchID(i), Due: due, Payload: benchPayload})
				}
				res, err := q.ScheduleBatch(ctx, batch)
				if err != nil {
					b.Fatal(err)
				}
				if !res[0].Created {
					b.Fatalf("timer %s existed", batch[0].ID)
				}
				calls++
			}
			b.StopTimer()
			used, client := redisCPU(b, rdb)-cpu, ownCPU(b)-own
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "timers/s")
			b.ReportMetric(used/float64(b.N), "redis-cpu-us/timer")
			b.ReportMetric(used/float64(calls), "redis-cpu-us/call")
			b.ReportMetric(client/float64(b.N), "client-cpu-us/timer")
		})
	}
}

// ownCPU is the CPU time this process has used so far, user and system, in
// microseconds: the client's side of a benchmark.
func ownCPU(b *testing.B) float64 {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// BenchmarkScheduleConcurrentCPU is many goroutines each calling Schedule
// for one timer, as a request handler does, with and without
// Options.CoalesceSchedules, which merges the waiting calls into one
// script call: Redis CPU per timer, against the per-call figure of
// BenchmarkScheduleCPU's batch=1.
func BenchmarkScheduleConcurrentCPU(b *testing.B) {
	for _, coalesce := range []bool{false, true} {
		b.Run(map[bool]string{false: "coalesce=off", true: "coalesce=on"}[coalesce], func(b *testing.B) {
			srv := redistest.Start(b, redistest.Config{})
			rdb := srv.Client(b)
			q, err := queue.New(rdb, queue.Options{Namespace: "bench", CoalesceSchedules: coalesce})
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			ctx := context.Background()
			due := time.Now().Add(time.Hour)
			if _, err := q.Schedule(ctx, "warm-up", due, benchPayload); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			cpu, own := redisCPU(b, rdb), ownCPU(b)
			b.SetParallelism(16) // 32 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := q.Schedule(ctx, benchID(int(next.Add(1))), due, benchPayload); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			used, client := redisCPU(b, rdb)-cpu, ownCPU(b)-own
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "timers/s")
			b.ReportMetric(used/float64(b.N), "redis-cpu-us/timer")
			b.ReportMetric(client/float64(b.N), "client-cpu-us/timer")
		})
	}
}
