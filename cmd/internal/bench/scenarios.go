package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
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

// setup is what a scenario asks of prepare.
type setup struct {
	name string // the scenario, for errors and its result
	// needWorkers refuses --workers 0, with why (if set) in the error;
	// startWorkers also starts them. A scenario that measures something
	// before the workers run starts them itself (stage.runWorkers).
	needWorkers, startWorkers bool
	why                       string
	// client, if set, puts the queue on a Redis client of its own so
	// named, with pool connections (0: go-redis's default); else it is on
	// the bench's client.
	client string
	pool   int
	// shards, above 1, creates the namespace with that many shards.
	shards int
	// workerArgs are extra timerworker flags (steady --deliver's).
	workerArgs []string
}

// stage is what prepare readied: a queue of the bench's namespace in the
// wiped database and, if asked for, the running timerworkers.
type stage struct {
	setup
	e     *Env
	q     *queue.Queue
	ws    *workers
	close func() // stops the workers, then closes the queue
}

// prepare readies the database for a scenario, in the same steps for
// every one: it checks --workers, wipes the database, creates a sharded
// namespace, opens the queue and starts the workers. The caller defers
// st.close.
func (e *Env) prepare(ctx context.Context, s setup) (*stage, error) {
	if (s.needWorkers || s.startWorkers) && e.cfg.Workers < 1 {
		return nil, fmt.Errorf("bench: %s needs --workers 1 or more%s", s.name, s.why)
	}
	if err := e.wipe(ctx); err != nil {
		return nil, err
	}
	if s.shards > 1 {
		if _, err := queue.CreateNamespace(ctx, e.rdb, e.cfg.Namespace, s.shards); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", s.name, err)
		}
	}
	st := &stage{setup: s, e: e}
	var err error
	if s.client != "" {
		st.q, st.close, err = e.ownQueue(s.client, s.pool)
	} else if st.q, err = e.queue(e.rdb); err == nil {
		st.close = func() { st.q.Close() }
	}
	if err != nil {
		return nil, err
	}
	if err := e.upgrade(ctx, st.q); err != nil {
		st.close()
		return nil, err
	}
	if s.startWorkers {
		if err := st.runWorkers(ctx); err != nil {
			st.close()
			return nil, err
		}
	}
	return st, nil
}

// upgrade moves q's namespace to the layout --layout asks for.
func (e *Env) upgrade(ctx context.Context, q *queue.Queue) error {
	switch e.cfg.Layout {
	case 0, 1:
		return nil
	case 2:
		for {
			st, err := q.Engine().UpgradeLayout(ctx, queue.MaxBatch)
			if err != nil || st.Done() {
				return err
			}
		}
	}
	return fmt.Errorf("bench: --layout %d: want 1 or 2", e.cfg.Layout)
}

// runWorkers starts the workers, which close stops.
func (st *stage) runWorkers(ctx context.Context) error {
	e := st.e
	// A worker subscribes to the wake channels of its own shards only, so
	// on a sharded namespace the sign of a started one is its membership.
	ready := func(n int) (bool, error) {
		live, err := st.q.Inspect().Workers(ctx)
		return err == nil && len(live.Live) >= n, err
	}
	if st.shards <= 1 {
		ready = func(n int) (bool, error) {
			s, err := subscribers(ctx, e.rdb, keyspace.Shard(e.cfg.Namespace, 0, 1).Wake())
			return s >= n, err
		}
	}
	ws, err := e.startWorkers(ctx, e.cfg.Workers, ready, st.workerArgs...)
	if err != nil {
		return err
	}
	st.ws = ws
	closeQ := st.close
	st.close = func() { ws.stop(); closeQ() }
	return nil
}

// awaitFires waits up to d for the fire stream to hold n entries.
func (st *stage) awaitFires(ctx context.Context, n int, d time.Duration) error {
	err := waitUntil(ctx, d, 20*time.Millisecond, func() (bool, error) {
		l, err := st.e.rdb.XLen(ctx, st.q.Keys().Stream(0)).Result()
		return l >= int64(n), err
	})
	if err != nil {
		return fmt.Errorf("bench: waiting for the workers to fire %d timers: %w", n, err)
	}
	return nil
}

// finish ends the window w, stops the workers, refusing a failed one, and,
// unless expected is nil, checks the fire stream against it.
func (st *stage) finish(ctx context.Context, w window, expected map[string]bool) (Common, *fireCheck, error) {
	c := w.end(ctx, st.name)
	cpu, errs := st.ws.stop()
	if errs != "" {
		return c, nil, fmt.Errorf("bench: timerworker failed: %s", errs)
	}
	c.WorkerCPUS = round3(cpu)
	if expected == nil {
		return c, nil, nil
	}
	fc, err := checkFires(ctx, st.e.rdb, st.q.Keys().Stream(0), expected)
	return c, fc, err
}
