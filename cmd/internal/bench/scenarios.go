package bench

import (
	"context"
	"time"
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
