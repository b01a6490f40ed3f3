package queue

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Options.CoalesceSchedules: a group commit of single-timer schedules.
//
// Every caller joins a queue of waiters, then contends for one of
// maxLeaders call slots. A caller that gets a slot takes up to
// maxCoalesced waiters from the front of the queue (usually itself among
// them), schedules them in one scheduleBatch, hands each its result and
// frees the slot. A caller whose timer another took waits for that call.
// So a lone caller takes a free slot at once and waits for nobody, and
// under load each call carries every caller that arrived while the
// previous calls ran.

const (
	// maxLeaders is how many merged calls may be in flight at once: two,
	// so one is on the wire while Redis runs the other.
	maxLeaders = 2
	// maxCoalesced caps one merged call, under scheduleChunk, so a call
	// never splits and never holds Redis for long.
	maxCoalesced = 256
)

type coalescer struct {
	slots chan struct{} // a token per call in flight; made by New

	mu      sync.Mutex
	waiting []*coalesced
}

// coalesced is one caller's timer on its way through a merged call.
type coalesced struct {
	t        NewTimer
	deadline time.Time // the caller's, zero for none
	taken    bool      // in a call; guarded by coalescer.mu
	res      ScheduleResult
	err      error
	done     chan struct{} // closed once res and err are set
}

// scheduleCoalesced schedules t in a merged call and returns its result.
// If ctx ends while t waits, t is withdrawn and nothing is written; if it
// ends while t's call runs, the error says the outcome is unknown.
// t has been validated (scheduleValid).
func (q *Queue) scheduleCoalesced(ctx context.Context, t NewTimer) ([]ScheduleResult, error) {
	c := &q.coalesce
	w := &coalesced{t: t, done: make(chan struct{})}
	w.deadline, _ = ctx.Deadline()
	c.mu.Lock()
	c.waiting = append(c.waiting, w)
	c.mu.Unlock()
	for {
		select {
		case <-w.done:
			return w.result()
		case c.slots <- struct{}{}:
			c.mu.Lock()
			var batch []*coalesced
			if !w.taken {
				n := min(len(c.waiting), maxCoalesced)
				batch = make([]*coalesced, n)
				copy(batch, c.waiting)
				c.waiting = c.waiting[n:]
				for _, o := range batch {
					o.taken = true
				}
			}
			c.mu.Unlock()
			if batch != nil {
				q.runCoalesced(ctx, batch)
			}
			<-c.slots
			if batch == nil {
				return w.await(ctx) // another call holds t
			}
		case <-ctx.Done():
			if c.withdraw(w) {
				return nil, errorf("schedule %q: %w (nothing was written)", t.ID, ctx.Err())
			}
			return w.await(ctx)
		}
	}
}

func (w *coalesced) result() ([]ScheduleResult, error) {
	if w.err != nil {
		return nil, w.err
	}
	return []ScheduleResult{w.res}, nil
}

// await waits for the call that holds w, or for ctx to end.
func (w *coalesced) await(ctx context.Context) ([]ScheduleResult, error) {
	select {
	case <-w.done:
		return w.result()
	case <-ctx.Done():
		select {
		case <-w.done:
			return w.result()
		default:
		}
		return nil, errorf("schedule %q: %w while its script call ran: the timer may or may not exist; retry with the same ID, which is safe",
			w.t.ID, ctx.Err())
	}
}

// withdraw takes w out of the queue if no call has taken it yet, and
// reports whether it did.
func (c *coalescer) withdraw(w *coalesced) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.taken {
		return false
	}
	for i, o := range c.waiting {
		if o == w {
			c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// runCoalesced schedules batch in one call and sets each waiter's result.
// The call runs under the latest of the waiters' deadlines, not under the
// leader's cancellation: the others must not fail because the leader's
// caller went away.
func (q *Queue) runCoalesced(ctx context.Context, batch []*coalesced) {
	var deadline time.Time
	for _, w := range batch {
		if w.deadline.IsZero() {
			deadline = time.Time{}
			break
		}
		if w.deadline.After(deadline) {
			deadline = w.deadline
		}
	}
	ctx = context.WithoutCancel(ctx)
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	timers := make([]NewTimer, len(batch))
	for i, w := range batch {
		timers[i] = w.t
	}
	res, err := q.scheduleBatch(ctx, timers, "")
	if err != nil && len(batch) > 1 && (errors.Is(err, ErrMalformedRecord) || errors.Is(err, ErrEndpointNotFound) ||
		errors.Is(err, ErrQuotaExceeded) || errors.As(err, new(*FieldError))) {
		// One timer's record is damaged, or it names a missing endpoint,
		// or the script refused one of its fields (a FireBy before a
		// relative due time), or the batch would pass the pending quota
		// that some of its timers fit in: those callers alone get the
		// error.
		for _, w := range batch {
			r, err := q.scheduleBatch(ctx, []NewTimer{w.t}, "")
			if err == nil {
				w.res = r[0]
			}
			w.err = err
			close(w.done)
		}
		return
	}
	for i, w := range batch {
		if err != nil {
			w.err = err
		} else {
			w.res = res[i]
		}
		close(w.done)
	}
}
