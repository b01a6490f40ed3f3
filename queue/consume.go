package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/batch"
	"github.com/timerq/timerq/internal/sleep"
)

// Defaults of ConsumeOptions.
const (
	// DefaultClaimIdle is ConsumeOptions.ClaimIdle when it is 0.
	DefaultClaimIdle = 30 * time.Second
	// DefaultMaxAttempts is ConsumeOptions.MaxAttempts when it is 0.
	DefaultMaxAttempts = 5
	// DefaultRetryDelay is ConsumeOptions.RetryDelay when it is 0 (but at
	// most half of ClaimIdle).
	DefaultRetryDelay = time.Second
	// DefaultBlock is ConsumeOptions.Block when it is 0.
	DefaultBlock = time.Second
	// DefaultConsumeCount is ConsumeOptions.Count when it is 0.
	DefaultConsumeCount = 16
	// MaxConsumerNameLen is the longest group or consumer name.
	MaxConsumerNameLen = 128
)

// Event is one fire event, as Consume hands it to a handler.
type Event struct {
	// ID is the timer's ID: deduplicate side effects by it.
	ID string
	// Due and FiredAt are the timer's due and fired times, by the Redis
	// server's clock.
	Due     time.Time
	FiredAt time.Time
	Payload []byte
	// StreamID is the entry's ID in the fire stream of shard Shard. Each
	// shard of a namespace has its own fire stream, with its own IDs.
	StreamID string
	// Shard is the shard whose fire stream holds the entry (for a dead
	// letter, whose dead-letter stream): 0 in a namespace of one shard.
	// Requeue takes it with the StreamID.
	Shard int
	// Attempt is 1 on the first delivery to this group, and counts every
	// redelivery since (retries after errors, and reclaims from consumers
	// that died), as Redis's delivery counter does.
	Attempt int
	// Endpoint is the name of the endpoint the fire is delivered to
	// (NewTimer.Endpoint), "" for a timer that does not deliver.
	Endpoint string
	// URL is the timer's own delivery URL (NewTimer.URL), "" when it
	// delivers to its endpoint's.
	URL string
	// TraceParent is the W3C traceparent of the span that scheduled the
	// timer, when it was scheduled inside a trace (Options.Tracing), else
	// "": a push delivery sends it on.
	TraceParent string
	// FlowKey is the timer's flow key (NewTimer.FlowKey), "" for none.
	FlowKey string
	// Owner is the timer's owner (NewTimer.Owner), "" for none, and Epoch
	// the owner's fencing epoch when the timer was scheduled: an executor
	// that took the owner over at a later epoch (BumpEpoch) refuses the
	// fire as stale.
	Owner string
	Epoch uint64
	// Labels are the timer's labels, nil for none.
	Labels map[string]string
	// Deadline is the latest time the fire may be delivered (zero for
	// none); a delivery past it is dead-lettered with reason "deadline".
	Deadline time.Time
}

// ConsumeOptions configures Consume. The zero value selects every default:
// a zero field means its Default constant. None can be turned off, and a
// negative value is refused.
type ConsumeOptions struct {
	// ClaimIdle is how long a delivery may stay unacknowledged with a
	// consumer before another consumer of the group reclaims it: the
	// group's lease (LeaseOptions.Lease). It must exceed the longest time a
	// handler runs, plus the handlers before it in a batch of Count. 0
	// means DefaultClaimIdle (30 s); MinLease..MaxLease.
	ClaimIdle time.Duration

	// MaxAttempts is how many deliveries an event gets before it goes to the
	// dead-letter stream (Keys.DeadLetter). 0 means DefaultMaxAttempts (5).
	MaxAttempts int

	// RetryDelay is the wait before the first retry of an event whose
	// handler failed; it doubles with each attempt, capped at half of
	// ClaimIdle. 0 means DefaultRetryDelay (1 s) or ClaimIdle/2, whichever
	// is shorter; it must be below ClaimIdle.
	RetryDelay time.Duration

	// Block is the longest a Lease call waits for an event
	// (LeaseOptions.Block; each blocking read within it lasts at most a
	// second). A Redis client without ContextTimeoutEnabled cannot
	// interrupt a blocking read, so it also bounds how long Consume takes
	// to return once ctx ends. 0 means DefaultBlock (1 s).
	Block time.Duration

	// Count is the most events taken at once (LeaseOptions.Count), with
	// flow policies as without. 0 means DefaultConsumeCount (16); at most
	// MaxBatch.
	Count int

	// OnError, if set, is told of every Redis error, after which Consume
	// backs off and retries. nil means errors are retried unreported.
	// Handler errors are not reported here.
	OnError func(error)

	// Start is where the group starts reading when this Consume creates
	// it (LeaseOptions.Start): StartOldest ("", the default) or StartNow.
	Start GroupStart

	// OnSkip, if set, is told of every occurrence acknowledged without
	// being handed to the handler because of its schedule's overlap policy
	// (OverlapSkip). It runs on Consume's goroutine; keep it short.
	OnSkip func(Skip)
}

