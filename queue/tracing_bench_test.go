package queue_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// processCPU is this process's user+system CPU time so far, in µs.
func processCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// BenchmarkClaimTracing is BenchmarkClaim with tracing off (no tracer
// provider, timers scheduled outside any trace) and on (an SDK provider
// that samples everything and exports, batched, to a no-op exporter; every
// timer scheduled inside a sampled span, so each claim reads and moves its
// traceparent and makes a fire span per timer). It reports what one fired
// timer costs Redis and this process:
//
//	go test -run '^$' -bench ClaimTracing -benchtime 100000x ./queue/
func BenchmarkClaimTracing(b *testing.B) {
	for _, traced := range []bool{false, true} {
		name := "off"
		if traced {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			srv := redistest.Start(b, redistest.Config{})
			rdb := srv.Client(b)
			opts := queue.Options{Namespace: "bench"}
			ctx := context.Background()
			if traced {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				opts.TracerProvider = tp
				c, s := tp.Tracer("bench").Start(ctx, "bench")
				defer s.End()
				ctx = c
			}
			q, err := queue.New(rdb, opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { q.Close() })
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
			if _, err := q.Engine().Claim(ctx, 1); err != nil { // loads the script
				b.Fatal(err)
			}
			cpu, own := redisCPU(b, rdb), processCPU()
			b.ReportAllocs()
			b.ResetTimer()
			fired := 1
			for fired < b.N {
				res, err := q.Engine().Claim(ctx, queue.MaxBatch)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Fired) == 0 {
					b.Fatalf("claimed %d of %d timers, then none", fired, b.N)
				}
				fired += len(res.Fired)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "timers/s")
			b.ReportMetric((redisCPU(b, rdb)-cpu)/float64(b.N-1), "redis-cpu-us/timer")
			b.ReportMetric((processCPU()-own)/float64(b.N-1), "client-cpu-us/timer")
		})
	}
}
