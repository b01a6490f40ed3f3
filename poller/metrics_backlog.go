package poller

import (
	"context"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/timerq/timerq/queue"
)

// NewBacklogCollector returns a collector that reads the namespace's
// backlog from Redis at each scrape, so that every worker exports it, not
// only the maintenance holder: the "timers are late" alert then still fires
// when the holder is gone. The series are the namespace's, not the
// process's, so aggregate them across replicas with max(), not sum():
//
//	timerq_timers_scheduled             scheduled timers (queue.Stats)
//	timerq_timers_overdue               scheduled timers past their due time
//	timerq_overdue_oldest_age_seconds   age of the oldest overdue timer, 0 if none
//	timerq_dead_letters                 entries in the dead-letter stream
//	timerq_consumer_group_pending       per group: delivered, not acknowledged
//	timerq_consumer_group_lag           per group: not yet delivered (absent when Redis cannot tell)
//	timerq_backlog_scrape_success       1 if the reads above succeeded, else 0
//	timerq_namespace_workers            workers whose heartbeat is live, as Redis lists them (queue.Inspector.Workers)
//	timerq_namespace_worker_last_seen_timestamp_seconds
//	                                    the namespace's latest heartbeat (absent if none was recorded)
//	timerq_quota_limit                  per quota (pending, endpoints, schedules): the namespace's quota, 0 = unlimited
//	timerq_quota_usage                  per quota: what the namespace holds (absent when it cannot be read,
//	                                    e.g. a Redis user without +hlen; the other series are still exported)
//
// Each scrape costs three O(log N) or O(1) reads in one round trip or
// three, bounded by timeout (0 means 2 s). When Redis does not answer, only
// timerq_backlog_scrape_success (0) is exported, rather than stale numbers.
func NewBacklogCollector(q *queue.Queue, timeout time.Duration) prometheus.Collector {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &backlogCollector{
		q: q, timeout: timeout,
		scheduled:  d("timerq_timers_scheduled", "Scheduled timers in the namespace, read at scrape time."),
		overdue:    d("timerq_timers_overdue", "Scheduled timers past their due time, by the Redis clock, read at scrape time."),
		overdueAge: d("timerq_overdue_oldest_age_seconds", "How long ago the oldest overdue timer came due (0 if none), by the Redis clock."),
		dead:       d("timerq_dead_letters", "Entries in the namespace's dead-letter streams (every shard's)."),
		pending:    d("timerq_consumer_group_pending", "Fire events delivered to the group and not yet acknowledged, over every shard.", "group"),
		lag:        d("timerq_consumer_group_lag", "Fire events in the streams not yet delivered to the group, over every shard.", "group"),
		success:    d("timerq_backlog_scrape_success", "1 if the backlog gauges were read from Redis at this scrape, else 0."),
		workers:    d("timerq_namespace_workers", "Workers serving the namespace: those whose heartbeat Redis holds as live, read at scrape time."),
		lastSeen:   d("timerq_namespace_worker_last_seen_timestamp_seconds", "Unix time of the namespace's latest worker heartbeat, by the Redis clock."),
		quotaLimit: d("timerq_quota_limit", "The namespace's quota (queue.Quotas; 0 = unlimited), read at scrape time.", "quota"),
		quotaUsage: d("timerq_quota_usage", "What the namespace holds against each quota, read at scrape time.", "quota"),
	}
}

type backlogCollector struct {
	q       *queue.Queue
	timeout time.Duration

	scheduled, overdue, overdueAge, dead, pending, lag, success, workers, lastSeen *prometheus.Desc
	quotaLimit, quotaUsage                                                         *prometheus.Desc
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.scheduled, c.overdue, c.overdueAge, c.dead, c.pending, c.lag, c.success, c.workers, c.lastSeen,
		c.quotaLimit, c.quotaUsage} {
		ch <- d
	}
}

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	s, err := c.q.Stats(ctx)
	if err != nil {
		gauge(c.success, 0)
		return
	}
	dead, err1 := c.q.Deliveries().DeadLetterCount(ctx)
	groups, err2 := c.q.Inspect().Groups(ctx)
	ws, err3 := c.q.Inspect().Workers(ctx)
	if err1 != nil || err2 != nil || err3 != nil {
		gauge(c.success, 0)
		return
	}
	gauge(c.scheduled, float64(s.Scheduled))
	gauge(c.overdue, float64(s.Overdue))
	gauge(c.overdueAge, s.OldestOverdueAge.Seconds())
	gauge(c.dead, float64(dead))
	gauge(c.workers, float64(len(ws.Live)))
	if !ws.LastSeen.IsZero() {
		gauge(c.lastSeen, float64(ws.LastSeen.UnixMilli())/1000)
	}
	for _, g := range groups {
		gauge(c.pending, float64(g.Pending), g.Name)
		if g.Lag >= 0 {
			gauge(c.lag, float64(g.Lag), g.Name)
		}
	}
	// The quotas apart: a worker's ACL line from before them lacks +hlen,
	// which must not cost the backlog gauges.
	if u, err := c.q.Inspect().Usage(ctx); err == nil {
		for _, x := range []struct {
			name         string
			limit, usage int64
		}{{queue.QuotaPending, u.Quotas.Pending, u.Pending}, {queue.QuotaEndpoints, u.Quotas.Endpoints, u.Endpoints},
			{queue.QuotaSchedules, u.Quotas.Schedules, u.Schedules}} {
			gauge(c.quotaLimit, float64(x.limit), x.name)
			gauge(c.quotaUsage, float64(x.usage), x.name)
		}
	}
	gauge(c.success, 1)
}

// NewBuildInfo returns the timerq_build_info gauge: always 1, with the
// version and Go version as labels, so dashboards can show which versions
// run and alerts can join on them.
func NewBuildInfo(version string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "timerq_build_info",
		Help:        "Always 1; labels name the running version and Go version.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}