func (o ConsumeOptions) withDefaults() (ConsumeOptions, error) {
	bad := func(format string, args ...any) (ConsumeOptions, error) {
		return o, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
	}
	if o.ClaimIdle < 0 || o.RetryDelay < 0 || o.Block < 0 || o.MaxAttempts < 0 || o.Count < 0 {
		return bad("ConsumeOptions fields must not be negative; use 0 for the defaults")
	}
	if o.ClaimIdle == 0 {
		o.ClaimIdle = DefaultClaimIdle
	}
	if o.ClaimIdle < MinLease {
		return bad("ClaimIdle %v is too short; use at least %v, longer than any handler runs", o.ClaimIdle, MinLease)
	}
	if o.ClaimIdle > MaxLease {
		return bad("ClaimIdle %v is above %v; use a shorter one, longer than any handler runs", o.ClaimIdle, MaxLease)
	}
	if o.Count > MaxBatch {
		return bad("Count %d is above %d; take fewer events at once", o.Count, MaxBatch)
	}
	if o.Start == "" {
		o.Start = StartOldest
	}
	if err := o.Start.Validate(); err != nil {
		return o, err
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryDelay == 0 {
		o.RetryDelay = min(DefaultRetryDelay, o.ClaimIdle/2)
	}
	if o.RetryDelay >= o.ClaimIdle {
		// A delivery waiting for its retry would be reclaimed by another
		// consumer first.
		return bad("RetryDelay %v must be below ClaimIdle %v", o.RetryDelay, o.ClaimIdle)
	}
	if o.Block == 0 {
		o.Block = DefaultBlock
	}
	if o.Count == 0 {
		o.Count = DefaultConsumeCount
	}
	return o, nil
}

// ValidateConsumerName reports whether name can be a consumer group or
// consumer name: 1-128 characters of [A-Za-z0-9_.:@-]. The error wraps
// ErrInvalidOptions.
func ValidateConsumerName(kind, name string) error {
	const want = "use 1-128 characters of A-Z, a-z, 0-9, '_', '.', ':', '@' and '-'"
	if name == "" || len(name) > MaxConsumerNameLen {
		return fmt.Errorf("%w: %s name %q is %d characters long; %s", ErrInvalidOptions, kind, name, len(name), want)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.:@-", c) >= 0) {
			return fmt.Errorf("%w: %s name %q has %q at position %d; %s", ErrInvalidOptions, kind, name, c, i, want)
		}
	}
	return nil
}

