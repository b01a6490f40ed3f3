package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/deliver/dispatch"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// BenchmarkDeliveryPages measures the push delivery pages in a real Redis,
// on a namespace of 1 shard and one of 16: 50 endpoints and 20,000 dead
// letters over the shards, half of them the delivery group's (spread over
// the endpoints) and half another group's, and a timer with a full
// attempt log. Besides the server time per page it reports the Redis
// server's CPU per page (INFO cpu deltas):
//
//	go test -run '^$' -bench BenchmarkDeliveryPages -benchtime 100x ./ui/
func BenchmarkDeliveryPages(b *testing.B) {
	srv := redistest.Start(b, redistest.Config{})
	rdb := srv.Client(b)
	ctx := context.Background()
	for _, shards := range []int{1, 16} {
		ns := fmt.Sprint("bench", shards)
		if _, err := queue.CreateNamespace(ctx, rdb, ns, shards); err != nil {
			b.Fatal(err)
		}
		q, err := queue.New(rdb, queue.Options{Namespace: ns})
		if err != nil {
			b.Fatal(err)
		}
		defer q.Close()
		for i := range 50 {
			e := queue.Endpoint{Name: fmt.Sprintf("ep-%02d", i), URL: fmt.Sprintf("https://ep%02d.example.com/hook", i), Secrets: testSecrets}
			if _, err := q.Endpoints().Put(ctx, e, nil); err != nil {
				b.Fatal(err)
			}
		}
		const dead = 20_000
		p := rdb.Pipeline()
		for i := range dead {
			group, ep := dispatch.DefaultGroup, fmt.Sprintf("ep-%02d", i/2%50)
			if i%2 == 1 {
				group = "app"
			}
			p.XAdd(ctx, &redis.XAddArgs{Stream: keyspace.Shard(ns, i%shards, shards).DeadLetter(), Values: []any{
				"id", fmt.Sprint("t-", i), "due", "1796000000000", "fired", "1796000000001", "payload", `{"invoice":1041}`, "endpoint", ep,
				"error", "exhausted after server_error: HTTP 500: upstream timed out", "attempts", "10", "group", group, "consumer", "d1", "stream_id", "1-0"}})
			if p.Len() == 1000 {
				if _, err := p.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		// A delivering timer fired, with a full attempt log.
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{{ID: "logged", Due: time.Now().Add(-time.Second), Endpoint: "ep-07"}}); err != nil {
			b.Fatal(err)
		}
		if _, err := q.Engine().Claim(ctx, 10); err != nil {
			b.Fatal(err)
		}
		o := queue.LeaseOptions{Lease: time.Minute, MaxAttempts: 100}
		for i := 1; i <= queue.AttemptLogLen; i++ {
			var ds []queue.Delivery
			for len(ds) == 0 {
				if ds, err = q.Lease(ctx, dispatch.DefaultGroup, "d1", o); err != nil {
					b.Fatal(err)
				}
			}
			a := queue.DeliveryAttempt{TimerID: "logged", Attempt: i, Due: ds[0].Event.Due, StreamID: ds[0].Event.StreamID, At: time.Now(),
				Latency: 3 * time.Millisecond, Status: 503, Outcome: "retry", Reason: "server_error", Error: strings.Repeat("upstream ", 30)}
			if _, err := q.Release(ctx, dispatch.DefaultGroup, ds[0].DeliveryID, queue.ReleaseOptions{Log: &a}, o); err != nil {
				b.Fatal(err)
			}
		}
		h, err := ui.New(q, ui.Options{AllowWrites: true})
		if err != nil {
			b.Fatal(err)
		}
		for _, page := range []string{"/endpoints", "/deliveries", "/deliveries?endpoint=ep-07", "/deliveries?endpoint=none", "/timer?id=logged"} {
			b.Run(fmt.Sprintf("%dshards%s", shards, page), func(b *testing.B) {
				before := redisCPU(b, rdb)
				for b.Loop() {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, httptest.NewRequest("GET", page, nil))
					if w.Code != http.StatusOK {
						b.Fatalf("GET %s = %d: %s", page, w.Code, w.Body)
					}
				}
				b.ReportMetric((redisCPU(b, rdb)-before)/float64(b.N)*1000, "redis-cpu-ms/op")
			})
		}
	}
}

// redisCPU is the server's used_cpu_sys plus used_cpu_user, in seconds.
func redisCPU(b *testing.B, rdb redis.UniversalClient) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return sum
}
