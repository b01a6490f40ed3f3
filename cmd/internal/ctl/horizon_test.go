package ctl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// TestStatsShowsTheDueHorizon: on a sharded namespace with timers spread
// over a week, stats prints the cumulative due horizon, in text and JSON,
// and it is what timerworker's gauge exports.
func TestStatsShowsTheDueHorizon(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newCLI(t, b)
		if _, err := queue.CreateNamespace(ctx, b.Client, c.ns, 4); err != nil {
			t.Fatal(err)
		}
		now, err := b.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if b.Mini != nil {
			now = now.Truncate(time.Millisecond)
			b.Mini.SetTime(now) // stands still: the counts cannot move
		}
		var batch []queue.NewTimer
		for i, off := range []time.Duration{-time.Hour, -time.Second, 40 * time.Second, 40 * time.Minute,
			13 * time.Hour, 4 * 24 * time.Hour, 10 * 24 * time.Hour} {
			for j := range 3 {
				batch = append(batch, queue.NewTimer{ID: fmt.Sprintf("h%d-%d", i, j), Due: now.Add(off)})
			}
		}
		if _, err := c.q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}

		r := c.ok("stats")
		if !strings.Contains(squeeze(r.stdout), "\ndue within overdue 6, 1m 9, 1h 12, 1d 15, 1w 18 (cumulative)\n") {
			t.Errorf("stats lacks the due horizon:\n%s", r.stdout)
		}
		var js struct {
			DueWithin []api.DueWithinJSON `json:"due_within"`
			Shards    []map[string]any    `json:"shards"`
		}
		if err := json.Unmarshal([]byte(c.ok("-o", "json", "stats").stdout), &js); err != nil {
			t.Fatal(err)
		}
		want := []api.DueWithinJSON{{Within: "overdue", Count: 6}, {Within: "1m", Count: 9}, {Within: "1h", Count: 12},
			{Within: "1d", Count: 15}, {Within: "1w", Count: 18}}
		if !slices.Equal(js.DueWithin, want) {
			t.Errorf("JSON due_within = %v, want %v", js.DueWithin, want)
		}
		for _, sh := range js.Shards {
			if _, ok := sh["due_within"]; ok {
				t.Errorf("a shard's entry has due_within: %v", sh)
			}
		}

		// The gauge, read as timerworker reads it.
		g := poller.NewHorizonGauge(c.q, time.Hour)
		if err := g.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(g)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var gauge []api.DueWithinJSON
		for _, mf := range mfs {
			if mf.GetName() == "timerq_namespace_due_timers" {
				for _, m := range mf.GetMetric() {
					gauge = append(gauge, api.DueWithinJSON{Within: m.GetLabel()[0].GetValue(), Count: int64(m.GetGauge().GetValue())})
				}
			}
		}
		order := func(a, b api.DueWithinJSON) int { return int(a.Count - b.Count) }
		slices.SortFunc(gauge, order)
		if !slices.Equal(gauge, js.DueWithin) {
			t.Errorf("gauge %v, timerctl stats %v", gauge, js.DueWithin)
		}
	})
}
