package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/queue"
)

// Common are the fields every result carries, to say what bounds it.
type Common struct {
	Scenario string `json:"scenario"`
	// WallS is the measured window, seconds.
	WallS float64 `json:"wall_s"`
	// RedisCPUS is the server's user+system CPU seconds in the window.
	RedisCPUS float64 `json:"redis_cpu_s"`
	// WorkerCPUS is all timerworker processes' CPU seconds (whole lifetime).
	WorkerCPUS float64 `json:"worker_cpu_s"`
	// BenchCPUS is this process's CPU seconds in the window.
	BenchCPUS float64 `json:"bench_cpu_s"`
}

// Checks are the correctness counters, which must all be 0.
type Checks struct {
	FiredEarly int64 `json:"fired_early"`
	Duplicates int64 `json:"duplicates"`
	Lost       int64 `json:"lost"`
}

// window measures CPU over a span of a scenario.
type window struct {
	e          *Env
	t          time.Time
	redis, cpu float64
}

func (e *Env) startWindow(ctx context.Context) window {
	return window{e: e, t: time.Now(), redis: e.redisCPU(ctx), cpu: selfCPU()}
}

func (w window) end(ctx context.Context, name string) Common {
	return Common{
		Scenario:  name,
		WallS:     round3(time.Since(w.t).Seconds()),
		RedisCPUS: round3(w.e.redisCPU(ctx) - w.redis),
		BenchCPUS: round3(selfCPU() - w.cpu),
	}
}

// CeilingConfig sizes the ceiling scenario.
type CeilingConfig struct {
	// Timers is how many pre-due timers are claimed. Default 100,000.
	Timers int
	// Limit is each Claim's limit. Default queue.MaxBatch.
	Limit int
}

// CeilingResult is the physical limit of the layout: claim.lua back to back
// from one connection, no worker logic.
type CeilingResult struct {
	Common
	Timers   int     `json:"timers"`
	Limit    int     `json:"claim_limit"`
	Claims   int     `json:"claims"`
	FirePerS float64 `json:"fire_per_s"`
	ClaimP50 float64 `json:"claim_p50_ms"`
	ClaimP99 float64 `json:"claim_p99_ms"`
	Checks
}

