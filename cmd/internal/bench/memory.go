package bench

// The memory and scale scenarios: what pending timers cost.

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/queue"
)

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

// withDefaults fills in the zero fields of cfg.
func (cfg MemoryConfig) withDefaults() MemoryConfig {
	cfg.Timers = cmp.Or(cfg.Timers, 1_000_000)
	return cfg
}

// Memory measures INFO used_memory per pending timer, then per member of a
// bare sorted set of the same IDs and scores.
func (e *Env) Memory(ctx context.Context, cfg MemoryConfig) (*MemoryResult, error) {
	cfg = cfg.withDefaults()
	st, err := e.prepare(ctx, setup{name: "memory"})
	if err != nil {
		return nil, err
	}
	defer st.close()
	q := st.q
	run := rand.Uint32()
	base := e.serverNow().Add(365 * 24 * time.Hour)
	dueOf := func(i int) time.Time { return base.Add(time.Duration(i) * time.Millisecond) }
	w := e.startWindow(ctx)
	used := func() (float64, error) {
		time.Sleep(200 * time.Millisecond) // let client buffers drain
		return e.info(ctx, "memory", "used_memory")
	}
	// Load the script so its cache does not count.
	if _, err := q.Engine().Claim(ctx, 1); err != nil {
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

// withDefaults fills in the zero fields of cfg.
func (cfg ScaleConfig) withDefaults() ScaleConfig {
	if len(cfg.Pending) == 0 {
		cfg.Pending = []int{10_000, 1_000_000, 10_000_000}
	}
	cfg.Due = cmp.Or(cfg.Due, 100_000)
	return cfg
}

// Scale fills the queue with far-future timers up to each level in turn
// and at each claims cfg.Due pre-due timers from one connection.
func (e *Env) Scale(ctx context.Context, cfg ScaleConfig) (*ScaleResult, error) {
	cfg = cfg.withDefaults()
	if !slices.IsSorted(cfg.Pending) {
		return nil, fmt.Errorf("bench: scale: --pending %v must be ascending", cfg.Pending)
	}
	st, err := e.prepare(ctx, setup{name: "scale", client: "timerbench-scale", pool: 1})
	if err != nil {
		return nil, err
	}
	defer st.close()
	q := st.q
	fq, err := e.queue(e.rdb)
	if err != nil {
		return nil, err
	}
	defer fq.Close()
	if _, err := q.Engine().Claim(ctx, 1); err != nil {
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
		n, err := e.rdb.ZCard(ctx, q.Keys().Shard(0)[0]).Result()
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
