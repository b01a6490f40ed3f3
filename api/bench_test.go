package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// benchHandler is a Handler over a real redis-server (skipped without
// one), driven in-process with httptest.NewRecorder so the figures are the
// handler's and Redis's, not a network stack's.
func benchHandler(b *testing.B) *api.Handler {
	srv := redistest.Start(b, redistest.Config{})
	h, err := api.New(api.Options{Client: srv.Client(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return h
}

func serve(b *testing.B, h http.Handler, path string, body []byte, want int) {
	req := httptest.NewRequest("POST", path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("%s = %d %s", path, rec.Code, rec.Body)
	}
}

// BenchmarkCreate is one create per request, each a new timer.
func BenchmarkCreate(b *testing.B) {
	h := benchHandler(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		serve(b, h, "/v1/namespaces/bench/timers", fmt.Appendf(nil, `{"id": "t-%d", "in": "1h", "payload_text": "0123456789abcdef"}`, i), http.StatusCreated)
		i++
	}
}

// BenchmarkCreateBatch is batches of 1000 new timers; it reports timers/s.
func BenchmarkCreateBatch(b *testing.B) {
	h := benchHandler(b)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		var sb strings.Builder
		sb.WriteString(`{"timers": [`)
		for j := range 1000 {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"id": "t-%d", "in": "1h", "payload_text": "0123456789abcdef"}`, n)
			n++
		}
		sb.WriteString(`]}`)
		serve(b, h, "/v1/namespaces/bench/timers/batch", []byte(sb.String()), http.StatusOK)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "timers/s")
}

// BenchmarkQueueBaseline is the same work through package queue directly,
// in the same run, so the HTTP layer's share shows.
func BenchmarkQueueBaseline(b *testing.B) {
	srv := redistest.Start(b, redistest.Config{})
	q, err := queue.New(srv.Client(b), queue.Options{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	payload := []byte("0123456789abcdef")
	b.Run("Create", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{queue.NewTimerIn(fmt.Sprint("c-", i), time.Hour, payload)}); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("CreateBatch", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			batch := make([]queue.NewTimer, 1000)
			for j := range batch {
				batch[j] = queue.NewTimerIn(fmt.Sprint("b-", n), time.Hour, payload)
				n++
			}
			if _, err := q.ScheduleBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "timers/s")
	})
}