// Consume delivers the namespace's fire events to handler, as consumer
// within the consumer group group, until ctx ends; then it returns nil. The
// group is created on first use and starts at the beginning of the fire
// stream, so it sees every event still in the stream (see
// Options.StreamMaxLen).
//
// Consume is a loop over Lease, Ack and Release, with ClaimIdle as the
// group's lease: a Consume and a pull consumer (Lease) may serve one group
// if Lease equals ClaimIdle. It takes up to ConsumeOptions.Count events at
// a time and hands them to handler one at a time, in stream order per
// shard except for retries; run several consumers for parallelism.
//
// Firing is exactly once: each timer has one fire event. Delivery to a
// handler is at least once: an event is acknowledged only after handler
// returns nil, so a consumer that crashes or is stopped mid-handler leaves
// it pending, and another consumer of the group reclaims it once it has
// been unacknowledged for ConsumeOptions.ClaimIdle. Handlers must therefore
// be idempotent: deduplicate side effects by Event.ID. A consumer restarted
// under the same name takes back what it left pending at once.
// Acknowledgements go in the background, those of the events handled
// while one round trip is under way together in the next, and all of a
// lease's before the next Lease call and before Consume returns: fast
// handlers cost about two round trips a lease, not one an event.
//
// A handler error makes Consume release the event for a retry after
// RetryDelay (doubling per attempt, at most ClaimIdle/2), to whichever
// consumer of the group leases next; once an event has been delivered
// MaxAttempts times without success it is appended to the dead-letter
// stream (Keys.DeadLetter) and acknowledged.
//
// Occurrences of a recurring schedule whose Overlap is OverlapSkip are
// not handed to handler while the group has another occurrence of that
// schedule pending: they are acknowledged and reported to
// ConsumeOptions.OnSkip instead (see Overlap).
//
// In a namespace with flow policies (Flows.PutPolicy), each flow key's
// rate and in-flight bound hold across every consumer, as for Lease; the
// Count events taken at once hold their keys' in-flight slots until each
// is handled.
//
// Redis errors are passed to ConsumeOptions.OnError and retried with
// backoff; Consume returns an error only for invalid arguments.
func (q *Queue) Consume(ctx context.Context, group, consumer string, handler func(context.Context, Event) error, opts ConsumeOptions) error {
	if err := ValidateConsumerName("group", group); err != nil {
		return err
	}
	if err := ValidateConsumerName("consumer", consumer); err != nil {
		return err
	}
	if handler == nil {
		return fmt.Errorf("%w: the handler is nil", ErrInvalidOptions)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	lo := LeaseOptions{Lease: opts.ClaimIdle, MaxAttempts: opts.MaxAttempts, Count: opts.Count, Start: opts.Start, onSkip: opts.OnSkip}
	c := &consumerRun{q: q, group: group, name: consumer, handler: handler, opts: opts, lease: lo}
	c.run(ctx)
	return nil
}

// consumerRun is one Consume call: Lease, the handler, then Ack or
// Release, over and over.
type consumerRun struct {
	q       *Queue
	group   string
	name    string
	handler func(context.Context, Event) error
	opts    ConsumeOptions
	lease   LeaseOptions // the group's: ClaimIdle, MaxAttempts, Count, OnSkip

	resumed bool        // what an earlier run of this consumer left pending was handed back
	retries []time.Time // when the events this run released become due again (local clock)
}

func (c *consumerRun) run(ctx context.Context) {
	acks := c.startAcks(ctx)
	defer acks.close()
	leaser := &Leaser{Queue: c.q, Group: c.group, Consumer: c.name}
	failures := 0
	fail := func(err error) bool {
		if c.opts.OnError != nil {
			c.opts.OnError(errorf("consume %s/%s: %w", c.group, c.name, err))
		}
		failures++
		return sleep.For(ctx, consumeBackoff(failures))
	}
	for ctx.Err() == nil {
		if !c.resumed {
			if err := c.resume(ctx); err != nil {
				if ctx.Err() != nil || !fail(err) {
					return
				}
				continue
			}
			c.resumed = true
		}
		acks.flush()
		lo := c.lease
		lo.Block = c.block()
		start := time.Now()
		ds, err := leaser.Lease(ctx, lo)
		if err != nil {
			if ctx.Err() != nil || !fail(err) {
				return
			}
			continue
		}
		failures = 0
		c.retries = slices.DeleteFunc(c.retries, func(at time.Time) bool { return !at.After(start) })
		for _, d := range ds {
			if ctx.Err() != nil {
				// Stopping: the rest stay pending, for a restart or, after
				// ClaimIdle, another consumer.
				return
			}
			c.handle(ctx, d, acks)
		}
	}
}

// block is how long the next Lease may wait for an event: Block, but no
// later than the first retry this run released (Lease does not wake for a
// release whose delay ends).
func (c *consumerRun) block() time.Duration {
	b := c.opts.Block
	for _, at := range c.retries {
		b = min(b, max(time.Until(at), 0))
	}
	return b
}

// handle runs the handler on one delivery, then acknowledges or releases
// it; Release dead-letters the last attempt. A delivery whose handler ran
// into the end of ctx is left pending, as a crash would leave it.
func (c *consumerRun) handle(ctx context.Context, d Delivery, acks *consumeAcks) {
	err := c.q.runHandler(ctx, c.group, c.name, c.handler, d.Event) // in a timerq.consume span (tracing.go)
	if err != nil && ctx.Err() != nil {
		return
	}
	if err == nil {
		acks.add(d.DeliveryID)
		return
	}
	settle := context.WithoutCancel(ctx) // the handler's verdict is recorded even when stopping
	delay := min(c.opts.RetryDelay<<min(d.Event.Attempt-1, 20), c.opts.ClaimIdle/2)
	r, err := c.q.Release(settle, c.group, d.DeliveryID, ReleaseOptions{Delay: delay, Error: err.Error()}, c.lease)
	switch {
	case err == nil && r.DeadLetterID == "":
		// Due by the server's clock, rounded up to the millisecond.
		c.retries = append(c.retries, time.Now().Add(delay+time.Millisecond))
	case err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrDeliveryNotFound):
		c.report(err)
	}
}

// consumeAcks acknowledges the events whose handlers returned nil, in the
// background and in batches: the first alone, those handled while its
// round trip was under way together in the next, so a batch of Count fast
// handlers costs about two XACK round trips rather than Count (no round
// trip per event), and an event stays unacknowledged after its handler
// returned for about one round trip, as before. The consumer flushes
// them before each Lease: an acknowledgement still in flight would let
// that Lease see its event pending (and skip the next occurrence of an
// OverlapSkip schedule for it). Errors are reported by flush and close,
// on the consumer's goroutine, so OnError is never called concurrently.
type consumeAcks struct {
	c       *consumerRun
	ids     chan string
	pending sync.WaitGroup // added, not yet through Ack
	done    chan struct{}  // closed when loop returns

	mu   sync.Mutex
	errs []error
}

