package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timerq/timerq/queue"
)

// RecurringConfig sizes the recurring scenario.
type RecurringConfig struct {
	Schedules int           `flag:"schedules" default:"10_000" usage:"recurring: schedules, each every --every"`
	Every     time.Duration `flag:"every" default:"1s" usage:"recurring: each schedule's interval"`
	// Warmup runs before the measured window, Duration.
	Warmup   time.Duration `default:"5s"`
	Duration time.Duration `flag:"recurring-duration" default:"20s" usage:"recurring: the measured window"`
}

// RecurringResult is many interval schedules fired by timerworkers: the
// occurrences per second sustained, their lateness, what a schedule costs
// in memory and in Redis CPU per fire.
type RecurringResult struct {
	Common
	Schedules int     `json:"schedules"`
	EveryMs   int64   `json:"every_ms"`
	Workers   int     `json:"workers"`
	BatchSize int     `json:"batch_size"`
	PutPerS   float64 `json:"put_per_s"`
	// BytesPerSchedule is the used_memory delta per schedule, including
	// its 2 armed occurrence timers (16-byte payload).
	BytesPerSchedule float64 `json:"bytes_per_schedule"`
	// Target is Schedules per Every, per second; Fired and FirePerS are
	// what the window saw.
	Target      float64 `json:"target_per_s"`
	Fired       int64   `json:"fired"`
	FirePerS    float64 `json:"fire_per_s"`
	LatenessP50 int64   `json:"lateness_p50_ms"`
	LatenessP99 int64   `json:"lateness_p99_ms"`
	LatenessMax int64   `json:"lateness_max_ms"`
	// RedisUsPerFire is Redis CPU per occurrence fired (claim, arm, load,
	// repair): compare with steady's redis_cpu_s per timer.
	RedisUsPerFire float64 `json:"redis_us_per_fire"`
	// Series checks: each schedule's occurrences in the window must be
	// consecutive (none missing) and each fire once, never early.
	Gaps int64 `json:"gaps"`
	Checks
}

// settleWindow is the end of the recurring scenario's window that it does
// not measure: the occurrences due in it may not have fired yet.
const settleWindow = 2 * time.Second

// Recurring creates cfg.Schedules interval schedules, their anchors spread
// evenly over one interval, lets the workers fire them, and measures a
// window of the fire stream.
func (e *Env) Recurring(ctx context.Context, cfg RecurringConfig) (*RecurringResult, error) {
	withDefaults(&cfg)
	// The measured occurrences are those due in the window but its last
	// settleWindow, which they get to fire in; a shorter window measures
	// nothing and would divide by it.
	if cfg.Duration <= settleWindow {
		return nil, fmt.Errorf("bench: recurring: a %v window measures nothing: its last %v are left for the occurrences due in it to fire; give --recurring-duration more than %v", cfg.Duration, settleWindow, settleWindow)
	}
	// The workers start once the schedules are made and measured.
	st, err := e.prepare(ctx, setup{name: "recurring", needWorkers: true})
	if err != nil {
		return nil, err
	}
	defer st.close()
	q := st.q
	mem0, err := e.info(ctx, "memory", "used_memory")
	if err != nil {
		return nil, err
	}
	// Anchors a little ahead, so that creating them all takes less than
	// the lead and no occurrence is missed before the workers start.
	base := e.serverNow().Add(cfg.Every + time.Duration(cfg.Schedules/2000)*time.Second)
	e.logf("recurring: creating %d schedules every %v", cfg.Schedules, cfg.Every)
	began := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.Schedules {
					return
				}
				anchor := base.Add(time.Duration(i) * cfg.Every / time.Duration(cfg.Schedules))
				if _, _, err := q.Recurring().Put(ctx, queue.Recurring{ID: "s" + strconv.Itoa(i), Every: cfg.Every,
					Anchor: anchor, Payload: payload16}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, fmt.Errorf("bench: Recurring().Put: %w", err)
	default:
	}
	put := time.Since(began)
	mem1, err := e.info(ctx, "memory", "used_memory")
	if err != nil {
		return nil, err
	}
	if err := st.runWorkers(ctx); err != nil {
		return nil, err
	}
	// The window starts Warmup after the first occurrence is due.
	time.Sleep(max(base.Sub(e.serverNow()), 0) + cfg.Warmup)
	from := e.serverNow()
	w := e.startWindow(ctx)
	time.Sleep(cfg.Duration)
	to := e.serverNow()
	common, _, err := st.finish(ctx, w, nil)
	if err != nil {
		return nil, err
	}
	r := &RecurringResult{Common: common, Schedules: cfg.Schedules, EveryMs: cfg.Every.Milliseconds(),
		Workers: e.cfg.Workers, BatchSize: e.cfg.BatchSize, PutPerS: round1(float64(cfg.Schedules) / put.Seconds()),
		BytesPerSchedule: round1((mem1 - mem0) / float64(cfg.Schedules)),
		Target:           round1(float64(cfg.Schedules) / cfg.Every.Seconds())}

	// The window: occurrences nominally due in [from, to - settleWindow),
	// so the last ones have had time to fire.
	lo, hi := from.UnixMilli(), to.Add(-settleWindow).UnixMilli()
	perSchedule := map[string][]int64{}
	seen := map[string]bool{}
	var lateness []int64
	err = eachFire(ctx, e.rdb, q.Keys().Stream(0), func(_ string, ev fireEvent) {
		if seen[ev.id] {
			r.Duplicates++
			return
		}
		seen[ev.id] = true
		if ev.fired < ev.due {
			r.FiredEarly++
		}
		if ev.due >= lo && ev.due < hi {
			sid, _, _ := queue.ParseOccurrenceID(ev.id)
			perSchedule[sid] = append(perSchedule[sid], ev.due)
			lateness = append(lateness, ev.fired-ev.due)
		}
	})
	if err != nil {
		return nil, err
	}
	step := cfg.Every.Milliseconds()
	expected := int64(0)
	for i := range cfg.Schedules {
		a := base.Add(time.Duration(i) * cfg.Every / time.Duration(cfg.Schedules)).UnixMilli()
		// occurrences a + k*step in [lo, hi)
		k0 := int64(math.Ceil(float64(lo-a) / float64(step)))
		k1 := int64(math.Ceil(float64(hi-a) / float64(step)))
		expected += k1 - k0
		got := perSchedule["s"+strconv.Itoa(i)]
		slices.Sort(got)
		for j := 1; j < len(got); j++ {
			if got[j]-got[j-1] != step {
				r.Gaps++
			}
		}
	}
	r.Fired = int64(len(lateness))
	r.Lost = max(expected-r.Fired, 0)
	r.FirePerS = round1(float64(r.Fired) / (float64(hi-lo) / 1000))
	slices.Sort(lateness)
	r.LatenessP50, r.LatenessP99, r.LatenessMax = pct(lateness, 0.5), pct(lateness, 0.99), pct(lateness, 1)
	if fires := float64(r.FirePerS) * r.WallS; fires > 0 {
		r.RedisUsPerFire = round3(r.RedisCPUS * 1e6 / fires)
	}
	return r, nil
}
