package poller

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/queue"
)

// Metrics are the Prometheus collectors of a Poller. Create them with
// NewMetrics, register them with Register and pass Hooks to Options.Hooks.
type Metrics struct {
	// Fired counts timers fired by this process's claims whose reply it
	// received (timerq_timers_fired_total). A claim whose reply is lost
	// fires its timers uncounted here: NewCountersCollector exports what
	// Redis recorded.
	Fired prometheus.Counter
	// ClaimErrors counts failed claims (timerq_claim_errors_total).
	ClaimErrors prometheus.Counter
	// ClaimBatchSize observes how many timers each successful claim of a
	// shard fired, 0 included (timerq_claim_batch_size).
	ClaimBatchSize prometheus.Histogram
	// FireLateness observes FiredAt - Due of each timer in Fired, both
	// server times (timerq_fire_lateness_seconds).
	FireLateness prometheus.Histogram
	// Purged counts records removed by maintenance (timerq_purged_total).
	Purged prometheus.Counter
	// MaintenanceHolder is 1 while this process holds the maintenance lock
	// (timerq_maintenance_holder).
	MaintenanceHolder prometheus.Gauge
	// ShardsOwned is how many shards this process claims
	// (timerq_shards_owned).
	ShardsOwned prometheus.Gauge
	// ShardPauses counts claims of a shard refused because its Cluster slot
	// was migrating (timerq_shard_pauses_total).
	ShardPauses prometheus.Counter
	// ShardUnavailable counts claims of a shard that failed because the
	// Redis serving it was not there, by reason: "cluster_down"
	// (CLUSTERDOWN) or "unreachable" (a failed connection)
	// (timerq_shard_unavailable_total; see Hooks.Unavailable).
	ShardUnavailable *prometheus.CounterVec
	// ReplicasSetting is the namespace's replicas setting N
	// (queue.SetReplicas; timerq_replicas_setting), 0 while off.
	ReplicasSetting prometheus.Gauge
	// MasterReplicasMin is the fewest replicas in sync that a Redis master
	// serving the namespace's shards had at the poller's last check
	// (Options.ReplicasCheck; timerq_master_replicas_min). Below
	// ReplicasSetting the master's shards cannot commit; equal to it, its
	// failover stops them.
	MasterReplicasMin prometheus.Gauge
}

// ClaimBatchSizeHelp is the help of timerq_claim_batch_size. It observes
// every successful claim of one shard, the empty ones too, which are most
// of them (one each max poll interval when nothing is due): so its _count
// counts claims, and TimerqNoWorkerClaiming alerts on it.
const ClaimBatchSizeHelp = "Timers fired by each successful claim of one shard, 0 for a claim that found nothing due; its _count is the number of claims."

// NewMetrics returns unregistered collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		Fired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "timerq_timers_fired_total",
			Help: "Timers fired by this process's claims whose reply it received; a claim whose reply was lost (a client timeout while Redis ran it) fired its timers uncounted here. timerq_namespace_timers_fired_total counts every fire.",
		}),
		ClaimErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "timerq_claim_errors_total", Help: "Claims that failed (Redis errors or timeouts).",
		}),
		ClaimBatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "timerq_claim_batch_size", Help: ClaimBatchSizeHelp,
			Buckets: []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000},
		}),
		FireLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "timerq_fire_lateness_seconds",
			Help:    "Fired time minus due time, both by the Redis server clock, of the timers in timerq_timers_fired_total; timerq_namespace_fire_lateness_seconds has every fire.",
			Buckets: latenessBuckets(),
		}),
		Purged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "timerq_purged_total", Help: "Settled timer records purged by this process's maintenance.",
		}),
		MaintenanceHolder: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "timerq_maintenance_holder", Help: "1 while this process holds the namespace's maintenance lock.",
		}),
		ShardsOwned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "timerq_shards_owned", Help: "Shards of the namespace this process claims.",
		}),
		ShardPauses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "timerq_shard_pauses_total", Help: "Shard claims refused while the shard's Cluster slot migrated (TRYAGAIN, ASK, MOVED).",
		}),
		ShardUnavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "timerq_shard_unavailable_total", Help: "Shard claims that failed because the Redis serving the shard was not there, by reason: cluster_down (CLUSTERDOWN, a Cluster failover under way) or unreachable (the connection failed: the node is down, or a failed master not yet replaced).",
		}, []string{"reason"}),
		ReplicasSetting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "timerq_replicas_setting", Help: "The namespace's replicas setting N (timerctl namespace create --replicas N): a fire or schedule waits for N replicas; 0 = off.",
		}),
		MasterReplicasMin: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "timerq_master_replicas_min", Help: "The fewest replicas in sync (INFO replication, state=online) of any Redis master serving the namespace's shards, as this process last read them while the replicas setting is on. Below timerq_replicas_setting the master's shards cannot commit; at it, the master's failover stops them.",
		}),
	}
}

