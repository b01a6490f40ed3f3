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
	Timers int `flag:"memory-timers" default:"1_000_000" usage:"memory: pending timers"`
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
	withDefaults(&cfg)
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
	var uerr error // the first error of used
	used := func() float64 {
		time.Sleep(200 * time.Millisecond) // let client buffers drain
		m, err := e.info(ctx, "memory", "used_memory")
		uerr = cmp.Or(uerr, err)
		return m
	}
	// Load the script so its cache does not count.
	if _, err := q.Engine().Claim(ctx, 1); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	m0 := used()
	e.logf("memory: scheduling %d timers", cfg.Timers)
	if _, err := scheduleAll(ctx, q, cfg.Timers, 1, func(i int) queue.NewTimer {
		return e.own(queue.NewTimer{ID: timerID(run, i), Due: dueOf(i), Payload: payload16}, i)
	}); err != nil {
		return nil, err
	}
	m1 := used()
	if err := e.wipe(ctx); err != nil {
		return nil, err
	}
	m2 := used()
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
	m3 := used()
	if err := cmp.Or(uerr, e.wipe(ctx)); err != nil {
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
	Pending []int `flag:"pending" default:"10000,1000000,10000000" usage:"scale: comma-separated pending counts, ascending"`
	Due     int   `flag:"due" default:"100_000" usage:"scale: due timers claimed at each level"`
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
	withDefaults(&cfg)
	if len(cfg.Pending) == 0 || !slices.IsSorted(cfg.Pending) {
		return nil, fmt.Errorf("bench: scale: --pending %v must be one or more counts, ascending", cfg.Pending)
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
