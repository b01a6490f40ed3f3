package dispatch_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// BenchmarkDispatchThroughRedis: b.N fires already in the fire stream of a
// real redis-server, delivered by 4 dispatchers (one process, one shared
// Sender with keep-alive) to a local Go sink that answers 204: lease,
// endpoint lookup (cached), signed POST, acknowledgement with the attempt
// log. Scheduling and firing are not timed. It reports deliveries/s (every
// fire received and acknowledged), the Redis server's CPU per delivery
// (INFO cpu: used_cpu_sys + used_cpu_user) and this process's (rusage:
// dispatchers, sink and client together), and beside them the Redis CPU
// per fire of the untimed part: scheduling the timers and claiming them,
// 1,000 a call. TIMERQ_BENCH_CMDSTATS=1 prints
// INFO commandstats of the timed part to stderr.
func BenchmarkDispatchThroughRedis(b *testing.B) {
	srv := redistest.Start(b, redistest.Config{})
	rdb := srv.Client(b)
	ctx := context.Background()
	q, err := queue.New(rdb, queue.Options{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	var hits atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	if _, err := q.Endpoints().Put(ctx, queue.Endpoint{Name: "sink", URL: sink.URL, Secrets: []queue.Secret{testSecret()}, MaxInFlight: 64},
		&queue.PutEndpointOptions{Allow: loopback}); err != nil {
		b.Fatal(err)
	}
	past := time.Now().Add(-time.Second)
	fire0 := redisCPU(b, rdb)
	for i := 0; i < b.N; i += queue.MaxBatch {
		var batch []queue.NewTimer
		for j := i; j < min(i+queue.MaxBatch, b.N); j++ {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprint("t", j), Due: past, Endpoint: "sink", Payload: []byte(`{"invoice":42}`)})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	for fired := 0; fired < b.N; {
		res, err := q.Engine().Claim(ctx, queue.MaxBatch)
		if err != nil {
			b.Fatal(err)
		}
		fired += len(res.Fired)
	}
	fireCPU := redisCPU(b, rdb) - fire0
	sender := &deliver.Sender{Guard: &deliver.Guard{Allow: loopback}}
	defer sender.CloseIdleConnections()
	stats := os.Getenv("TIMERQ_BENCH_CMDSTATS") != ""
	if stats {
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
	var settled atomic.Int64
	allSettled := make(chan struct{})
	onAttempt := func(r dispatch.Report) {
		if r.SettleErr == nil && settled.Add(1) == int64(b.N) {
			close(allSettled)
		}
	}
	redis0, proc0 := redisCPU(b, rdb), procCPU()
	b.ResetTimer()
	began := time.Now()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 4)
	for i := range 4 {
		d := &dispatch.Dispatcher{Queue: q, Consumer: fmt.Sprint("d", i), Sender: sender, OnAttempt: onAttempt}
		go func() { done <- d.Run(rctx) }()
	}
	<-allSettled
	took := time.Since(began)
	b.StopTimer()
	redis1, proc1 := redisCPU(b, rdb), procCPU()
	stop()
	for range 4 {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	if got := hits.Load(); got < int64(b.N) {
		b.Fatalf("the sink received %d of %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/took.Seconds(), "deliveries/s")
	b.ReportMetric((redis1-redis0).Seconds()*1e6/float64(b.N), "redis-µs/delivery")
	b.ReportMetric((proc1-proc0).Seconds()*1e6/float64(b.N), "proc-µs/delivery")
	b.ReportMetric(fireCPU.Seconds()*1e6/float64(b.N), "redis-µs/fire")
	if stats {
		s, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "N=%d, %v\n%s\n", b.N, took, s)
	}
}

// redisCPU is the server's used_cpu_sys + used_cpu_user (INFO cpu).
func redisCPU(tb testing.TB, c *redis.Client) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// procCPU is this process's user + system CPU time.
func procCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