// Register registers every collector with reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Fired, m.ClaimErrors, m.ClaimBatchSize, m.FireLateness, m.Purged, m.MaintenanceHolder, m.ShardsOwned, m.ShardPauses, m.ShardUnavailable, m.ReplicasSetting, m.MasterReplicasMin} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Hooks returns the hooks that feed m.
func (m *Metrics) Hooks() Hooks {
	return Hooks{
		Claimed: func(res queue.ClaimResult) {
			m.ClaimBatchSize.Observe(float64(len(res.Fired)))
			m.Fired.Add(float64(len(res.Fired)))
			for _, f := range res.Fired {
				m.FireLateness.Observe(f.Lateness().Seconds())
			}
		},
		ClaimFailed: func(error) { m.ClaimErrors.Inc() },
		Maintenance: func(held bool) {
			if held {
				m.MaintenanceHolder.Set(1)
				return
			}
			m.MaintenanceHolder.Set(0)
		},
		Purged: func(n int) { m.Purged.Add(float64(n)) },
		Owned:  func(shards []int) { m.ShardsOwned.Set(float64(len(shards))) },
		Paused: func(int, error) { m.ShardPauses.Inc() },
		Unavailable: func(_ int, err error) {
			m.ShardUnavailable.WithLabelValues(UnavailableReason(err)).Inc()
		},
		Replicas: func(setting int, masters []queue.MasterReplicas) {
			m.ReplicasSetting.Set(float64(setting))
			if len(masters) == 0 {
				return
			}
			fewest := masters[0].Replicas
			for _, ms := range masters[1:] {
				fewest = min(fewest, ms.Replicas)
			}
			m.MasterReplicasMin.Set(float64(fewest))
		},
	}
}

func latenessBuckets() []float64 {
	out := make([]float64, len(queue.LatenessBuckets))
	for i, b := range queue.LatenessBuckets {
		out[i] = b.Seconds()
	}
	return out
}

// CountersTimeout bounds the read of the namespace's counters at a scrape.
const CountersTimeout = time.Second

