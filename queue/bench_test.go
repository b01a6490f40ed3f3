package queue_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
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

// redisCPU reads the CPU time the Redis server has used so far, in
// microseconds (INFO cpu, user + system). Unlike the wall clock, it leaves
// out the time Redis waited for a CPU, so it stays comparable on a loaded,
// shared machine; it includes reading requests and writing replies.
func redisCPU(b *testing.B, rdb *redis.Client) float64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			n, _ := strconv.ParseFloat(v, 64)
			total += n
		}
	}
	return total * 1e6
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

// BenchmarkScheduleBatchIn is BenchmarkScheduleBatch with delays that the
// script adds to the server's TIME (NewTimerIn) instead of instants.
func BenchmarkScheduleBatchIn(b *testing.B) {
	q := benchQueue(b)
	ctx := context.Background()
	const chunk = 10_000
	batch := make([]queue.NewTimer, 0, chunk)
	b.ResetTimer()
	for start := 0; start < b.N; start += chunk {
		batch = batch[:0]
		for i := start; i < min(b.N, start+chunk); i++ {
			batch = append(batch, queue.NewTimerIn(benchID(i), time.Hour, benchPayload))
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "timers/s")
}

// BenchmarkRestore restores fired timers, queue.MaxBatch per Restore call
// (one script each), as timerctl import does with an export (it uses 500).
func BenchmarkRestore(b *testing.B) {
	q := benchQueue(b)
	ctx := context.Background()
	now := time.Now()
	batch := make([]queue.Timer, 0, queue.MaxBatch)
	b.ResetTimer()
	for start := 0; start < b.N; start += queue.MaxBatch {
		batch = batch[:0]
		for i := start; i < min(b.N, start+queue.MaxBatch); i++ {
			batch = append(batch, queue.Timer{ID: benchID(i), State: queue.StateFired, Due: now, CreatedAt: now,
				FiredAt: now, Payload: benchPayload})
		}
		if _, err := q.Restore(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "timers/s")
}

// BenchmarkClaim claims b.N timers that are already due, queue.MaxBatch
// per Claim, from one connection: the ceiling of the claim script.
func BenchmarkClaim(b *testing.B) { benchClaim(b, queue.MaxBatch) }

// BenchmarkClaimOne is BenchmarkClaim with one timer per Claim, as a
// lightly loaded worker claims: each timer pays the script's fixed cost
// (the includes, the key checks, the clock).
func BenchmarkClaimOne(b *testing.B) { benchClaim(b, 1) }

func benchClaim(b *testing.B, limit int) {
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
	if _, err := q.Engine().Claim(ctx, 1); err != nil { // loads the script
		b.Fatal(err)
	}
	cpu := redisCPU(b, rdb)
	b.ResetTimer()
	fired := 1
	for fired < b.N {
		res, err := q.Engine().Claim(ctx, limit)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Fired) == 0 {
			b.Fatalf("claimed %d of %d timers, then none", fired, b.N)
		}
		fired += len(res.Fired)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "timers/s")
	b.ReportMetric((redisCPU(b, rdb)-cpu)/float64(b.N-1), "redis-cpu-us/timer")
}

// BenchmarkClaimEmpty is a claim that finds nothing due, as a poller's
// claim at its max poll interval, or a claim that lost a race, does: the
// script's fixed cost alone. 1,000 timers are pending an hour ahead, so
// the claim also reads the next due time. It reports Redis CPU per claim.
func BenchmarkClaimEmpty(b *testing.B) {
	q, rdb := benchQueueClient(b)
	ctx := context.Background()
	var batch []queue.NewTimer
	for i := range 1000 {
		batch = append(batch, queue.NewTimer{ID: benchID(i), Due: time.Now().Add(time.Hour), Payload: benchPayload})
	}
	if _, err := q.ScheduleBatch(ctx, batch); err != nil {
		b.Fatal(err)
	}
	if _, err := q.Engine().Claim(ctx, 1); err != nil { // loads the script
		b.Fatal(err)
	}
	cpu := redisCPU(b, rdb)
	b.ResetTimer()
	for range b.N {
		res, err := q.Engine().Claim(ctx, queue.MaxBatch)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Fired) != 0 || res.NextDue.IsZero() {
			b.Fatalf("an empty claim fired %d timers, next due %v", len(res.Fired), res.NextDue)
		}
	}
	b.ReportMetric((redisCPU(b, rdb)-cpu)/float64(b.N), "redis-cpu-us/claim")
}

// BenchmarkDeliveringTimerBytes schedules b.N pending timers (36-character
// IDs, 16-byte payloads) that deliver to the endpoint "billing", and
// reports what they add beyond plain timers: the bytes of the shard's
// deliver hash (MEMORY USAGE ... SAMPLES 0, exact) per timer. Run it with a
// fixed -benchtime such as 10000x: the hash changes encoding above 128
// fields.
func BenchmarkDeliveringTimerBytes(b *testing.B) {
	// endpoint: the timer names its endpoint; url: it also gives a URL of
	// its own (NewTimer.URL, 48 bytes here), stored beside the name.
	for _, c := range []struct{ name, url string }{{"endpoint", ""}, {"url", "https://hooks.example.com/tenants/000042/timerq"}} {
		b.Run(c.name, func(b *testing.B) {
			q, rdb := benchQueueClient(b)
			ctx := context.Background()
			secret := queue.Secret(queue.SecretPrefix + strings.Repeat("QUFB", 8))
			if _, err := q.Endpoints().Put(ctx, queue.Endpoint{Name: "billing", URL: "https://billing.example.com/", Secrets: []queue.Secret{secret}}, nil); err != nil {
				b.Fatal(err)
			}
			if err := q.Deliveries().SetPolicy(ctx, queue.DeliveryPolicy{AllowTimerURLs: true}); err != nil {
				b.Fatal(err)
			}
			due := time.Now().Add(time.Hour)
			var batch []queue.NewTimer
			for i := range b.N {
				batch = append(batch, queue.NewTimer{ID: benchID(i), Due: due, Payload: benchPayload, Endpoint: "billing", URL: c.url})
				if len(batch) == queue.MaxBatch || i == b.N-1 {
					if _, err := q.ScheduleBatch(ctx, batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			b.StopTimer()
			n, err := rdb.MemoryUsage(ctx, keyspace.Shard("bench", 0, 1).Deliveries(), 0).Result()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(n)/float64(b.N), "B/timer")
		})
	}
}
