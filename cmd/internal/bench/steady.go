package bench

// The steady scenario: a constant rate of timers coming due.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/timerq/timerq/queue"
)

// SteadyConfig sizes the steady scenario.
type SteadyConfig struct {
	Rate      int           `flag:"rate" default:"10_000" usage:"steady: timers due per second"`
	Duration  time.Duration `flag:"duration" default:"20s" usage:"steady: how long"`
	Lead      time.Duration `flag:"steady-lead" default:"3s" usage:"steady: how long before due each timer is scheduled"`
	WakeEvery int           `flag:"wake-every" default:"20" usage:"steady: one timer in this many gets a Wait-er"`
	PlotPath  string        `flag:"plot" usage:"steady: write the lateness CDF here (.png or .svg)"`
	// Deliver makes every timer name an endpoint that points at a sink in
	// this process, and runs the workers with --deliver, so that the run
	// costs what push delivery does (one dispatcher per worker).
	Deliver bool `flag:"deliver" usage:"steady: every timer is delivered to a webhook sink in timerbench by the workers' dispatchers (--deliver); reports deliveries, delivery lateness, duplicates and lost"`
}

// SteadyResult is a constant rate of timers coming due.
type SteadyResult struct {
	Common
	Rate         int     `json:"rate"`
	DurationS    float64 `json:"duration_s"`
	Timers       int     `json:"timers"`
	Workers      int     `json:"workers"`
	BatchSize    int     `json:"batch_size"`
	LatenessP50  int64   `json:"lateness_p50_ms"`
	LatenessP99  int64   `json:"lateness_p99_ms"`
	LatenessP999 int64   `json:"lateness_p999_ms"`
	LatenessMax  int64   `json:"lateness_max_ms"`
	Checks
	// WakeSamples is how many timers had a Wait-er (one in WakeEvery).
	WakeSamples int     `json:"wake_samples"`
	WakeP50     float64 `json:"wake_p50_ms"`
	WakeP99     float64 `json:"wake_p99_ms"`
	WakeMax     float64 `json:"wake_max_ms"`
	WakeErrors  int     `json:"wake_errors"`
	// ScheduledLate counts timers whose schedule call returned after their
	// due time (the scheduler fell behind); it should be 0.
	ScheduledLate int    `json:"scheduled_late"`
	Plot          string `json:"plot,omitempty"`
	// Traced is Config.Trace; SpansExported is how many spans the bench's
	// OTLP sink received from the bench and the workers (0 untraced).
	Traced        bool  `json:"traced"`
	SpansExported int64 `json:"spans_exported"`
	// Delivered is what the sink received, with Deliver (nil, and no
	// fields in the output, without).
	*Delivered
}

