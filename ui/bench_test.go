package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// BenchmarkPages measures each page's server time over a namespace of
// TIMERQ_BENCH_TIMERS scheduled timers (default 100,000) in a real Redis:
//
//	TIMERQ_BENCH_TIMERS=1000000 go test -run '^$' -bench BenchmarkPages -benchtime 50x ./ui/
func BenchmarkPages(b *testing.B) {
	n := 100_000
	if s := os.Getenv("TIMERQ_BENCH_TIMERS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	srv := redistest.Start(b, redistest.Config{})
	rdb := srv.Client(b)
	q, err := queue.New(rdb, queue.Options{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	now := time.Now()
	batch := make([]queue.NewTimer, 0, 10_000)
	for i := range n {
		// Spread over 30 days, a tenth of them overdue.
		due := now.Add(time.Duration(i-n/10) * (30 * 24 * time.Hour / time.Duration(n)))
		batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("t-%09d", i), Due: due, Payload: []byte(`{"k":"v"}`)})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := q.ScheduleBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	h, err := ui.New(q, ui.Options{})
	if err != nil {
		b.Fatal(err)
	}
	page, _ := q.List(ctx, queue.ListOptions{Limit: 1000, DueFrom: now.Add(20 * 24 * time.Hour)})
	deep := "/timers?cursor=" + page.NextCursor
	for _, p := range []string{"/", "/timers", deep, "/timers?state=scheduled&from=" + now.Add(24*time.Hour).Format(time.RFC3339),
		"/timers?prefix=zz", "/timers?prefix=" + fmt.Sprintf("t-%09d", n/2), "/timer?id=" + fmt.Sprintf("t-%09d", n/2), "/groups", "/tail"} {
		name := p
		if len(name) > 40 {
			name = name[:40]
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
				if w.Code != http.StatusOK {
					b.Fatalf("GET %s = %d: %s", p, w.Code, w.Body)
				}
				_, _ = io.Copy(io.Discard, w.Body)
			}
		})
	}
}
