package bench

import (
	"cmp"
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
	// Schedules is how many schedules fire every Every. Default 10,000.
	Schedules int
	// Every is each schedule's interval. Default 1 s.
	Every time.Duration
	// Warmup runs before the measured window; Duration is the window.
	// Defaults 5 s and 20 s.
	Warmup, Duration time.Duration
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

// withDefaults fills in the zero fields of cfg.
func (cfg RecurringConfig) withDefaults() RecurringConfig {
	cfg.Schedules = cmp.Or(cfg.Schedules, 10_000)
	cfg.Every = cmp.Or(cfg.Every, time.Second)
	cfg.Warmup = cmp.Or(cfg.Warmup, 5*time.Second)
	cfg.Duration = cmp.Or(cfg.Duration, 20*time.Second)
	return cfg
}

// Recurring creates cfg.Schedules interval schedules, their anchors spread
// evenly over one interval, lets the workers fire them, and measures a
// window of the fire stream.
func (e *Env) Recurring(ctx context.Context, cfg RecurringConfig) (*RecurringResult, error) {
	cfg = cfg.withDefaults()
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
	ws, err := e.startWorkers(ctx)
	if err != nil {
		return nil, err
	}
	defer ws.stop()
	// The window starts Warmup after the first occurrence is due.
	time.Sleep(max(base.Sub(e.serverNow()), 0) + cfg.Warmup)
	from := e.serverNow()
	w := e.startWindow(ctx)
	time.Sleep(cfg.Duration)
	to := e.serverNow()
	r := &RecurringResult{Common: w.end(ctx, "recurring"), Schedules: cfg.Schedules, EveryMs: cfg.Every.Milliseconds(),
		Workers: e.cfg.Workers, BatchSize: e.cfg.BatchSize, PutPerS: round1(float64(cfg.Schedules) / put.Seconds()),
		BytesPerSchedule: round1((mem1 - mem0) / float64(cfg.Schedules)),
		Target:           round1(float64(cfg.Schedules) / cfg.Every.Seconds())}
	cpu, werrs := ws.stop()
	if werrs != "" {
		return nil, fmt.Errorf("bench: timerworker failed: %s", werrs)
	}
	r.WorkerCPUS = round3(cpu)

	// The window: occurrences nominally due in [from, to - settleWindow),
	// so the last ones have had time to fire.
	lo, hi := from.UnixMilli(), to.Add(-settleWindow).UnixMilli()
	perSchedule := map[string][]int64{}
	seen := map[string]bool{}
	var lateness []int64
	start := "-"
	for {
		msgs, err := e.rdb.XRangeN(ctx, q.Keys().Stream(0), start, "+", 10000).Result()
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			id, _ := m.Values["id"].(string)
			due, _ := strconv.ParseInt(fmt.Sprint(m.Values["due"]), 10, 64)
			fired, _ := strconv.ParseInt(fmt.Sprint(m.Values["fired"]), 10, 64)
			if seen[id] {
				r.Duplicates++
				continue
			}
			seen[id] = true
			if fired < due {
				r.FiredEarly++
			}
			if due < lo || due >= hi {
				continue
			}
			sid, _, _ := queue.ParseOccurrenceID(id)
			perSchedule[sid] = append(perSchedule[sid], due)
			lateness = append(lateness, fired-due)
		}
		if len(msgs) < 10000 {
			break
		}
		start = "(" + msgs[len(msgs)-1].ID
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
