package queue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/shardsub"
)

// Wait blocks until the timer id has fired and returns nil, at once if it
// already has. It returns an error wrapping ErrCancelled for a cancelled
// timer, ErrNotFound for an unknown one, ErrClosed after Close, and the
// context's error when ctx ends first.
//
// All waiters of one Queue share one pub/sub connection (one per Cluster
// node with sharded pub/sub: each timer's channel carries its shard's hash
// tag, so the message stays on that node). Pub/sub is only a hint: the
// timer's state in Redis decides. It is read on every message, after every
// (re)subscription and every Options.RecheckInterval, so a lost wakeup
// delays a waiter by at most that interval and a stray one does nothing.
func (q *Queue) Wait(ctx context.Context, id string) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return err
	}
	h, err := q.waitHub(l)
	if err != nil {
		return err
	}
	w := h.add(id)
	select {
	case err := <-w.result:
		return err
	case <-ctx.Done():
		h.remove(w)
		select {
		case err := <-w.result: // settled while we were leaving
			return err
		default:
		}
		return errorf("wait %q: %w", id, ctx.Err())
	}
}

// WaitFired is Wait returning the fired timer, read after it fired: its
// Owner and Epoch let an executor that took the owner over (BumpEpoch)
// refuse a fire scheduled under an older epoch. Its errors are Wait's.
func (q *Queue) WaitFired(ctx context.Context, id string) (Timer, error) {
	if err := q.Wait(ctx, id); err != nil {
		return Timer{}, err
	}
	return q.Get(ctx, id)
}

// SleepUntil schedules the timer id (see Schedule) and waits for it (see
// Wait). A replaying caller that passes the same ID returns at once when
// the timer has already fired, whatever due and payload it passes.
func (q *Queue) SleepUntil(ctx context.Context, id string, due time.Time, payload []byte) error {
	res, err := q.Schedule(ctx, id, due, payload)
	if err != nil {
		return err
	}
	switch res.Timer.State {
	case StateFired:
		return nil
	case StateCancelled:
		return fmt.Errorf("%w: %q", ErrCancelled, id)
	}
	return q.Wait(ctx, id)
}

func (q *Queue) waitHub(l *layout) (*hub, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	if q.hub == nil {
		q.hub = newHub(q, l)
	}
	return q.hub, nil
}

// hub multiplexes every waiter of a Queue over one pub/sub connection.
//
// A waiter subscribes to its timer's channel and only then has its state
// read, so that a firing cannot fall between the read and the subscription.
// "Then" means after Redis confirmed the SUBSCRIBE: go-redis returns from
// Subscribe once the command is written, not once it took effect.
type hub struct {
	q     *Queue
	l     *layout
	sub   *shardsub.Sub
	ops   chan subOp
	check chan struct{} // wakes the checker; capacity 1
	done  chan struct{}
	wg    sync.WaitGroup

	mu          sync.Mutex
	entries     map[string]*entry // by channel
	outstanding map[string]int    // SUBSCRIBEs sent but not yet confirmed, by channel
	pending     map[string]bool   // channels whose timers need a state read
	epoch       uint64            // bumped as each state read starts
	closed      bool
}

// entry is one subscribed timer channel and the waiters on it.
type entry struct {
	id        string
	waiters   map[*waiter]bool
	confirmed bool
}

type waiter struct {
	channel string
	epoch   uint64     // hub.epoch when the waiter arrived
	result  chan error // receives the outcome once; capacity 1
}

type subOp struct {
	channel   string
	subscribe bool
}

// maxSubBatch bounds the channels in one SUBSCRIBE or one state read.
const maxSubBatch = 1000

func newHub(q *Queue, l *layout) *hub {
	h := &hub{
		q:           q,
		l:           l,
		sub:         shardsub.New(q.rdb, l.sharded, 10000),
		ops:         make(chan subOp, 4096),
		check:       make(chan struct{}, 1),
		done:        make(chan struct{}),
		entries:     map[string]*entry{},
		outstanding: map[string]int{},
		pending:     map[string]bool{},
	}
	h.wg.Add(3)
	go h.receive(h.sub.Events())
	go h.subscribe()
	go h.checker()
	return h
}

