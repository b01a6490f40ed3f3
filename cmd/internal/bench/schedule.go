package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/timerq/timerq/queue"
)

// scheduleChunk is how many timers go into one ScheduleBatch call (which
// itself pipelines them 500 per script call).
const scheduleChunk = 10_000

// scheduleAll schedules timers 0..n-1 made by gen with ScheduleBatch, in
// chunks, from parallel goroutines sharing q, and returns the elapsed time.
// Every timer must be new: an existing ID means a stale database.
func scheduleAll(ctx context.Context, q *queue.Queue, n, parallel int, gen func(i int) queue.NewTimer) (time.Duration, error) {
	chunks := (n + scheduleChunk - 1) / scheduleChunk
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, parallel)
	start := time.Now()
	for g := range parallel {
		wg.Go(func() {
			batch := make([]queue.NewTimer, 0, scheduleChunk)
			for {
				c := int(next.Add(1)) - 1
				if c >= chunks || ctx.Err() != nil {
					return
				}
				batch = batch[:0]
				for i := c * scheduleChunk; i < min(n, (c+1)*scheduleChunk); i++ {
					batch = append(batch, gen(i))
				}
				res, err := q.ScheduleBatch(ctx, batch)
				if err != nil {
					errs[g] = fmt.Errorf("bench: ScheduleBatch: %w", err)
					return
				}
				for j, r := range res {
					if !r.Created {
						errs[g] = fmt.Errorf("bench: timer %q already existed; the database was not empty", batch[j].ID)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return elapsed, err
		}
	}
	return elapsed, ctx.Err()
}

// claimAll claims with limit from q (one connection) until want timers
// have fired or d passes, and returns what fired and each claim's latency.
func claimAll(ctx context.Context, q *queue.Queue, want, limit int, d time.Duration) ([]queue.Fired, []float64, time.Duration, error) {
	fired := make([]queue.Fired, 0, want)
	var lat []float64
	deadline := time.Now().Add(d)
	start := time.Now()
	for len(fired) < want {
		if time.Now().After(deadline) {
			return fired, lat, time.Since(start), fmt.Errorf("bench: only %d of %d timers fired within %v", len(fired), want, d)
		}
		t := time.Now()
		res, err := q.Engine().Claim(ctx, limit)
		if err != nil {
			return fired, lat, time.Since(start), fmt.Errorf("bench: %w", err)
		}
		lat = append(lat, float64(time.Since(t).Microseconds())/1000)
		fired = append(fired, res.Fired...)
		if len(res.Fired) == 0 {
			time.Sleep(time.Millisecond) // not due yet by the server clock
		}
	}
	return fired, lat, time.Since(start), nil
}

// pace sends the timers 0..n-1 as their time to be scheduled comes, timer
// i at start + i*step by the server's clock: every tick it calls send with
// a batch of at most size timers (to be filled in) and the index of the
// batch's first, until all n are sent.
func (e *Env) pace(ctx context.Context, start time.Time, step time.Duration, n, size int, tick time.Duration,
	send func(batch []queue.NewTimer, from int) error) error {
	t := time.NewTicker(tick)
	defer t.Stop()
	batch := make([]queue.NewTimer, size)
	for next := 0; next < n; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		for upto := min(n, int(e.serverNow().Sub(start)/step)+1); next < upto; {
			end := min(upto, next+size)
			if err := send(batch[:end-next], next); err != nil {
				return err
			}
			next = end
		}
	}
	return nil
}
