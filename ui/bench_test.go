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

	"github.com/redis/go-redis/v9"

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

// BenchmarkSchedulePages measures the schedule pages' server time in a real
// Redis: the list (first page of 50) over TIMERQ_BENCH_SCHEDULES schedules
// (default 10,000), and the page of a per-second schedule whose last 30
// occurrences fired (armed, next and 30 recent lookups):
//
//	go test -run '^$' -bench BenchmarkSchedulePages -benchtime 200x ./ui/
func BenchmarkSchedulePages(b *testing.B) {
	n := 10_000
	if s := os.Getenv("TIMERQ_BENCH_SCHEDULES"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	srv := redistest.Start(b, redistest.Config{})
	q, err := queue.New(srv.Client(b), queue.Options{Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	for i := range n {
		r := queue.Recurring{ID: fmt.Sprintf("s-%06d", i), Spec: "*/5 * * * *", Payload: []byte(`{"job":"report"}`)}
		if i%2 == 1 {
			r = queue.Recurring{ID: r.ID, Every: time.Duration(i+1) * time.Minute, Jitter: time.Second}
		}
		if _, _, err := q.Recurring().Put(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	// A per-second schedule with 30 fired occurrences: fire each armed one
	// now, and re-arm, as a worker would.
	if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "fast", Spec: "* * * * * *", Ahead: 30}); err != nil {
		b.Fatal(err)
	}
	in, _ := q.Recurring().Get(ctx, "fast")
	for _, o := range in.Pending {
		if _, err := q.FireNow(ctx, o.ID); err != nil {
			b.Fatal(err)
		}
	}
	if res, err := q.Engine().Claim(ctx, 100); err != nil || len(res.Fired) != 30 {
		b.Fatalf("claim: %d fired, %v", len(res.Fired), err)
	}
	h, err := ui.New(q, ui.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []string{"/schedules", "/schedule?id=s-000002", "/schedule?id=fast"} {
		b.Run(p, func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
				if w.Code != http.StatusOK {
					b.Fatalf("GET %s = %d: %s", p, w.Code, w.Body)
				}
			}
		})
	}
}

// BenchmarkShardedStreams measures the pages that read the fire and
// dead-letter streams, which merge every shard's, in a real Redis: a
// namespace of 1 shard against one of TIMERQ_BENCH_SHARDS (default 16),
// each with 16,000 fires (so the overview's 1,000-fire sample is full in
// every shard), 200 dead letters and a consumer group. The sharded
// namespace is measured twice: "bulk", each shard's fires claimed in one
// go, so the newest 1,000 are all one shard's (RecentFires's worst case),
// and "spread", claimed 10 at a time round the shards, as steady traffic
// fires them:
//
//	go test -run '^$' -bench BenchmarkShardedStreams -benchtime 200x ./ui/
func BenchmarkShardedStreams(b *testing.B) {
	many := 16
	if s := os.Getenv("TIMERQ_BENCH_SHARDS"); s != "" {
		many, _ = strconv.Atoi(s)
	}
	srv := redistest.Start(b, redistest.Config{})
	rdb := srv.Client(b)
	ctx := context.Background()
	name := func(shards int, spread bool) string {
		switch {
		case shards == 1:
			return "shards=1"
		case spread:
			return fmt.Sprintf("shards=%d-spread", shards)
		}
		return fmt.Sprintf("shards=%d-bulk", shards)
	}
	for _, c := range []struct {
		shards int
		spread bool
	}{{1, false}, {many, false}, {many, true}} {
		shards := c.shards
		ns := fmt.Sprintf("bench%d-%v", shards, c.spread)
		if _, err := queue.CreateNamespace(ctx, rdb, ns, shards); err != nil {
			b.Fatal(err)
		}
		q, err := queue.New(rdb, queue.Options{Namespace: ns})
		if err != nil {
			b.Fatal(err)
		}
		defer q.Close()
		const fires = 16_000
		past := time.Now().Add(-time.Minute)
		batch := make([]queue.NewTimer, 0, 1000)
		for i := range fires {
			batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("f-%06d", i), Due: past, Payload: []byte(`{"k":"v"}`)})
			if len(batch) == cap(batch) {
				if _, err := q.ScheduleBatch(ctx, batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		for n, k := 0, 0; n < fires; k = (k + 1) % shards {
			limit := queue.MaxBatch
			if c.spread {
				limit = 10
			}
			res, err := q.Engine().ClaimShard(ctx, k, limit)
			if err != nil {
				b.Fatalf("claim: %v after %d", err, n)
			}
			n += len(res.Fired)
		}
		for k := range shards {
			if err := rdb.XGroupCreate(ctx, q.Keys().Stream(k), "billing", "0").Err(); err != nil {
				b.Fatal(err)
			}
		}
		for i := range 200 {
			if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: q.Keys().DeadLetter(i % shards), Values: []any{
				"id", fmt.Sprintf("f-%06d", i), "due", "1", "fired", "2", "payload", "", "error", "broke", "attempts", "5",
				"group", "billing", "consumer", "c1", "stream_id", "1-0",
			}}).Err(); err != nil {
				b.Fatal(err)
			}
		}
		h, err := ui.New(q, ui.Options{})
		if err != nil {
			b.Fatal(err)
		}
		_, cursor, err := q.Inspect().RecentFires(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range []string{"/", "/groups", "/tail"} {
			b.Run(name(shards, c.spread)+p, func(b *testing.B) {
				for b.Loop() {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
					if w.Code != http.StatusOK {
						b.Fatalf("GET %s = %d: %s", p, w.Code, w.Body)
					}
				}
			})
		}
		// The overview's fire sample alone.
		b.Run(name(shards, c.spread)+"/RecentFires-1000", func(b *testing.B) {
			for b.Loop() {
				if _, _, err := q.Inspect().RecentFires(ctx, 1000); err != nil {
					b.Fatal(err)
				}
			}
		})
		// One idle read of every shard after the newest fires: what the
		// live tail costs per poll on a Cluster.
		b.Run(name(shards, c.spread)+"/ReadFires-idle", func(b *testing.B) {
			for b.Loop() {
				if _, err := q.ReadFires(ctx, queue.ReadFiresOptions{Limit: 100, Cursor: cursor}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
