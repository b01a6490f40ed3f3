package poller_test

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// evalCounter counts the scripts a client sends (EVALSHA, EVAL, FCALL), alone or
// in pipelines.
type evalCounter struct{ n atomic.Int64 }

func (c *evalCounter) countScripts(cmds ...redis.Cmder) {
	for _, cmd := range cmds {
		if n := cmd.Name(); n == "evalsha" || n == "eval" || n == "fcall" {
			c.n.Add(1)
		}
	}
}

func (c *evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.countScripts(cmd); return next(ctx, cmd) }
}
func (c *evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.countScripts(cmds...); return next(ctx, cmds) }
}

// horizonSeries is what the gauge exports at one scrape: the counts by
// within, and the age (-1 when absent).
func horizonSeries(t *testing.T, reg *prometheus.Registry) (map[string]int64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	due, age := map[string]int64{}, -1.0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "timerq_namespace_due_timers":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "within" {
						due[l.GetValue()] = int64(m.GetGauge().GetValue())
					}
				}
			}
		case "timerq_namespace_due_timers_age_seconds":
			age = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return due, age
}

// byName is a DueHorizon's counts by HorizonName, as the gauge labels them.
func byName(h queue.DueHorizon) map[string]int64 {
	out := map[string]int64{}
	for i, w := range h.Within {
		out[queue.HorizonName(w)] = h.Due[i]
	}
	return out
}

// TestHorizonGauge: on a sharded namespace with timers spread over a week,
// the gauge exports the cumulative counts DueHorizon reads, summed over the
// shards; a scrape sends Redis nothing, and a refresh one script per shard.
func TestHorizonGauge(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		const shards = 4
		ns := redistest.Namespace(t)
		if _, err := queue.CreateNamespace(ctx, b.Client, ns, shards); err != nil {
			t.Fatal(err)
		}
		q, err := queue.New(b.Client, queue.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		now, err := b.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if b.Mini != nil {
			// A day ahead of this process's clock: the counts are the
			// server's.
			now = time.Now().Add(24 * time.Hour).Truncate(time.Millisecond)
			b.Mini.SetTime(now)
		}
		var batch []queue.NewTimer
		for i, off := range []time.Duration{-time.Hour, -time.Second, 40 * time.Second, 40 * time.Minute,
			13 * time.Hour, 4 * 24 * time.Hour, 10 * 24 * time.Hour} {
			for j := range 3 {
				batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("h%d-%d", i, j), Due: now.Add(off)})
			}
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}

		g := poller.NewHorizonGauge(q, time.Hour)
		reg := prometheus.NewRegistry()
		reg.MustRegister(g)
		if due, age := horizonSeries(t, reg); len(due) != 0 || age != -1 {
			t.Fatalf("before the first read: %v, age %v; want nothing", due, age)
		}
		if err := g.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{"overdue": 6, "1m": 9, "1h": 12, "1d": 15, "1w": 18}
		due, age := horizonSeries(t, reg)
		if !maps.Equal(due, want) {
			t.Errorf("gauge = %v, want %v", due, want)
		}
		if age < 0 || age > 60 {
			t.Errorf("age = %v s, want a fresh read", age)
		}
		h, err := q.Inspect().DueHorizon(ctx, queue.DueHorizonBounds)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(due, byName(h)) {
			t.Errorf("gauge = %v, DueHorizon = %v", due, byName(h))
		}

		// Scrapes read what the last refresh read: Redis sees nothing of
		// them, and a timer scheduled since is not counted yet.
		var evals evalCounter
		b.Client.AddHook(&evals)
		if _, err := q.Schedule(ctx, "late-comer", now.Add(-time.Minute), nil); err != nil {
			t.Fatal(err)
		}
		evals.n.Store(0)
		for range 3 {
			if due, _ := horizonSeries(t, reg); !maps.Equal(due, want) {
				t.Errorf("a scrape between refreshes = %v, want the last read's %v", due, want)
			}
		}
		if n := evals.n.Load(); n != 0 {
			t.Errorf("three scrapes sent %d scripts, want 0", n)
		}
		if err := g.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if n := evals.n.Load(); n != shards {
			t.Errorf("a refresh sent %d scripts, want one per shard (%d)", n, shards)
		}
		for k := range want {
			want[k]++
		}
		if due, _ := horizonSeries(t, reg); !maps.Equal(due, want) {
			t.Errorf("after a refresh: %v, want %v", due, want)
		}
	})
}

// TestHorizonGaugeRunsAndGoesStale: Run refreshes every interval; once it
// stops, the counts stay three intervals, then only their age is exported;
// a failed read keeps the last counts.
func TestHorizonGaugeRunsAndGoesStale(t *testing.T) {
	m, rdb := redistest.Mini(t)
	q, err := queue.New(rdb, queue.Options{Namespace: redistest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx, cancel := context.WithCancel(context.Background())
	g := poller.NewHorizonGauge(q, 20*time.Millisecond)
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	redistest.Eventually(t, 5*time.Second, "the first read", func() bool {
		due, _ := horizonSeries(t, reg)
		return len(due) == 5 && due["1w"] == 0
	})
	if _, err := q.Schedule(context.Background(), "a", time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, 5*time.Second, "a refresh counting the new timer", func() bool {
		due, _ := horizonSeries(t, reg)
		return due["1h"] == 1 && due["1m"] == 0
	})
	cancel()
	<-done
	redistest.Eventually(t, 5*time.Second, "the counts left out once stale", func() bool {
		due, age := horizonSeries(t, reg)
		return len(due) == 0 && age > 0.06
	})
	// A failed read keeps the last counts, fresh ones.
	g = poller.NewHorizonGauge(q, time.Hour)
	reg = prometheus.NewRegistry()
	reg.MustRegister(g)
	if err := g.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.SetError("LOADING Redis is loading the dataset in memory")
	defer m.SetError("")
	if err := g.Refresh(context.Background()); err == nil {
		t.Fatal("Refresh of a Redis that refuses every command succeeded")
	}
	if due, age := horizonSeries(t, reg); due["1h"] != 1 || age < 0 {
		t.Errorf("after a failed read: %v, age %v; want the last read's", due, age)
	}
}