// add registers a waiter for id, subscribing to its channel if it is the
// first one.
func (h *hub) add(id string) *waiter {
	ch := h.l.spaces[h.l.shardOf(id)].TimerChannel(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	w := &waiter{channel: ch, epoch: h.epoch, result: make(chan error, 1)}
	if h.closed {
		w.result <- ErrClosed
		return w
	}
	e := h.entries[ch]
	if e == nil {
		e = &entry{id: id, waiters: map[*waiter]bool{}}
		h.entries[ch] = e
		h.outstanding[ch]++
		h.send(subOp{ch, true})
		// Read its state at once too: a timer that already settled, or a
		// user without the rights to read it, answers now rather than
		// after the subscription (which an ACL refuses without a reply
		// a waiter would see).
		h.markPending(ch)
	} else if e.confirmed {
		h.markPending(ch)
	}
	e.waiters[w] = true
	return w
}

// remove drops a waiter that gave up, unsubscribing when it was the last.
func (h *hub) remove(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.entries[w.channel]; e != nil && e.waiters[w] {
		delete(e.waiters, w)
		if len(e.waiters) == 0 {
			h.drop(w.channel)
		}
	}
}

// settle hands err to the waiters on ch that arrived before epoch and drops
// the channel once none is left. Callers hold h.mu.
func (h *hub) settle(ch string, before uint64, err error) {
	e := h.entries[ch]
	if e == nil {
		return
	}
	for w := range e.waiters {
		if w.epoch < before {
			w.result <- err
			delete(e.waiters, w)
		}
	}
	if len(e.waiters) == 0 {
		h.drop(ch)
	}
}

func (h *hub) drop(ch string) {
	delete(h.entries, ch)
	delete(h.pending, ch)
	h.send(subOp{ch, false})
}

// send queues a subscription change. Callers hold h.mu; the queue is large,
// and blocking here only applies back-pressure from a slow connection.
func (h *hub) send(op subOp) {
	select {
	case h.ops <- op:
	case <-h.done:
	}
}

func (h *hub) markPending(ch string) {
	h.pending[ch] = true
	select {
	case h.check <- struct{}{}:
	default:
	}
}

// receive handles pub/sub traffic until the connection is closed.
func (h *hub) receive(msgs <-chan shardsub.Event) {
	defer h.wg.Done()
	for m := range msgs {
		h.mu.Lock()
		switch {
		case m.Subscribed:
			// A confirmation, or a resubscription after a reconnect, during
			// which wakeups may have been lost: read the state either way.
			if n := h.outstanding[m.Channel]; n > 1 {
				h.outstanding[m.Channel] = n - 1
				break
			}
			delete(h.outstanding, m.Channel)
			if e := h.entries[m.Channel]; e != nil {
				e.confirmed = true
				h.markPending(m.Channel)
			}
		default:
			// A hint, never the outcome: read the state. A script that
			// publishes and is then refused a later command sent its message
			// but changed nothing (scripts/lua/includes/probe.lua), and anyone
			// allowed to publish could send "fired".
			h.markPending(m.Channel)
		}
		h.mu.Unlock()
	}
}

// cancelled is the error of the waiters on ch. Callers hold h.mu.
func (h *hub) cancelled(ch string) error {
	id := ""
	if e := h.entries[ch]; e != nil {
		id = e.id
	}
	return fmt.Errorf("%w: %q", ErrCancelled, id)
}

// subscribe applies queued subscription changes, batching runs of one kind
// into one command.
func (h *hub) subscribe() {
	defer h.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-h.done; cancel() }()
	for {
		var op subOp
		select {
		case op = <-h.ops:
		case <-h.done:
			return
		}
		batch := []string{op.channel}
		kind := op.subscribe
	drain:
		for len(batch) < maxSubBatch {
			select {
			case next := <-h.ops:
				if next.subscribe != kind {
					h.apply(ctx, kind, batch)
					batch, kind = nil, next.subscribe
				}
				batch = append(batch, next.channel)
			default:
				break drain
			}
		}
		h.apply(ctx, kind, batch)
	}
}