func (c *consumerRun) startAcks(ctx context.Context) *consumeAcks {
	a := &consumeAcks{c: c, ids: make(chan string, MaxBatch), done: make(chan struct{})}
	go a.loop(context.WithoutCancel(ctx)) // the handlers' verdicts are recorded even when stopping
	return a
}

// add queues the acknowledgement of delivery id. At most Count are
// queued between flushes, so it does not block.
func (a *consumeAcks) add(id string) {
	a.pending.Add(1)
	a.ids <- id
}

// flush waits until every queued acknowledgement went through Ack and
// reports the errors.
func (a *consumeAcks) flush() {
	a.pending.Wait()
	a.mu.Lock()
	errs := a.errs
	a.errs = nil
	a.mu.Unlock()
	for _, err := range errs {
		a.c.report(err)
	}
}

// close flushes, then stops the loop.
func (a *consumeAcks) close() {
	a.flush()
	close(a.ids)
	<-a.done
}

func (a *consumeAcks) loop(ctx context.Context) {
	defer close(a.done)
	batch.Drain(a.ids, MaxBatch, func(ids []string) {
		if _, err := a.c.q.Ack(ctx, a.c.group, ids...); err != nil {
			a.mu.Lock()
			a.errs = append(a.errs, err)
			a.mu.Unlock()
		}
		a.pending.Add(-len(ids))
	})
}

func (c *consumerRun) report(err error) {
	if c.opts.OnError != nil {
		c.opts.OnError(errorf("consume %s/%s: %w", c.group, c.name, err))
	}
}

// resume hands back, for the next Lease, the deliveries that an earlier run
// of this consumer name left pending (it crashed, or stopped mid-handler):
// their leases end now instead of up to ClaimIdle from now. The next Lease
// reclaims them as their next attempt, and dead-letters those past
// MaxAttempts, as it would after ClaimIdle.
func (c *consumerRun) resume(ctx context.Context) error {
	l, err := c.q.layout(ctx)
	if err != nil {
		return err
	}
	cmds := make([]*redis.XPendingExtCmd, len(l.spaces))
	err = c.q.each(ctx, len(l.spaces), func(r redis.Cmdable, k int) redis.Cmder {
		cmds[k] = r.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: l.spaces[k].Fires(), Group: c.group, Start: "-", End: "+", Count: 1000, Consumer: c.name,
		})
		return cmds[k]
	})
	for k, cmd := range cmds {
		if err := cmd.Err(); err != nil && !isNoGroup(err) {
			return c.q.redisError(err)
		}
		for _, p := range cmd.Val() {
			id := DeliveryRef{Shard: k, StreamID: p.ID, Attempt: int(p.RetryCount)}.String()
			_, err := c.q.ExtendLease(ctx, c.group, id, time.Millisecond, c.lease)
			if err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrDeliveryNotFound) {
				return err
			}
		}
	}
	if err != nil && !isNoGroup(err) {
		return c.q.redisError(err)
	}
	return nil
}

func isNoGroup(err error) bool {
	return redis.HasErrorPrefix(err, "NOGROUP") || strings.Contains(err.Error(), "NOGROUP")
}

// consumeBackoff is the jittered wait before retry n (1-based) after a
// Redis error.
func consumeBackoff(n int) time.Duration {
	d := min(50*time.Millisecond<<min(n-1, 10), 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

// parseEvent decodes a fire stream entry written by claim.lua.
func parseEvent(m redis.XMessage, attempt int) (Event, error) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	ev := Event{ID: str("id"), Payload: []byte(str("payload")), StreamID: m.ID, Attempt: attempt, TraceParent: str("traceparent"),
		FlowKey: str("flow")}
	ev.Endpoint, ev.URL = splitDeliver(str("endpoint"))
	if err := ValidateID(ev.ID); err != nil {
		return ev, fmt.Errorf("malformed fire event %s: %w", m.ID, err)
	}
	due, err1 := strconv.ParseInt(str("due"), 10, 64)
	fired, err2 := strconv.ParseInt(str("fired"), 10, 64)
	if err1 != nil || err2 != nil {
		return ev, fmt.Errorf("malformed fire event %s: due %q or fired %q is not a millisecond timestamp", m.ID, str("due"), str("fired"))
	}
	ev.Due, ev.FiredAt = fromMillis(due), fromMillis(fired)
	meta, err := parseMeta(ev.ID, str("meta"))
	if err != nil {
		return ev, fmt.Errorf("malformed fire event %s: %w", m.ID, err)
	}
	ev.Owner, ev.Epoch, ev.Labels, ev.Deadline = meta.owner, meta.epoch, meta.labels, meta.deadline
	return ev, nil
}
