package bench

// The waiters scenario: many concurrent Wait calls in one process.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/timerq/timerq/queue"
)

// WaitersConfig sizes the waiters scenario.
type WaitersConfig struct {
	Waiters int `flag:"waiters" default:"100_000" usage:"waiters: concurrent Wait calls"`
	// Lead is how long after the start the first timer is due: all waiters
	// must be subscribed by then.
	Lead   time.Duration `flag:"waiters-lead" default:"10s" usage:"waiters: time to subscribe before the first is due"`
	Spread time.Duration `flag:"spread" default:"5s" usage:"waiters: due times spread over this long"`
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
	withDefaults(&cfg)
	st, err := e.prepare(ctx, setup{name: "waiters", startWorkers: true})
	if err != nil {
		return nil, err
	}
	defer st.close()
	q := st.q
	const name = "timerbench-waiters"
	wq, closeQ, err := e.ownQueue(name, 0)
	if err != nil {
		return nil, err
	}
	defer closeQ()

	n := cfg.Waiters
	run := rand.Uint32()
	t0 := e.serverNow().Add(cfg.Lead)
	step := cfg.Spread / time.Duration(n)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = timerID(run, i)
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
	if err := st.awaitFires(ctx, n, 30*time.Second); err != nil {
		return nil, err
	}
	common, fc, err := st.finish(ctx, w, runIDs(run, n))
	if err != nil {
		return nil, err
	}
	r.Common, r.Checks = common, fc.Checks
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