// apply sends one SUBSCRIBE or UNSUBSCRIBE (one per slot when sharded).
// An error needs no retry: the channels are remembered and resubscribed
// when the connection comes back.
func (h *hub) apply(ctx context.Context, subscribe bool, channels []string) {
	if !subscribe {
		h.sub.Unsubscribe(ctx, channels...)
		return
	}
	if err := h.sub.Subscribe(ctx, channels...); err != nil {
		// No confirmation will come for this SUBSCRIBE; the resubscription
		// after the reconnect confirms instead.
		h.mu.Lock()
		for _, ch := range channels {
			delete(h.outstanding, ch)
		}
		h.mu.Unlock()
	}
}

// checker reads the state of pending timers, and of every waited timer each
// RecheckInterval, settling the waiters of those no longer scheduled.
func (h *hub) checker() {
	defer h.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tick := time.NewTicker(h.q.opts.RecheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-h.check:
		case <-tick.C:
			// Every waited timer, confirmed or not: a SUBSCRIBE lost with a
			// dropped connection is never confirmed, but its state still is
			// the truth.
			h.mu.Lock()
			for ch := range h.entries {
				h.pending[ch] = true
			}
			h.mu.Unlock()
		case <-h.done:
			return
		}
		for h.readPending(ctx) {
		}
	}
}

// readPending reads up to maxSubBatch pending timers in one HMGET and
// reports whether more are pending.
func (h *hub) readPending(ctx context.Context) bool {
	h.mu.Lock()
	h.epoch++
	epoch := h.epoch
	var chans, ids []string
	for ch := range h.pending {
		if e := h.entries[ch]; e != nil {
			chans, ids = append(chans, ch), append(ids, e.id)
		}
		delete(h.pending, ch)
		if len(chans) == maxSubBatch {
			break
		}
	}
	more := len(h.pending) > 0
	h.mu.Unlock()
	if len(ids) == 0 {
		return more
	}
	// One HMGET per shard, in one pipeline.
	byShard := map[int][]int{}
	for i, id := range ids {
		k := h.l.shardOf(id)
		byShard[k] = append(byShard[k], i)
	}
	recs := make([]any, len(ids))
	cmds := map[int]*redis.SliceCmd{}
	_, err := h.q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, idx := range byShard {
			fields := make([]string, len(idx))
			for j, i := range idx {
				fields[j] = ids[i]
			}
			cmds[k] = p.HMGet(ctx, h.l.spaces[k].Timers(), fields...)
		}
		return nil
	})
	if err == nil {
		for k, idx := range byShard {
			for j, v := range cmds[k].Val() {
				recs[idx[j]] = v
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil && hasRedisCode(err, "NOPERM") {
		// Retrying cannot grant a right: end these waits with the reason.
		for i := range chans {
			h.settle(chans[i], epoch, errorf("wait %q: %w", ids[i], h.q.redisError(err)))
		}
		return more
	}
	if err != nil {
		// Redis is unreachable or closing: the next tick reads these again.
		return false
	}
	for i, rec := range recs {
		s, _ := rec.(string)
		switch {
		case rec == nil:
			h.settle(chans[i], epoch, fmt.Errorf("%w: %q in namespace %q", ErrNotFound, ids[i], h.q.opts.Namespace))
		case len(s) > 0 && s[0] == 'f':
			h.settle(chans[i], epoch, nil)
		case len(s) > 0 && s[0] == 'c':
			h.settle(chans[i], epoch, h.cancelled(chans[i]))
		}
	}
	return more
}

// close ends every wait with ErrClosed and stops the hub's goroutines.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	for _, e := range h.entries {
		for w := range e.waiters {
			w.result <- ErrClosed
		}
	}
	h.entries = map[string]*entry{}
	h.mu.Unlock()
	close(h.done)
	_ = h.sub.Close()
	h.wg.Wait()
}
