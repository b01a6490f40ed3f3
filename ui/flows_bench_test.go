package ui_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/ui"
)

// BenchmarkFlowsPage measures the flows page over TIMERQ_BENCH_FLOW_KEYS
// flow keys (default 5,000), each with one delivery in flight and one
// parked, in a Redis of its own; it reports the server's CPU per page
// (INFO cpu) as redis-ms/op:
//
//	TIMERQ_BENCH_FLOW_KEYS=1000 go test -run '^$' -bench BenchmarkFlowsPage -benchtime 20x ./ui/
func BenchmarkFlowsPage(b *testing.B) {
	keys := 5000
	if s := os.Getenv("TIMERQ_BENCH_FLOW_KEYS"); s != "" {
		keys, _ = strconv.Atoi(s)
	}
	srv := redistest.Start(b, redistest.Config{})
	rdb := srv.Client(b)
	ctx := context.Background()
	q, err := queue.New(rdb, queue.Options{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	if err := q.Flows().PutPolicy(ctx, queue.FlowPolicy{Rate: 1, Period: time.Hour, MaxInFlight: 1}); err != nil {
		b.Fatal(err)
	}
	for k := 0; k < keys; k += 500 {
		var batch []queue.NewTimer
		for i := k; i < min(k+500, keys); i++ {
			for j := range 2 {
				batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("t%d-%d", i, j), Due: time.Now().Add(-time.Second),
					FlowKey: fmt.Sprintf("key-%d", i)})
			}
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	for {
		res, err := q.Engine().Claim(ctx, 1000)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Fired) == 0 {
			break
		}
	}
	for {
		ds, err := q.Lease(ctx, "timerq-deliver", "c", queue.LeaseOptions{Lease: time.Hour, Count: 500})
		if err != nil {
			b.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
	}
	h, err := ui.New(q, ui.Options{})
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := redisCPU(b, rdb)
	b.ResetTimer()
	for range b.N {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/flows", nil))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `id="flows"`) {
			b.Fatalf("GET /flows = %d:\n%s", rec.Code, rec.Body.String())
		}
		b.SetBytes(int64(rec.Body.Len()))
	}
	b.StopTimer()
	b.ReportMetric((redisCPU(b, rdb)-cpu0)*1000/float64(b.N), "redis-ms/op")
}
