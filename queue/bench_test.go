package queue_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// The benchmarks run against a throwaway real redis-server (redistest
// skips them when there is none, unless TIMERQ_REQUIRE_REDIS=1); they only
// run with -bench:
//
//	go test -run '^$' -bench . -benchtime 100000x ./queue/
//
// Each reports timers/s; one op is one timer. cmd/timerbench measures the
// same paths end to end, with timerworker processes.

var benchPayload = []byte("0123456789abcdef")

func benchQueue(b *testing.B) *queue.Queue {
	b.Helper()
	q, _ := benchQueueClient(b)
	return q
}

func benchQueueClient(b *testing.B) (*queue.Queue, *redis.Client) {
	b.Helper()
	srv := redistest.Start(b, redistest.Config{})
	rdb := srv.Client(b)
	q, err := queue.New(rdb, queue.Options{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	return q, rdb
}

// scriptUsec reads the microseconds Redis spent in EVALSHA so far (INFO
// commandstats): the script's own cost, without the client or the network,
// and so much less noisy on a loaded machine than the wall clock.
func scriptUsec(b *testing.B, rdb *redis.Client) float64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			for _, f := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(f, "usec="); ok {
					n, _ := strconv.ParseFloat(v, 64)
					return n
				}
			}
		}
	}
	return 0
}

func benchID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", i) }

// BenchmarkSchedule is one Schedule call, one round trip, per timer.
func BenchmarkSchedule(b *testing.B) {
	q := benchQueue(b)
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	b.ResetTimer()
	for i := range b.N {
		if _, err := q.Schedule(ctx, benchID(i), due, benchPayload); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "timers/s")
}

// BenchmarkScheduleBatch schedules 10,000 timers per ScheduleBatch call
// (pipelined 500 per script call).
func BenchmarkScheduleBatch(b *testing.B) {
	q := benchQueue(b)
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	const chunk = 10_000
	batch := make([]queue.NewTimer, 0, chunk)
	b.ResetTimer()
	for start := 0; start < b.N; start += chunk {
		batch = batch[:0]
		for i := start; i < min(b.N, start+chunk); i++ {
			batch = append(batch, queue.NewTimer{ID: benchID(i), Due: due, Payload: benchPayload})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "timers/s")
}

// BenchmarkClaim claims b.N timers that are already due, queue.MaxBatch
// per Claim, from one connection: the ceiling of the claim script.
func BenchmarkClaim(b *testing.B) {
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
	if _, err := q.Claim(ctx, 1); err != nil { // loads the script
		b.Fatal(err)
	}
	usec := scriptUsec(b, rdb)
	b.ResetTimer()
	fired := 1
	for fired < b.N {
		res, err := q.Claim(ctx, queue.MaxBatch)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Fired) == 0 {
			b.Fatalf("claimed %d of %d timers, then none", fired, b.N)
		}
		fired += len(res.Fired)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "timers/s")
	b.ReportMetric((scriptUsec(b, rdb)-usec)/float64(b.N-1), "redis-us/timer")
}