// Ceiling schedules cfg.Timers timers already due and claims them with
// Queue.Claim in a loop from one connection.
func (e *Env) Ceiling(ctx context.Context, cfg CeilingConfig) (*CeilingResult, error) {
	if cfg.Timers == 0 {
		cfg.Timers = 100_000
	}
	if cfg.Limit == 0 {
		cfg.Limit = queue.MaxBatch
	}
	if err := e.wipe(ctx); err != nil {
		return nil, err
	}
	q, closeQ, err := e.ownQueue("timerbench-ceiling", 1)
	if err != nil {
		return nil, err
	}
	defer closeQ()
	if _, err := q.Claim(ctx, 1); err != nil { // loads the script
		return nil, fmt.Errorf("bench: %w", err)
	}
	run := rand.Uint32()
	due := e.serverNow().Add(-time.Second)
	expected := make(map[string]bool, cfg.Timers)
	if _, err := scheduleAll(ctx, q, cfg.Timers, 1, func(i int) queue.NewTimer {
		return queue.NewTimer{ID: timerID(run, i), Due: due, Payload: payload16}
	}); err != nil {
		return nil, err
	}
	for i := range cfg.Timers {
		expected[timerID(run, i)] = true
	}
	e.logf("ceiling: claiming %d timers, limit %d, one connection", cfg.Timers, cfg.Limit)
	w := e.startWindow(ctx)
	_, lat, el, err := claimAll(ctx, q, cfg.Timers, cfg.Limit, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	r := &CeilingResult{Common: w.end(ctx, "ceiling"), Timers: cfg.Timers, Limit: cfg.Limit, Claims: len(lat)}
	r.WallS = round3(el.Seconds())
	r.FirePerS = round1(float64(cfg.Timers) / el.Seconds())
	slices.Sort(lat)
	r.ClaimP50, r.ClaimP99 = round3(pct(lat, 0.5)), round3(pct(lat, 0.99))
	fc, err := checkFires(ctx, e.rdb, q.StreamKey(), expected)
	if err != nil {
		return nil, err
	}
	r.Checks = Checks{FiredEarly: fc.early, Duplicates: fc.dups, Lost: fc.lost}
	return r, nil
}

// BurstConfig sizes the burst scenario.
type BurstConfig struct {
	// Timers all come due at one instant. Default 100,000.
	Timers int
	// Lead is how far ahead of the start the instant is; scheduling must
	// finish before it. Default 5 s.
	Lead time.Duration
}

// BurstResult is many timers due at one instant, fired by the workers.
type BurstResult struct {
	Common
	Timers       int     `json:"timers"`
	Workers      int     `json:"workers"`
	BatchSize    int     `json:"batch_size"`
	SchedulePerS float64 `json:"schedule_per_s"`
	FirePerS     float64 `json:"fire_per_s"`
	LatenessP50  int64   `json:"lateness_p50_ms"`
	LatenessP99  int64   `json:"lateness_p99_ms"`
	LatenessMax  int64   `json:"lateness_max_ms"`
	Checks
	// FireRedisCPU is Redis's CPU use (cores) from the due instant until
	// the last fire was seen (polled every 20 ms).
	FireRedisCPU    float64 `json:"fire_redis_cpu"`
	CeilingFirePerS float64 `json:"ceiling_fire_per_s"`
	CeilingRatio    float64 `json:"ceiling_ratio"`
}

// Burst schedules cfg.Timers timers due at one instant a few seconds ahead
// from one client, lets the workers fire them, and then measures the
// ceiling with as many timers for ceiling_ratio.
func (e *Env) Burst(ctx context.Context, cfg BurstConfig) (*BurstResult, error) {
	if cfg.Timers == 0 {
		cfg.Timers = 100_000
	}
	if cfg.Lead == 0 {
		cfg.Lead = 5 * time.Second
	}
	if e.cfg.Workers < 1 {
		return nil, fmt.Errorf("bench: burst needs --workers 1 or more")
	}
	if err := e.wipe(ctx); err != nil {
		return nil, err
	}
	q, err := e.queue(e.rdb)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	ws, err := e.startWorkers(ctx)
	if err != nil {
		return nil, err
	}
	defer ws.stop()
	run := rand.Uint32()
	due := e.serverNow().Add(cfg.Lead).Truncate(time.Millisecond)
	expected := make(map[string]bool, cfg.Timers)
	for i := range cfg.Timers {
		expected[timerID(run, i)] = true
	}
	e.logf("burst: scheduling %d timers due in %v", cfg.Timers, cfg.Lead)
	w := e.startWindow(ctx)
	el, err := scheduleAll(ctx, q, cfg.Timers, 1, func(i int) queue.NewTimer {
		return queue.NewTimer{ID: timerID(run, i), Due: due, Payload: payload16}
	})
	if err != nil {
		return nil, err
	}
	if late := e.serverNow().Sub(due); late > 0 {
		return nil, fmt.Errorf("bench: scheduling %d timers took %v, past the due instant by %v; raise --lead", cfg.Timers, el, late)
	}
	// Redis's CPU from the due instant to the last fire says whether the
	// server was the bottleneck (1.0 is one core, all Redis can use).
	time.Sleep(time.Until(due.Add(-e.offset)))
	fireStart, fireCPU := time.Now(), e.redisCPU(ctx)
	limit := cfg.Lead + 30*time.Second + time.Duration(cfg.Timers/5000)*time.Second
	err = waitUntil(ctx, limit, 20*time.Millisecond, func() (bool, error) {
		n, err := e.rdb.XLen(ctx, q.StreamKey()).Result()
		return n >= int64(cfg.Timers), err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: waiting for the workers to fire %d timers: %w", cfg.Timers, err)
	}
	fireWall, fireCPU := time.Since(fireStart).Seconds(), e.redisCPU(ctx)-fireCPU
	time.Sleep(100 * time.Millisecond) // a late duplicate would land now
	r := &BurstResult{Common: w.end(ctx, "burst"), Timers: cfg.Timers, Workers: e.cfg.Workers, BatchSize: e.cfg.BatchSize}
	r.FireRedisCPU = round3(fireCPU / fireWall)
	cpu, errs := ws.stop()
	if errs != "" {
		return nil, fmt.Errorf("bench: timerworker failed: %s", errs)
	}
	r.WorkerCPUS = round3(cpu)
	r.SchedulePerS = round1(float64(cfg.Timers) / el.Seconds())
	fc, err := checkFires(ctx, e.rdb, q.StreamKey(), expected)
	if err != nil {
		return nil, err
	}
	r.Checks = Checks{FiredEarly: fc.early, Duplicates: fc.dups, Lost: fc.lost}
	r.LatenessP50, r.LatenessP99, r.LatenessMax = pct(fc.lateness, 0.5), pct(fc.lateness, 0.99), pct(fc.lateness, 1)
	span := max(fc.lastFire-due.UnixMilli(), 1)
	r.FirePerS = round1(float64(len(fc.lateness)) / (float64(span) / 1000))

	c, err := e.Ceiling(ctx, CeilingConfig{Timers: cfg.Timers})
	if err != nil {
		return nil, fmt.Errorf("bench: burst's ceiling run: %w", err)
	}
	r.CeilingFirePerS = c.FirePerS
	r.CeilingRatio = round3(r.FirePerS / c.FirePerS)
	return r, nil
}

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

// Steady schedules cfg.Rate timers per second, each cfg.Lead before it is
// due, for cfg.Duration, and measures lateness from the fire stream and
// wake latency from a sample of Wait-ers in this process.
func (e *Env) Steady(ctx context.Context, cfg SteadyConfig) (*SteadyResult, error) {
	if cfg.Rate == 0 {
		cfg.Rate = 10_000
	}
	if cfg.Duration == 0 {
		cfg.Duration = 20 * time.Second
	}
	if cfg.Lead == 0 {
		cfg.Lead = 3 * time.Second
	}
	if cfg.WakeEvery == 0 {
		cfg.WakeEvery = 20
	}
	if e.cfg.Workers < 1 {
		return nil, fmt.Errorf("bench: steady needs --workers 1 or more")
	}
	if cfg.Rate < 1 || cfg.Duration < 0 || cfg.WakeEvery < 1 {
		return nil, fmt.Errorf("bench: steady: --rate, --duration and --wake-every must be positive")
	}
	if err := e.wipe(ctx); err != nil {
		return nil, err
	}
	q, err := e.queue(e.rdb)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	wq, closeQ, err := e.ownQueue("timerbench-waiters", 0)
	if err != nil {
		return nil, err
	}
	defer closeQ()
	ws, err := e.startWorkers(ctx)
	if err != nil {
		return nil, err
	}
	defer ws.stop()

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
		n, err := e.rdb.XLen(ctx, q.StreamKey()).Result()
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
	fc, err := checkFires(ctx, e.rdb, q.StreamKey(), expected)
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
		wake = append(wake, e.toServerMs(wakes[k])-float64(dueMs[k*cfg.WakeEvery]))
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

// MemoryConfig sizes the memory scenario.
type MemoryConfig struct {
	// Timers pending. Default 1,000,000.
	Timers int
}

// MemoryResult is what a pending timer costs in Redis memory.
type MemoryResult struct {
	Common
	Timers int `json:"timers"`
	// BytesPerTimer is the used_memory delta per pending timer, 36-char ID
	// and 16-byte payload.
	BytesPerTimer float64 `json:"bytes_per_timer"`
	// ZSetBytesPerMember is the same for the IDs alone in a sorted set.
	ZSetBytesPerMember float64 `json:"zset_bytes_per_member"`
	// MemoryRatio is BytesPerTimer / ZSetBytesPerMember.
	MemoryRatio float64 `json:"memory_ratio"`
}

// Memory measures INFO used_memory per pending timer, then per member of a
// bare sorted set of the same IDs and scores.
func (e *Env) Memory(ctx context.Context, cfg MemoryConfig) (*MemoryResult, error) {
	if cfg.Timers == 0 {
		cfg.Timers = 1_000_000
	}
	q, err := e.queue(e.rdb)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	run := rand.Uint32()
	base := e.serverNow().Add(365 * 24 * time.Hour)
	dueOf := func(i int) time.Time { return base.Add(time.Duration(i) * time.Millisecond) }
	w := e.startWindow(ctx)
	used := func() (float64, error) {
		time.Sleep(200 * time.Millisecond) // let client buffers drain
		return e.info(ctx, "memory", "used_memory")
	}
	if err := e.wipe(ctx); err != nil {
		return nil, err
	}
	// Load the script so its cache does not count.
	if _, err := q.Claim(ctx, 1); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	m0, err := used()
	if err != nil {
		return nil, err
	}
	e.logf("memory: scheduling %d timers", cfg.Timers)
	if _, err := scheduleAll(ctx, q, cfg.Timers, 1, func(i int) queue.NewTimer {
		return queue.NewTimer{ID: timerID(run, i), Due: dueOf(i), Payload: payload16}
	}); err != nil {
		return nil, err
	}
	m1, err := used()
	if err != nil {
		return nil, err
	}
	if err := e.wipe(ctx); err != nil {
		return nil, err
	}
	m2, err := used()
	if err != nil {
		return nil, err
	}
	key := "timerbench:bare-zset"
	for c := 0; c < cfg.Timers; c += scheduleChunk {
		p := e.rdb.Pipeline()
		for s := c; s < min(cfg.Timers, c+scheduleChunk); s += 1000 {
			zs := make([]redis.Z, 0, 1000)
			for i := s; i < min(cfg.Timers, s+1000); i++ {
				zs = append(zs, redis.Z{Score: float64(dueOf(i).UnixMilli()), Member: timerID(run, i)})
			}
			p.ZAdd(ctx, key, zs...)
		}
		if _, err := p.Exec(ctx); err != nil {
			return nil, fmt.Errorf("bench: ZADD: %w", err)
		}
	}
	m3, err := used()
	if err != nil {
		return nil, err
	}
	if err := e.wipe(ctx); err != nil {
		return nil, err
	}
	r := &MemoryResult{Common: w.end(ctx, "memory"), Timers: cfg.Timers}
	r.BytesPerTimer = round1((m1 - m0) / float64(cfg.Timers))
	r.ZSetBytesPerMember = round1((m3 - m2) / float64(cfg.Timers))
	if r.ZSetBytesPerMember > 0 {
		r.MemoryRatio = round3(r.BytesPerTimer / r.ZSetBytesPerMember)
	}
	return r, nil
}

// ScaleConfig sizes the scale scenario.
type ScaleConfig struct {
	// Pending are the far-future pending counts to measure at, ascending.
	// Default 10,000, 1,000,000 and 10,000,000.
	Pending []int
	// Due is how many due timers are claimed at each level. Default 100,000.
	Due int
}

// ScaleLevel is claim throughput at one pending count.
type ScaleLevel struct {
	Pending  int     `json:"pending"`
	FirePerS float64 `json:"fire_per_s"`
	ClaimP50 float64 `json:"claim_p50_ms"`
	ClaimP99 float64 `json:"claim_p99_ms"`
	// FillPerS is the ScheduleBatch rate (two clients) that filled the level.
	FillPerS float64 `json:"fill_per_s"`
}

// ScaleResult shows claim cost against pending count.
type ScaleResult struct {
	Common
	Due    int          `json:"due_per_level"`
	Levels []ScaleLevel `json:"levels"`
	// FlatRatio is the last level's fire_per_s / the first's.
	FlatRatio float64 `json:"flat_ratio"`
	Checks
}

// Scale fills the queue with far-future timers up to each level in turn
// and at each claims cfg.Due pre-due timers from one connection.
func (e *Env) Scale(ctx context.Context, cfg ScaleConfig) (*ScaleResult, error) {
	if len(cfg.Pending) == 0 {
		cfg.Pending = []int{10_000, 1_000_000, 10_000_000}
	}
	if !slices.IsSorted(cfg.Pending) {
		return nil, fmt.Errorf("bench: scale: --pending %v must be ascending", cfg.Pending)
	}
	if cfg.Due == 0 {
		cfg.Due = 100_000
	}
	if err := e.wipe(ctx); err != nil {
		return nil, err
	}
	q, closeQ, err := e.ownQueue("timerbench-scale", 1)
	if err != nil {
		return nil, err
	}
	defer closeQ()
	fq, err := e.queue(e.rdb)
	if err != nil {
		return nil, err
	}
	defer fq.Close()
	if _, err := q.Claim(ctx, 1); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	run := rand.Uint32()
	future := e.serverNow().Add(365 * 24 * time.Hour)
	w := e.startWindow(ctx)
	r := &ScaleResult{Due: cfg.Due}
	have := 0
	for li, level := range cfg.Pending {
		e.logf("scale: filling to %d pending", level)
		from := have
		el, err := scheduleAll(ctx, fq, level-from, 2, func(i int) queue.NewTimer {
			i += from
			return queue.NewTimer{ID: timerID(run, i), Due: future.Add(time.Duration(i) * time.Millisecond), Payload: payload16}
		})
		if err != nil {
			return nil, err
		}
		have = level
		// Let Redis finish growing the hash tables (incremental rehash)
		// so that the claims measure the steady state.
		time.Sleep(2 * time.Second)
		lv := ScaleLevel{Pending: level}
		if level > from {
			lv.FillPerS = round1(float64(level-from) / el.Seconds())
		}
		drun := run + uint32(li) + 1
		due := e.serverNow().Add(-time.Hour)
		if _, err := scheduleAll(ctx, fq, cfg.Due, 1, func(i int) queue.NewTimer {
			return queue.NewTimer{ID: timerID(drun, i), Due: due.Add(time.Duration(i) * time.Millisecond), Payload: payload16}
		}); err != nil {
			return nil, err
		}
		fired, lat, el, err := claimAll(ctx, q, cfg.Due, queue.MaxBatch, 5*time.Minute)
		if err != nil {
			return nil, err
		}
		seen := make(map[string]bool, len(fired))
		prefix := fmt.Sprintf("%08x-", drun)
		for _, f := range fired {
			switch {
			case !strings.HasPrefix(f.ID, prefix):
				r.FiredEarly++ // a far-future timer fired
			case seen[f.ID]:
				r.Duplicates++
			case f.FiredAt.Before(f.Due):
				r.FiredEarly++
			}
			seen[f.ID] = true
		}
		r.Lost += int64(cfg.Due - len(seen))
		lv.FirePerS = round1(float64(len(fired)) / el.Seconds())
		slices.Sort(lat)
		lv.ClaimP50, lv.ClaimP99 = round3(pct(lat, 0.5)), round3(pct(lat, 0.99))
		r.Levels = append(r.Levels, lv)
		n, err := e.rdb.ZCard(ctx, q.Keys()[0]).Result()
		if err != nil {
			return nil, fmt.Errorf("bench: ZCARD: %w", err)
		}
		if n != int64(level) {
			return nil, fmt.Errorf("bench: scale: %d timers pending after the claims, want %d", n, level)
		}
		e.logf("scale: %d pending: %.0f fired/s", level, lv.FirePerS)
	}
	r.Common = w.end(ctx, "scale")
	r.FlatRatio = round3(r.Levels[len(r.Levels)-1].FirePerS / r.Levels[0].FirePerS)
	if err := e.wipe(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// WaitersConfig sizes the waiters scenario.
type WaitersConfig struct {
	// Waiters is how many concurrent Wait calls, one timer each. Default
	// 100,000.
	Waiters int
	// Lead is how long after the start the first timer is due: all waiters
	// must be subscribed by then. Default 10 s.
	Lead time.Duration
	// Spread spreads the due times evenly over this long. Default 5 s.
	Spread time.Duration
}

// WaitersResult is the cost of many concurrent Wait calls in one process.
type WaitersResult struct {
	Common
	Waiters int `json:"waiters"`
	// RedisConnections is the most connections the waiters' client held
	// (CLIENT LIST by client name), pub/sub included.
	RedisConnections int `json:"redis_connections"`
	// HeapBytesPerWaiter is the live heap growth per blocked waiter.
	HeapBytesPerWaiter float64 `json:"heap_bytes_per_waiter"`
	// StackBytesPerWaiter is the goroutine stack growth per waiter, which
	// is not heap: the caller's goroutine blocked in Wait.
	StackBytesPerWaiter float64 `json:"stack_bytes_per_waiter"`
	// FireToReturn is from the claim's fired time to Wait returning.
	FireToReturnP50 float64 `json:"fire_to_return_p50_ms"`
	FireToReturnP99 float64 `json:"fire_to_return_p99_ms"`
	FireToReturnMax float64 `json:"fire_to_return_max_ms"`
	WaitErrors      int     `json:"wait_errors"`
	Checks
}

// Waiters blocks cfg.Waiters goroutines in Queue.Wait on one client while
// the workers fire their timers.
func (e *Env) Waiters(ctx context.Context, cfg WaitersConfig) (*WaitersResult, error) {
	if cfg.Waiters == 0 {
		cfg.Waiters = 100_000
	}
	if cfg.Lead == 0 {
		cfg.Lead = 10 * time.Second
	}
	if cfg.Spread == 0 {
		cfg.Spread = 5 * time.Second
	}
	if e.cfg.Workers < 1 {
		return nil, fmt.Errorf("bench: waiters needs --workers 1 or more")
	}
	if err := e.wipe(ctx); err != nil {
		return nil, err
	}
	q, err := e.queue(e.rdb)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	const name = "timerbench-waiters"
	wq, closeQ, err := e.ownQueue(name, 0)
	if err != nil {
		return nil, err
	}
	defer closeQ()
	ws, err := e.startWorkers(ctx)
	if err != nil {
		return nil, err
	}
	defer ws.stop()

	n := cfg.Waiters
	run := rand.Uint32()
	t0 := e.serverNow().Add(cfg.Lead)
	step := cfg.Spread / time.Duration(n)
	ids := make([]string, n)
	expected := make(map[string]bool, n)
	for i := range ids {
		ids[i] = timerID(run, i)
		expected[ids[i]] = true
	}
	w := e.startWindow(ctx)
	if _, err := scheduleAll(ctx, q, n, 1, func(i int) queue.NewTimer {
		return queue.NewTimer{ID: ids[i], Due: t0.Add(time.Duration(i) * step), Payload: payload16}
	}); err != nil {
		return nil, err
	}
	rets := make([]time.Time, n)
	errs := make([]error, n)
	wctx, cancel := context.WithTimeout(ctx, cfg.Lead+cfg.Spread+60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	countConns := func() (int, error) {
		s, err := e.rdb.ClientList(ctx).Result()
		if err != nil {
			return 0, fmt.Errorf("bench: CLIENT LIST: %w", err)
		}
		return strings.Count(s, " name="+name+" "), nil
	}

	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	e.logf("waiters: starting %d Wait calls", n)
	for i := range n {
		wg.Go(func() {
			errs[i] = wq.Wait(wctx, ids[i])
			rets[i] = time.Now()
		})
	}
	subscribed := func() (bool, error) {
		// Classic channels, or shard channels (Redis 7.0+) when the queue
		// uses sharded pub/sub.
		c, err := e.info(ctx, "stats", "pubsub_channels")
		if err != nil {
			return false, err
		}
		sc, _ := e.info(ctx, "stats", "pubsubshard_channels")
		return c+sc >= float64(n), nil
	}
	if err := waitUntil(ctx, cfg.Lead, 20*time.Millisecond, subscribed); err != nil {
		return nil, fmt.Errorf("bench: waiting for %d waiters to subscribe: %w; raise --lead", n, err)
	}
	if e.serverNow().After(t0) {
		return nil, fmt.Errorf("bench: the waiters took longer than --lead %v to subscribe; raise --lead", cfg.Lead)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	r := &WaitersResult{Waiters: n}
	r.HeapBytesPerWaiter = round1((float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / float64(n))
	r.StackBytesPerWaiter = round1((float64(m1.StackInuse) - float64(m0.StackInuse)) / float64(n))
	if r.RedisConnections, err = countConns(); err != nil {
		return nil, err
	}
	e.logf("waiters: %d subscribed; %.0f heap B and %.0f stack B per waiter", n, r.HeapBytesPerWaiter, r.StackBytesPerWaiter)

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-tick.C:
			if c, err := countConns(); err == nil {
				r.RedisConnections = max(r.RedisConnections, c)
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if c, err := countConns(); err == nil {
		r.RedisConnections = max(r.RedisConnections, c)
	}
	err = waitUntil(ctx, 30*time.Second, 20*time.Millisecond, func() (bool, error) {
		l, err := e.rdb.XLen(ctx, q.StreamKey()).Result()
		return l >= int64(n), err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: waiting for the workers to fire %d timers: %w", n, err)
	}
	r.Common = w.end(ctx, "waiters")
	cpu, werrs := ws.stop()
	if werrs != "" {
		return nil, fmt.Errorf("bench: timerworker failed: %s", werrs)
	}
	r.WorkerCPUS = round3(cpu)
	fc, err := checkFires(ctx, e.rdb, q.StreamKey(), expected)
	if err != nil {
		return nil, err
	}
	r.Checks = Checks{FiredEarly: fc.early, Duplicates: fc.dups, Lost: fc.lost}
	var lat []float64
	for i, id := range ids {
		f, ok := fc.fired[id]
		if errs[i] != nil || !ok {
			r.WaitErrors++
			continue
		}
		lat = append(lat, e.toServerMs(rets[i])-float64(f))
	}
	slices.Sort(lat)
	r.FireToReturnP50, r.FireToReturnP99, r.FireToReturnMax = round3(pct(lat, 0.5)), round3(pct(lat, 0.99)), round3(pct(lat, 1))
	return r, nil
}