// Steady schedules cfg.Rate timers per second, each cfg.Lead before it is
// due, for cfg.Duration, and measures lateness from the fire stream and
// wake latency from a sample of Wait-ers in this process. With cfg.Deliver
// every timer is also delivered to a webhook sink in this process, and
// the measured window lasts until the sink has them all (or 30 s more).
func (e *Env) Steady(ctx context.Context, cfg SteadyConfig) (*SteadyResult, error) {
	withDefaults(&cfg)
	if cfg.Rate < 1 || cfg.Duration < 0 || cfg.WakeEvery < 1 {
		return nil, fmt.Errorf("bench: steady: --rate, --duration and --wake-every must be positive")
	}
	s := setup{name: "steady", startWorkers: true}
	var sk *sink
	if cfg.Deliver {
		var err error
		if sk, err = startSink(); err != nil {
			return nil, err
		}
		defer sk.close() // after st.close, which stops the workers
		s.workerArgs = []string{"--deliver", "--deliver-allow", sinkAllow}
	}
	st, err := e.prepare(ctx, s)
	if err != nil {
		return nil, err
	}
	defer st.close()
	q := st.q
	endpoint := ""
	if sk != nil {
		if err := sk.putEndpoint(ctx, q); err != nil {
			return nil, err
		}
		endpoint = sinkEndpoint
	}
	wq, closeQ, err := e.ownQueue("timerbench-waiters", 0)
	if err != nil {
		return nil, err
	}
	defer closeQ()

	run := rand.Uint32()
	total := int(float64(cfg.Rate) * cfg.Duration.Seconds())
	start := e.serverNow()
	t0 := start.Add(cfg.Lead)
	step := time.Second / time.Duration(cfg.Rate)
	dueOf := func(i int) time.Time { return t0.Add(time.Duration(i) * step) }
	samples := (total + cfg.WakeEvery - 1) / cfg.WakeEvery
	wakes := make([]time.Time, samples)
	wakeErr := make([]error, samples)
	wctx, cancel := context.WithTimeout(ctx, cfg.Lead+cfg.Duration+60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	e.logf("steady: %d timers/s for %v, each scheduled %v ahead, 1 in %d waited", cfg.Rate, cfg.Duration, cfg.Lead, cfg.WakeEvery)
	w := e.startWindow(ctx)
	late := 0
	// Timer i is scheduled once the server clock reaches its due - lead.
	err = e.pace(ctx, start, step, total, 5000, 2*time.Millisecond, func(batch []queue.NewTimer, from int) error {
		for i := range batch {
			batch[i] = e.own(queue.NewTimer{ID: timerID(run, from+i), Due: dueOf(from + i), Payload: payload16, Endpoint: endpoint}, from+i)
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			return fmt.Errorf("bench: ScheduleBatch: %w", err)
		}
		now := e.serverNow().UnixMilli()
		for _, t := range batch {
			if t.Due.UnixMilli() <= now {
				late++
			}
		}
		for i := (from + cfg.WakeEvery - 1) / cfg.WakeEvery * cfg.WakeEvery; i < from+len(batch); i += cfg.WakeEvery {
			wg.Go(func() {
				wakeErr[i/cfg.WakeEvery] = wq.Wait(wctx, timerID(run, i))
				wakes[i/cfg.WakeEvery] = time.Now()
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := st.awaitFires(ctx, total, cfg.Lead+30*time.Second); err != nil {
		return nil, err
	}
	if sk != nil {
		if err := sk.await(ctx, total, 30*time.Second); err != nil {
			return nil, err
		}
	}
	time.Sleep(100 * time.Millisecond)
	wg.Wait()
	common, fc, err := st.finish(ctx, w, runIDs(run, total))
	if err != nil {
		return nil, err
	}
	r := &SteadyResult{Common: common, Rate: cfg.Rate, DurationS: cfg.Duration.Seconds(),
		Timers: total, Workers: e.cfg.Workers, BatchSize: e.cfg.BatchSize, ScheduledLate: late, Checks: fc.Checks}
	r.Traced, r.SpansExported = e.tracing != nil, e.tracing.received(ctx)
	if sk != nil {
		r.Delivered = sk.result(run, total, dueOf, e.toServerMs)
	}
	r.LatenessP50, r.LatenessP99 = pct(fc.lateness, 0.5), pct(fc.lateness, 0.99)
	r.LatenessP999, r.LatenessMax = pct(fc.lateness, 0.999), pct(fc.lateness, 1)
	var wake []float64
	for k := range samples {
		if wakeErr[k] != nil {
			r.WakeErrors++
			continue
		}
		// From the due time itself, to the microsecond: due times are
		// kept to the microsecond, and measured from the millisecond
		// floored below it a wake would look up to 1 ms later than it is.
		due := dueOf(k * cfg.WakeEvery)
		wake = append(wake, e.toServerMs(wakes[k])-float64(due.UnixMicro())/1000)
	}
	slices.Sort(wake)
	r.WakeSamples = len(wake)
	r.WakeP50, r.WakeP99, r.WakeMax = round3(pct(wake, 0.5)), round3(pct(wake, 0.99)), round3(pct(wake, 1))
	if cfg.PlotPath != "" {
		title := fmt.Sprintf("timerq steady: %d timers/s for %v, %d timerworkers", cfg.Rate, cfg.Duration, e.cfg.Workers)
		if err := plotCDF(cfg.PlotPath, title, fc.lateness, wake); err != nil {
			return nil, err
		}
		r.Plot = cfg.PlotPath
	}
	return r, nil
}
