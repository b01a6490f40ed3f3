package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// BenchmarkDeliverLatency: a worker with Deliver (timerworker --deliver)
// fires and delivers timers scheduled at a steady 2,000/s for 5 s, each due
// 200 ms after it is scheduled, to a local sink; reports the due-to-received
// latency's p50 and p99 (one host, one clock), and apart its two parts:
// due to fired (the claim's lateness, timerq-fired-at, to the
// millisecond) and fired to received (lease, signing, the POST). Run with
// -benchtime 1x.
func BenchmarkDeliverLatency(b *testing.B) {
	srv := redistest.Start(b, redistest.Config{})
	rdb := srv.Client(b)
	ctx := context.Background()
	ns := "bench"
	q, err := queue.New(rdb, queue.Options{Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	var mu sync.Mutex
	var lat, fired, toPost []time.Duration
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		due, _ := time.Parse(time.RFC3339Nano, r.Header.Get(deliver.HeaderDueAt))
		fa, _ := time.Parse(time.RFC3339Nano, r.Header.Get(deliver.HeaderFiredAt))
		mu.Lock()
		lat = append(lat, at.Sub(due))
		fired, toPost = append(fired, fa.Sub(due)), append(toPost, at.Sub(fa))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	if _, err := q.Endpoints().Put(ctx, queue.Endpoint{Name: "sink", URL: sink.URL, Secrets: []queue.Secret{queue.Secret(deliver.GenerateSecret())}, MaxInFlight: 64},
		&queue.PutEndpointOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}); err != nil {
		b.Fatal(err)
	}
	logs := &redistest.SyncBuffer{}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(wctx, Config{Conn: cliconf.Conn{RedisURL: srv.URL()}, Namespaces: []string{ns},
			Deliver: DeliverConfig{Enabled: true, Allow: []string{"127.0.0.1/32"}}}, slog.New(slog.NewTextHandler(logs, nil)))
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	redistest.Eventually(b, 10*time.Second, "the worker starts", func() bool { return strings.Contains(logs.String(), "delivering fires") })
	const rate, secs, per = 2000, 5, 20 // per batch, every 10 ms
	b.ResetTimer()
	n := 0
	tick := time.NewTicker(time.Second * per / rate)
	for range rate * secs / per {
		<-tick.C
		due := time.Now().Add(200 * time.Millisecond)
		batch := make([]queue.NewTimer, per)
		for i := range batch {
			batch[i] = queue.NewTimer{ID: fmt.Sprint("t", n), Due: due, Endpoint: "sink", Payload: []byte(`{}`)}
			n++
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	tick.Stop()
	redistest.Eventually(b, 60*time.Second, "every timer is delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(lat) >= n
	})
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	q50, q99 := lat[len(lat)/2], lat[len(lat)*99/100]
	b.ReportMetric(float64(q50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(q99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(len(lat)), "requests")
	slices.Sort(fired)
	slices.Sort(toPost)
	b.ReportMetric(float64(fired[len(fired)/2].Microseconds())/1000, "fire-p50-ms")
	b.ReportMetric(float64(toPost[len(toPost)/2].Microseconds())/1000, "post-p50-ms")
	b.ReportMetric(float64(toPost[len(toPost)*99/100].Microseconds())/1000, "post-p99-ms")
}
