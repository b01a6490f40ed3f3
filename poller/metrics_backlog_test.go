package poller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/poller"
	"github.com/timerq/timerq/queue"
)

// TestBacklogCollector: the backlog gauges come from Redis at scrape time,
// with no poller and no maintenance lock, so any worker exports them; a
// Redis that does not answer gives success 0 and no stale numbers.
func TestBacklogCollector(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		q, err := queue.New(b.Client, queue.Options{Namespace: redistest.Namespace(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		now := time.Now()
		if _, err := q.ScheduleBatch(ctx, []queue.NewTimer{
			{ID: "a", Due: now.Add(-3 * time.Second)}, {ID: "b", Due: now.Add(-time.Second)}, {ID: "c", Due: now.Add(time.Hour)},
		}); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.XGroupCreateMkStream(ctx, q.Keys().Stream(0), "billing", "0").Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.XAdd(ctx, &redis.XAddArgs{Stream: q.Keys().DeadLetter(0), Values: []any{"id", "x"}}).Err(); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		wrapped := prometheus.WrapRegistererWith(prometheus.Labels{"namespace": q.Namespace()}, reg)
		wrapped.MustRegister(poller.NewBacklogCollector(q, 0), poller.NewBuildInfo("v1.2.3"))
		ns := `namespace="` + q.Namespace() + `"`
		want := `
# HELP timerq_timers_scheduled Scheduled timers in the namespace, read at scrape time.
# TYPE timerq_timers_scheduled gauge
timerq_timers_scheduled{` + ns + `} 3
# HELP timerq_timers_overdue Scheduled timers past their due time, by the Redis clock, read at scrape time.
# TYPE timerq_timers_overdue gauge
timerq_timers_overdue{` + ns + `} 2
# HELP timerq_dead_letters Entries in the namespace's dead-letter streams (every shard's).
# TYPE timerq_dead_letters gauge
timerq_dead_letters{` + ns + `} 1
# HELP timerq_consumer_group_pending Fire events delivered to the group and not yet acknowledged, over every shard.
# TYPE timerq_consumer_group_pending gauge
timerq_consumer_group_pending{group="billing",` + ns + `} 0
# HELP timerq_backlog_scrape_success 1 if the backlog gauges were read from Redis at this scrape, else 0.
# TYPE timerq_backlog_scrape_success gauge
timerq_backlog_scrape_success{` + ns + `} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "timerq_timers_scheduled", "timerq_timers_overdue",
			"timerq_dead_letters", "timerq_consumer_group_pending", "timerq_backlog_scrape_success"); err != nil {
			t.Error(err)
		}
		// The quotas: the defaults, and the usage against each.
		d := queue.DefaultQuotas
		if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP timerq_quota_limit The namespace's quota (queue.Quotas; 0 = unlimited), read at scrape time.
# TYPE timerq_quota_limit gauge
timerq_quota_limit{`+ns+`,quota="endpoints"} %d
timerq_quota_limit{`+ns+`,quota="pending"} %d
timerq_quota_limit{`+ns+`,quota="schedules"} %d
# HELP timerq_quota_usage What the namespace holds against each quota, read at scrape time.
# TYPE timerq_quota_usage gauge
timerq_quota_usage{`+ns+`,quota="endpoints"} 0
timerq_quota_usage{`+ns+`,quota="pending"} 3
timerq_quota_usage{`+ns+`,quota="schedules"} 0
`, d.Endpoints, d.Pending, d.Schedules)), "timerq_quota_limit", "timerq_quota_usage"); err != nil {
			t.Error(err)
		}
		age, err := testutil.GatherAndCount(reg, "timerq_overdue_oldest_age_seconds")
		if err != nil || age != 1 {
			t.Errorf("timerq_overdue_oldest_age_seconds series = %d, %v", age, err)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "timerq_overdue_oldest_age_seconds" {
				if v := mf.GetMetric()[0].GetGauge().GetValue(); v < 2.5 || v > 60 {
					t.Errorf("oldest overdue age = %v s, want about 3", v)
				}
			}
			if mf.GetName() == "timerq_build_info" {
				if s := mf.GetMetric()[0].String(); !strings.Contains(s, "v1.2.3") {
					t.Errorf("build info = %s", s)
				}
			}
		}

		// Redis gone: success 0, no stale backlog.
		dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
		defer dead.Close()
		q2, _ := queue.New(dead, queue.Options{Namespace: q.Namespace()})
		defer q2.Close()
		reg2 := prometheus.NewRegistry()
		reg2.MustRegister(poller.NewBacklogCollector(q2, time.Second))
		if err := testutil.GatherAndCompare(reg2, strings.NewReader(`
# HELP timerq_backlog_scrape_success 1 if the backlog gauges were read from Redis at this scrape, else 0.
# TYPE timerq_backlog_scrape_success gauge
timerq_backlog_scrape_success 0
`)); err != nil {
			t.Errorf("with Redis down: %v", err)
		}
	})
}
