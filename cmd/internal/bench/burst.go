package bench

// The ceiling and burst scenarios: many timers due at once.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/timerq/timerq/queue"
)

// CeilingConfig sizes the ceiling scenario.
type CeilingConfig struct {
	Timers int `flag:"ceiling-timers" default:"100_000" usage:"ceiling: pre-due timers claimed"`
	Limit  int `flag:"limit" default:"1000" usage:"ceiling: Claim limit"`
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
// queue.Engine.Claim in a loop from one connection.
func (e *Env) Ceiling(ctx context.Context, cfg CeilingConfig) (*CeilingResult, error) {
	withDefaults(&cfg)
	st, err := e.prepare(ctx, setup{name: "ceiling", client: "timerbench-ceiling", pool: 1})
	if err != nil {
		return nil, err
	}
	defer st.close()
	q := st.q
	if _, err := q.Engine().Claim(ctx, 1); err != nil { // loads the script
		return nil, fmt.Errorf("bench: %w", err)
	}
	run := rand.Uint32()
	due := e.serverNow().Add(-time.Second)
	if _, err := scheduleAll(ctx, q, cfg.Timers, 1, func(i int) queue.NewTimer {
		return e.own(queue.NewTimer{ID: timerID(run, i), Due: due, Payload: payload16}, i)
	}); err != nil {
		return nil, err
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
	fc, err := checkFires(ctx, e.rdb, q.Keys().Stream(0), runIDs(run, cfg.Timers))
	if err != nil {
		return nil, err
	}
	r.Checks = fc.Checks
	return r, nil
}

// BurstConfig sizes the burst scenario.
type BurstConfig struct {
	Timers int `flag:"timers" default:"100_000" usage:"burst: timers due at one instant"`
	// Lead is how far ahead of the start the instant is; scheduling must
	// finish before it.
	Lead time.Duration `flag:"lead" default:"5s" usage:"burst: how far ahead the instant is"`
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
	withDefaults(&cfg)
	st, err := e.prepare(ctx, setup{name: "burst", startWorkers: true})
	if err != nil {
		return nil, err
	}
	defer st.close()
	q := st.q
	run := rand.Uint32()
	due := e.serverNow().Add(cfg.Lead).Truncate(time.Millisecond)
	e.logf("burst: scheduling %d timers due in %v", cfg.Timers, cfg.Lead)
	w := e.startWindow(ctx)
	el, err := scheduleAll(ctx, q, cfg.Timers, 1, func(i int) queue.NewTimer {
		return e.own(queue.NewTimer{ID: timerID(run, i), Due: due, Payload: payload16}, i)
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
	if err := st.awaitFires(ctx, cfg.Timers, cfg.Lead+30*time.Second+time.Duration(cfg.Timers/5000)*time.Second); err != nil {
		return nil, err
	}
	fireWall, fireCPU := time.Since(fireStart).Seconds(), e.redisCPU(ctx)-fireCPU
	time.Sleep(100 * time.Millisecond) // a late duplicate would land now
	common, fc, err := st.finish(ctx, w, runIDs(run, cfg.Timers))
	if err != nil {
		return nil, err
	}
	r := &BurstResult{Common: common, Timers: cfg.Timers, Workers: e.cfg.Workers, BatchSize: e.cfg.BatchSize, Checks: fc.Checks}
	r.FireRedisCPU = round3(fireCPU / fireWall)
	r.SchedulePerS = round1(float64(cfg.Timers) / el.Seconds())
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
