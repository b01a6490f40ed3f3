package poller

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/timerq/timerq/queue"
)

// DefaultHorizonInterval is how often a HorizonGauge reads the due horizon
// when NewHorizonGauge is given 0.
const DefaultHorizonInterval = 15 * time.Second

// horizonStale is how many intervals the last read stays exported: after
// that, only its age is.
const horizonStale = 3

// HorizonGauge exports the namespace's due horizon
// (queue.Inspector.DueHorizon with queue.DueHorizonBounds): how many
// scheduled timers come due within each bound of the Redis server's clock.
// Run reads it once per interval, one script per shard in one round trip;
// a scrape reads only what Run last read, never Redis, so scrapes cost
// Redis nothing however often they come:
//
//	timerq_namespace_due_timers{within}       timers due at or before the server's now + within,
//	                                          within = overdue (now), 1m, 1h, 1d, 1w: cumulative,
//	                                          as Prometheus's le, so every count includes the overdue
//	timerq_namespace_due_timers_age_seconds   seconds since that read succeeded, by this process's clock
//
// A read that fails (some shard did not answer) changes nothing: the last
// counts stay, and their age grows. Once the age passes three intervals the
// counts are left out, rather than exported stale; the age stays. Before
// the first read succeeds neither is exported. Every replica exports the
// same namespace-wide counts: aggregate with max(), not sum().
type HorizonGauge struct {
	q        *queue.Queue
	interval time.Duration

	mu   sync.Mutex
	last queue.DueHorizon
	at   time.Time // when the last successful read ended; zero before

	due, age *prometheus.Desc
}

// NewHorizonGauge returns a gauge of q's due horizon, read every interval
// (0 means DefaultHorizonInterval) once Run runs. Register it as any
// collector.
func NewHorizonGauge(q *queue.Queue, interval time.Duration) *HorizonGauge {
	if interval <= 0 {
		interval = DefaultHorizonInterval
	}
	return &HorizonGauge{q: q, interval: interval,
		due: prometheus.NewDesc("timerq_namespace_due_timers",
			"Scheduled timers due at or before the Redis server's now + within (overdue: now), cumulative like le, read once per refresh interval, not per scrape; see timerq_namespace_due_timers_age_seconds. The same on every replica: aggregate with max(), not sum().",
			[]string{"within"}, nil),
		age: prometheus.NewDesc("timerq_namespace_due_timers_age_seconds",
			"Seconds since timerq_namespace_due_timers was last read from Redis; past three refresh intervals the counts are left out.", nil, nil),
	}
}

// Interval is how often Run reads the due horizon.
func (g *HorizonGauge) Interval() time.Duration { return g.interval }

// Refresh reads the due horizon once, bounded by the interval and by 2 s,
// and keeps it for the scrapes. On an error, including a *queue.ShardError
// (a sum without some shards would look like fewer timers), it keeps the
// last counts.
func (g *HorizonGauge) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(g.interval, 2*time.Second))
	defer cancel()
	h, err := g.q.Inspect().DueHorizon(ctx, queue.DueHorizonBounds)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.last, g.at = h, time.Now()
	g.mu.Unlock()
	return nil
}

// Run refreshes the gauge at once, then every interval, until ctx ends.
// A failed read waits for the next interval: the age gauge tells.
func (g *HorizonGauge) Run(ctx context.Context) {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		_ = g.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Describe implements prometheus.Collector.
func (g *HorizonGauge) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.due
	ch <- g.age
}

// Collect implements prometheus.Collector: the last read's counts, without
// a call to Redis.
func (g *HorizonGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	h, at := g.last, g.at
	g.mu.Unlock()
	if at.IsZero() {
		return
	}
	age := time.Since(at)
	ch <- prometheus.MustNewConstMetric(g.age, prometheus.GaugeValue, age.Seconds())
	if age > horizonStale*g.interval {
		return
	}
	for i, w := range h.Within {
		ch <- prometheus.MustNewConstMetric(g.due, prometheus.GaugeValue, float64(h.Due[i]), queue.HorizonName(w))
	}
}