// NewCountersCollector returns a collector of the namespace's counters
// (queue.Inspector.Counters), read from Redis at each scrape: what every claim of
// every replica recorded, including the claims whose reply was lost. It
// exports timerq_namespace_timers_fired_total (a counter) and
// timerq_namespace_fire_lateness_seconds (a histogram), and
// timerq_namespace_overlap_skipped_total (occurrences consumers skipped
// under their schedule's overlap policy, queue.OverlapSkip), and
// timerq_namespace_records_quarantined_total (records claims moved to the
// quarantine, queue.Quarantine.List: alert on any increase), and
// timerq_namespace_deadline_dead_letters_total (fires dead-lettered for
// their deadline, queue.ReasonDeadline, never delivered late). Every replica
// exports the same namespace-wide values, so aggregate across replicas with
// max(), never sum(). While Redis does not answer within CountersTimeout
// the scrape leaves them out, rather than failing every other metric.
func NewCountersCollector(q *queue.Queue) prometheus.Collector {
	return &countersCollector{
		q: q,
		fired: prometheus.NewDesc("timerq_namespace_timers_fired_total",
			"Timers fired in the namespace, as Redis recorded them in the claim script, whichever replica claimed them and whether or not its reply arrived. The same on every replica: aggregate with max(), not sum().", nil, nil),
		lateness: prometheus.NewDesc("timerq_namespace_fire_lateness_seconds",
			"Fired time minus due time, by the Redis server clock, of every timer fired in the namespace, as Redis recorded it. The same on every replica: aggregate with max(), not sum().", nil, nil),
		skipped: prometheus.NewDesc("timerq_namespace_overlap_skipped_total",
			"Occurrences of recurring schedules that consumer groups acknowledged without handling because the group had the schedule's previous occurrence pending (overlap policy skip), all groups, as Redis recorded them. The same on every replica: aggregate with max(), not sum().", nil, nil),
		quarantined: prometheus.NewDesc("timerq_namespace_records_quarantined_total",
			"Records that claims moved to the quarantine instead of firing them, because something other than timerq wrote them in a form timerq cannot fire (list them with timerctl quarantine list), as Redis recorded them. The same on every replica: aggregate with max(), not sum().", nil, nil),
		deadline: prometheus.NewDesc("timerq_namespace_deadline_dead_letters_total",
			"Fires dead-lettered with the reason deadline because their deadline (FireWithin, FireBy) had passed, or would have before their next delivery, instead of being delivered late: by consumer groups' leases and releases and by dispatchers, all groups, as Redis recorded them. The same on every replica: aggregate with max(), not sum().", nil, nil),
	}
}

type countersCollector struct {
	q                                               *queue.Queue
	fired, lateness, skipped, quarantined, deadline *prometheus.Desc
}

func (c *countersCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.fired
	ch <- c.lateness
	ch <- c.skipped
	ch <- c.quarantined
	ch <- c.deadline
}

func (c *countersCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), CountersTimeout)
	defer cancel()
	n, err := c.q.Inspect().Counters(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.fired, prometheus.CounterValue, float64(n.Fired))
	buckets := make(map[float64]uint64, len(n.Lateness))
	for i, b := range queue.LatenessBuckets {
		buckets[b.Seconds()] = uint64(n.Lateness[i])
	}
	ch <- prometheus.MustNewConstHistogram(c.lateness, uint64(n.Fired), n.LatenessSum.Seconds(), buckets)
	ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.CounterValue, float64(n.OverlapSkipped))
	ch <- prometheus.MustNewConstMetric(c.quarantined, prometheus.CounterValue, float64(n.Quarantined))
	ch <- prometheus.MustNewConstMetric(c.deadline, prometheus.CounterValue, float64(n.DeadlineDeadLetters))
}

// PoolStatser is what NewPoolCollector reads: every go-redis client.
type PoolStatser interface {
	PoolStats() *redis.PoolStats
}

// NewPoolCollector returns a collector of the client's connection pool
// stats, as timerq_redis_pool_* metrics.
func NewPoolCollector(rdb PoolStatser) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("timerq_redis_pool_"+name, help, nil, nil)
	}
	return &poolCollector{
		rdb:      rdb,
		hits:     d("hits_total", "Times a free connection was found in the pool."),
		misses:   d("misses_total", "Times no free connection was found in the pool."),
		timeouts: d("timeouts_total", "Times waiting for a connection timed out."),
		total:    d("conns", "Connections in the pool."),
		idle:     d("idle_conns", "Idle connections in the pool."),
		stale:    d("stale_conns_total", "Stale connections removed from the pool."),
	}
}

type poolCollector struct {
	rdb                                        PoolStatser
	hits, misses, timeouts, total, idle, stale *prometheus.Desc
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hits, c.misses, c.timeouts, c.total, c.idle, c.stale} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.rdb.PoolStats()
	if s == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(s.Hits))
	ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(s.Misses))
	ch <- prometheus.MustNewConstMetric(c.timeouts, prometheus.CounterValue, float64(s.Timeouts))
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.TotalConns))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.IdleConns))
	ch <- prometheus.MustNewConstMetric(c.stale, prometheus.CounterValue, float64(s.StaleConns))
}
