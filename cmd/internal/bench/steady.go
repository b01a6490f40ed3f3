package bench

// The steady scenario: a constant rate of timers coming due.

import (
	"cmp"
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
	// Rate is timers due per second. Default 10,000.
	Rate int
	// Duration is how long timers keep coming due. Default 20 s.
	Duration time.Duration
	// Lead is how long before its due time each timer is scheduled.
	// Default 3 s.
	Lead time.Duration
	// WakeEvery samples one timer in WakeEvery for a Wait-er. Default 20.
	WakeEvery int
	// PlotPath, if set, receives a lateness CDF plot (.png or .svg).
	PlotPath string
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
}

// withDefaults fills in the zero fields of cfg.
func (cfg SteadyConfig) withDefaults() SteadyConfig {
	cfg.Rate = cmp.Or(cfg.Rate, 10_000)
	cfg.Duration = cmp.Or(cfg.Duration, 20*time.Second)
	cfg.Lead = cmp.Or(cfg.Lead, 3*time.Second)
	cfg.WakeEvery = cmp.Or(cfg.WakeEvery, 20)
	return cfg
}

// Steady schedules cfg.Rate timers per second, each cfg.Lead before it is
// due, for cfg.Duration, and measures lateness from the fire stream and
// wake latency from a sample of Wait-ers in this process.
func (e *Env) Steady(ctx context.Context, cfg SteadyConfig) (*SteadyResult, error) {
	cfg = cfg.withDefaults()
	if cfg.Rate < 1 || cfg.Duration < 0 || cfg.WakeEvery < 1 {
		return nil, fmt.Errorf("bench: steady: --rate, --duration and --wake-every must be positive")
	}
	st, err := e.prepare(ctx, setup{name: "steady", startWorkers: true})
	if err != nil {
		return nil, err
	}
	defer st.close()
	q, ws := st.q, st.ws
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
	expected := make(map[string]bool, total)
	dueMs := make([]int64, total)
	for i := range total {
		expected[timerID(run, i)] = true
		dueMs[i] = dueOf(i).UnixMilli()
	}
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
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	late := 0
	batch := make([]queue.NewTimer, 0, 5000)
	for next := 0; next < total; {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		// Timer i is scheduled once the server clock reaches its due - lead.
		upto := min(total, int(e.serverNow().Sub(start)/step)+1)
		for next < upto {
			batch = batch[:0]
			end := min(upto, next+cap(batch))
			for i := next; i < end; i++ {
				batch = append(batch, queue.NewTimer{ID: timerID(run, i), Due: dueOf(i), Payload: payload16})
			}
			if _, err := q.ScheduleBatch(ctx, batch); err != nil {
				return nil, fmt.Errorf("bench: ScheduleBatch: %w", err)
			}
			now := e.serverNow().UnixMilli()
			for i := next; i < end; i++ {
				if dueMs[i] <= now {
					late++
				}
				if i%cfg.WakeEvery == 0 {
					k, id := i/cfg.WakeEvery, timerID(run, i)
					wg.Go(func() {
						wakeErr[k] = wq.Wait(wctx, id)
						wakes[k] = time.Now()
					})
				}
			}
			next = end
		}
	}
	err = waitUntil(ctx, cfg.Lead+30*time.Second, 20*time.Millisecond, func() (bool, error) {
		n, err := e.rdb.XLen(ctx, q.Keys().Stream(0)).Result()
		return n >= int64(total), err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: waiting for the workers to fire %d timers: %w", total, err)
	}
	time.Sleep(100 * time.Millisecond)
	r := &SteadyResult{Common: w.end(ctx, "steady"), Rate: cfg.Rate, DurationS: cfg.Duration.Seconds(),
		Timers: total, Workers: e.cfg.Workers, BatchSize: e.cfg.BatchSize, ScheduledLate: late}
	wg.Wait()
	cpu, errs := ws.stop()
	if errs != "" {
		return nil, fmt.Errorf("bench: timerworker failed: %s", errs)
	}
	r.WorkerCPUS = round3(cpu)
	r.Traced, r.SpansExported = e.tracing != nil, e.tracing.received(ctx)
	fc, err := checkFires(ctx, e.rdb, q.Keys().Stream(0), expected)
	if err != nil {
		return nil, err
	}
	r.Checks = Checks{FiredEarly: fc.early, Duplicates: fc.dups, Lost: fc.lost}
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
