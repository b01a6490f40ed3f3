package dispatch_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// BenchmarkDispatchThroughRedis: b.N fires already in the fire stream of a
// real redis-server, delivered by 4 dispatchers (one process, one shared
// Sender with keep-alive) to a local Go sink that answers 204: lease,
// endpoint lookup (cached), signed POST, acknowledgement with the attempt
// log. Reports deliveries/s; scheduling and firing are not timed.
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
	if _, err := q.PutEndpoint(ctx, queue.Endpoint{Name: "sink", URL: sink.URL, Secrets: []queue.Secret{testSecret()}, MaxInFlight: 64},
		&queue.PutEndpointOptions{Allow: loopback}); err != nil {
		b.Fatal(err)
	}
	past := time.Now().Add(-time.Second)
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
		res, err := q.Claim(ctx, queue.MaxBatch)
		if err != nil {
			b.Fatal(err)
		}
		fired += len(res.Fired)
	}
	sender := &deliver.Sender{Guard: &deliver.Guard{Allow: loopback}}
	defer sender.CloseIdleConnections()
	b.ResetTimer()
	began := time.Now()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 4)
	for i := range 4 {
		d := &dispatch.Dispatcher{Queue: q, Consumer: fmt.Sprint("d", i), Sender: sender}
		go func() { done <- d.Run(rctx) }()
	}
	for hits.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	took := time.Since(began)
	b.StopTimer()
	stop()
	for range 4 {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/took.Seconds(), "deliveries/s")
}
