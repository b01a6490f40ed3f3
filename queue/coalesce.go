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

// runCoalesced schedules batch in one call and sets each waiter's result:
// its own timer's outcome, not the call's (scheduleEach), so that a timer
// refused in the call (refusedOne) fails only its own caller.
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
	res, errs, err := q.scheduleEach(ctx, timers, "")
	var alone []*coalesced
	for i, w := range batch {
		e := err
		if errs != nil {
			e = errs[i]
		}
		switch {
		case e == nil:
			w.res = res[i]
		case len(batch) > 1 && refusedOne(e):
			// The call that held w was refused, and wrote nothing, for
			// one timer's sake, which need not be w's: w goes again
			// alone, to get its own outcome.
			alone = append(alone, w)
			continue
		default:
			w.err = e
		}
		close(w.done)
	}
	for _, w := range alone {
		r, err := q.scheduleBatch(ctx, []NewTimer{w.t}, "")
		if err == nil {
			w.res = r[0]
		}
		w.err = err
		close(w.done)
	}
}

// refusedOne reports whether err, a coalesced call's error for a timer,
// is a refusal that one timer of the call may have caused alone, and
// that wrote nothing: a damaged record (TIMERQ_MALFORMED), an
// endpoint the namespace lacks (TIMERQ_NOENDPOINT, or the client's check
// before the call), an owner epoch that is stale (TIMERQ_EPOCH), a field
// the script refused (a FireBy before a relative due time,
// TIMERQ_FIREBY), or the pending quota, which the call would pass but
// some of its timers fit in (TIMERQ_QUOTA). Each is refused before the
// script's first write, so the timers it held are scheduled again one at
// a time. An existing timer whose record or meta does not read
// (ErrMalformedRecord, after its call wrote the others) goes again too,
// and gets the same error, having written nothing.
func refusedOne(err error) bool {
	if errors.Is(err, ErrOutcomeUnknown) {
		return false
	}
	return errors.Is(err, ErrMalformedRecord) || errors.Is(err, ErrEndpointNotFound) ||
		errors.Is(err, ErrStaleEpoch) || errors.Is(err, ErrQuotaExceeded) || errors.As(err, new(*FieldError))
}
