package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/shardsub"
	"github.com/timerq/timerq/scripts/lua"
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
}

// ConsumeOptions configures Consume. The zero value selects every default:
// a zero field means its Default constant. None can be turned off, and a
// negative value is refused.
type ConsumeOptions struct {
	// ClaimIdle is how long a delivery may stay unacknowledged with a
	// consumer before another consumer of the group reclaims it (XAUTOCLAIM):
	// it must exceed the longest time a handler runs. 0 means
	// DefaultClaimIdle (30 s); at least 10 ms.
	ClaimIdle time.Duration

	// MaxAttempts is how many deliveries an event gets before it goes to the
	// dead-letter stream (Keys.DeadLetter). 0 means DefaultMaxAttempts (5).
	MaxAttempts int

	// RetryDelay is the wait before the first retry of an event whose
	// handler failed; it doubles with each attempt, capped at half of
	// ClaimIdle. 0 means DefaultRetryDelay (1 s) or ClaimIdle/2, whichever
	// is shorter; it must be below ClaimIdle.
	RetryDelay time.Duration

	// Block is the longest XREADGROUP BLOCK. A Redis client without
	// ContextTimeoutEnabled cannot interrupt a block, so it also bounds how
	// long Consume takes to return once ctx ends. 0 means DefaultBlock (1 s).
	Block time.Duration

	// Count is the most entries read per call. 0 means
	// DefaultConsumeCount (16).
	Count int

	// OnError, if set, is told of every Redis error, after which Consume
	// backs off and retries. nil means errors are retried unreported.
	// Handler errors are not reported here.
	OnError func(error)

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
	if o.ClaimIdle < 10*time.Millisecond {
		return bad("ClaimIdle %v is too short; use at least 10ms, longer than any handler runs", o.ClaimIdle)
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
// Firing is exactly once: each timer has one fire event. Delivery to a
// handler is at least once: an event is acknowledged only after handler
// returns nil, so a consumer that crashes or is stopped mid-handler leaves
// it pending, and another consumer of the group reclaims it once it has
// been idle for ConsumeOptions.ClaimIdle. Handlers must therefore be
// idempotent: deduplicate side effects by Event.ID.
//
// A handler error makes Consume retry the event after RetryDelay (doubling
// per attempt); once an event has been delivered MaxAttempts times without
// success it is appended to the dead-letter stream (Keys.DeadLetter) and
// acknowledged. Events are handled one at a time, in stream order except
// for retries; run several consumers for parallelism.
//
// On a sharded namespace each shard has its own fire stream, and the group
// exists in each. There is no one blocking read over streams of several
// slots, and one blocking connection per shard would not scale, so Consume
// reads a shard's stream without blocking when the shard's claims announce
// fires (sharded pub/sub, one connection per node), when one of its
// retries or reclaims is due, and every ConsumeOptions.Block in any case,
// since pub/sub may lose a message.
//
// Occurrences of a recurring schedule whose Overlap is OverlapSkip are
// not handed to handler while the group has another occurrence of that
// schedule pending: they are acknowledged and reported to
// ConsumeOptions.OnSkip instead (see Overlap). Checking costs one script
// call per read that holds occurrences, none for plain timers.
//
// In a namespace with flow policies (Flows.PutPolicy), Consume takes events
// one at a time through Lease instead, so that each flow key's rate and
// in-flight bound hold across every consumer; a Consume that started
// before the first policy was put switches within about a second. The
// retries, dead letters and stop are as above, and ConsumeOptions.Count
// and OnSkip do not apply.
//
// Redis errors are passed to ConsumeOptions.OnError and retried with
// backoff; Consume returns an error only for invalid arguments, or when
// the namespace's layout cannot be read before ctx ends.
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
	for {
		moved, err := q.consumeLayout(ctx, group, consumer, handler, opts)
		if !moved {
			return err
		}
	}
}

// consumeMoved reports whether Consume must start over in another mode:
// the shard count changed (layoutMoved), or flow policies now exist, so
// that events must go through Lease for each key's limits to hold across
// consumers. Both reads are cached (at most one each per second).
func (q *Queue) consumeMoved(ctx context.Context, l *layout) bool {
	return q.layoutMoved(ctx, l) || q.hasFlowPolicies(ctx)
}

// layoutMoved reports whether the namespace of layout l, never created
// when l was read, now has another shard count: created since, after the
// consumer started. It reads the meta key at most once per layoutTTL, and
// not at all for a created namespace, whose shard count is fixed.
func (q *Queue) layoutMoved(ctx context.Context, l *layout) bool {
	if l.created {
		return false
	}
	nl, err := q.layout(ctx)
	return err == nil && len(nl.spaces) != len(l.spaces)
}

// consumeLayout is Consume in the namespace's layout as read now, until
// ctx ends or the shard count changes (moved).
func (q *Queue) consumeLayout(ctx context.Context, group, consumer string, handler func(context.Context, Event) error, opts ConsumeOptions) (moved bool, err error) {
	var l *layout
	for failures := 1; ; failures++ {
		if l, err = q.layout(ctx); err == nil {
			break
		}
		if opts.OnError != nil {
			opts.OnError(errorf("consume %s/%s: %w", group, consumer, err))
		}
		if !sleepCtx(ctx, min(50*time.Millisecond<<min(failures-1, 10), 5*time.Second)) {
			return false, nil
		}
	}
	if q.hasFlowPolicies(ctx) {
		// Flow control holds per key across consumers: through Lease.
		q.consumeLeased(ctx, group, consumer, handler, opts)
		return false, nil
	}
	loops := make([]*consumerLoop, len(l.spaces))
	for k, sp := range l.spaces {
		loops[k] = &consumerLoop{
			q: q, group: group, name: consumer, handler: handler, opts: opts,
			shard: k, stream: sp.Fires(), dead: sp.DeadLetter(),
			overlapKeys: lua.Overlap.Keys(sp, group),
			retries:     map[string]retryState{}, cursor: "0-0",
		}
	}
	onErr := func(err error) {
		if opts.OnError != nil {
			opts.OnError(errorf("consume %s/%s: %w", group, consumer, err))
		}
	}
	if len(loops) > 1 {
		return q.consumeShards(ctx, l, loops, onErr), nil
	}
	c := loops[0]
	failures := 0
	for ctx.Err() == nil {
		// One stream: block on it, as before sharding.
		if _, err := c.step(ctx, c.opts.Block); err != nil {
			if ctx.Err() != nil {
				break
			}
			if isNoGroup(err) {
				c.grouped = false // the stream or group was deleted: recreate
			}
			onErr(q.redisError(err))
			failures++
			if !sleepCtx(ctx, consumeBackoff(failures)) {
				break
			}
			continue
		}
		failures = 0
		if q.consumeMoved(ctx, l) {
			return true, nil
		}
	}
	return false, nil
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

// consumeShards consumes a sharded namespace: one loop per shard stream,
// each read without blocking when it may have work. A shard may have work
// when its claim announced fires on its notify channel (over one pub/sub
// connection per node), when a retry or reclaim of it is due, or, since
// pub/sub may lose messages, once every Block for every shard. It reports
// whether it stopped to start over in another mode (consumeMoved).
func (q *Queue) consumeShards(ctx context.Context, l *layout, loops []*consumerLoop, onErr func(error)) (moved bool) {
	block := loops[0].opts.Block
	sub := shardsub.New(q.rdb, l.sharded, 1024)
	defer sub.Close()
	byChannel := map[string]int{}
	var chans []string
	for k, sp := range l.spaces {
		byChannel[sp.Notify()] = k
		chans = append(chans, sp.Notify())
	}
	_ = sub.Subscribe(ctx, chans...) // on failure the periodic pass covers it
	ready := make([]bool, len(loops))
	all := func() {
		for k := range ready {
			ready[k] = true
		}
	}
	all()
	nextPass := time.Now().Add(block)
	timer := time.NewTimer(0)
	defer timer.Stop()
	failures := 0
	for ctx.Err() == nil {
		now := time.Now()
		if !now.Before(nextPass) {
			if q.consumeMoved(ctx, l) {
				return true
			}
			all()
			nextPass = now.Add(block)
		}
		for k, c := range loops {
			if t := c.nextWake(); !t.IsZero() && !t.After(now) {
				ready[k] = true
			}
		}
		var err error
		for k, c := range loops {
			if !ready[k] {
				continue
			}
			n, e := c.step(ctx, -1)
			if e != nil {
				if isNoGroup(e) {
					c.grouped = false // the stream or group was deleted: recreate
				}
				err = errorf("shard stream %s: %w", c.stream, e)
				break
			}
			ready[k] = n >= c.opts.Count // a full read: more may be waiting
		}
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			onErr(q.redisError(err))
			failures++
			if !sleepCtx(ctx, consumeBackoff(failures)) {
				return false
			}
			all()
			continue
		}
		failures = 0
		if slices.Contains(ready, true) {
			continue
		}
		wake := nextPass
		for _, c := range loops {
			if t := c.nextWake(); !t.IsZero() && t.Before(wake) {
				wake = t
			}
		}
		timer.Reset(max(time.Until(wake), 0))
		select {
		case <-ctx.Done():
			return false
		case ev := <-sub.Events():
			// A notification, or a (re)subscription after which one may
			// have been missed: read that shard.
			if k, ok := byChannel[ev.Channel]; ok {
				ready[k] = true
			}
		case <-timer.C:
		}
	}
	return false
}

type retryState struct {
	at time.Time // when to redeliver
}

type consumerLoop struct {
	q       *Queue
	group   string
	name    string
	handler func(context.Context, Event) error
	opts    ConsumeOptions
	shard   int
	stream  string // the shard's fire stream
	dead    string // the shard's dead-letter stream

	// overlapKeys are the overlap script's keys for this shard and group
	// (overlap.go).
	overlapKeys []string

	grouped     bool
	ownChecked  bool                  // pending entries of an earlier run of this consumer are queued for retry
	retries     map[string]retryState // failed deliveries held by this consumer, by stream ID
	cursor      string                // XAUTOCLAIM cursor
	nextReclaim time.Time
}

// step does one round: create the group if needed, pick up this consumer's
// old pending entries, reclaim idle ones from others, redeliver due
// retries, and read new entries, blocking up to block (-1: not at all). It
// returns how many entries it handled, and only Redis errors.
func (c *consumerLoop) step(ctx context.Context, block time.Duration) (handled int, _ error) {
	rdb, stream := c.q.rdb, c.stream
	if !c.grouped {
		err := rdb.XGroupCreateMkStream(ctx, stream, c.group, "0").Err()
		if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") && !strings.Contains(err.Error(), "BUSYGROUP") {
			return handled, err
		}
		c.grouped = true
	}
	if !c.ownChecked {
		// Entries delivered to an earlier run of this consumer name and never
		// acknowledged: retry them now rather than wait for ClaimIdle.
		pend, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: stream, Group: c.group, Start: "-", End: "+", Count: 1000, Consumer: c.name,
		}).Result()
		if err != nil {
			return handled, err
		}
		for _, p := range pend {
			c.retries[p.ID] = retryState{}
		}
		c.ownChecked = true
	}

	if now := time.Now(); !now.Before(c.nextReclaim) {
		msgs, next, err := rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: stream, Group: c.group, Consumer: c.name,
			MinIdle: c.opts.ClaimIdle, Start: c.cursor, Count: int64(c.opts.Count),
		}).Result()
		if err != nil {
			return handled, err
		}
		c.cursor = next
		if next == "0-0" || next == "" {
			// A full scan is done; rescan after a fraction of ClaimIdle, so a
			// dead consumer's deliveries wait at most about 1.25 ClaimIdle.
			c.cursor = "0-0"
			c.nextReclaim = now.Add(c.opts.ClaimIdle / 4)
		}
		handled += len(msgs)
		if err := c.handleClaimed(ctx, msgs); err != nil {
			return handled, err
		}
	}

	if due := c.dueRetries(); len(due) > 0 {
		// XCLAIM to ourselves counts a delivery, as a reclaim would.
		msgs, err := rdb.XClaim(ctx, &redis.XClaimArgs{
			Stream: stream, Group: c.group, Consumer: c.name, MinIdle: 0, Messages: due,
		}).Result()
		if err != nil {
			return handled, err
		}
		for _, id := range due {
			delete(c.retries, id) // re-added by handle if it fails again; gone if trimmed
		}
		handled += len(msgs)
		if err := c.handleClaimed(ctx, msgs); err != nil {
			return handled, err
		}
	}
	if ctx.Err() != nil {
		return handled, nil
	}

	if t := c.nextWake(); !t.IsZero() && block >= 0 {
		block = min(block, time.Until(t))
	}
	if block < time.Millisecond {
		block = -1 // no BLOCK at all: BLOCK 0 would wait forever
	}
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: c.group, Consumer: c.name, Streams: []string{stream, ">"},
		Count: int64(c.opts.Count), Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return handled, nil
	}
	if err != nil {
		return handled, err
	}
	for _, s := range res {
		skips, err := c.overlapCheck(ctx, s.Messages)
		if err != nil {
			c.overlapFailed(s.Messages)
			return handled, err
		}
		for _, m := range s.Messages {
			handled++
			if sk, ok := skips[m.ID]; ok {
				sk.Event.Attempt = 1
				c.skipped(sk)
				continue
			}
			if err := c.handle(ctx, m, 1); err != nil {
				return handled, err
			}
		}
	}
	return handled, nil
}

// handleClaimed handles reclaimed entries, reading each one's delivery count.
func (c *consumerLoop) handleClaimed(ctx context.Context, msgs []redis.XMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	cmds := make([]*redis.XPendingExtCmd, len(msgs))
	_, err := c.q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range msgs {
			cmds[i] = p.XPendingExt(ctx, &redis.XPendingExtArgs{
				Stream: c.stream, Group: c.group, Start: m.ID, End: m.ID, Count: 1,
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	var mine []redis.XMessage
	var attempts []int
	for i, m := range msgs {
		pend := cmds[i].Val()
		if len(pend) == 0 || pend[0].Consumer != c.name {
			continue // acknowledged or reclaimed by another consumer meanwhile
		}
		mine = append(mine, m)
		attempts = append(attempts, int(pend[0].RetryCount))
	}
	skips, err := c.overlapCheck(ctx, mine)
	if err != nil {
		c.overlapFailed(mine)
		return err
	}
	for i, m := range mine {
		if ctx.Err() != nil {
			return nil
		}
		if sk, ok := skips[m.ID]; ok {
			sk.Event.Attempt = attempts[i]
			c.skipped(sk)
			continue
		}
		if err := c.handle(ctx, m, attempts[i]); err != nil {
			return err
		}
	}
	return nil
}

// handle runs the handler on one delivery and acknowledges, schedules a
// retry or dead-letters it. It returns only Redis errors.
func (c *consumerLoop) handle(ctx context.Context, m redis.XMessage, attempt int) error {
	if g, ok := m.Values["for_group"].(string); ok && g != c.group {
		// Requeued for another group (Deliveries.Requeue): this group handled
		// the event the first time round.
		return c.q.rdb.XAck(ctx, c.stream, c.group, m.ID).Err()
	}
	ev, perr := parseEvent(m, attempt)
	ev.Shard = c.shard
	switch {
	case perr != nil:
		// Retrying cannot fix a malformed entry.
		return c.deadLetter(ctx, m, perr, attempt)
	case attempt > c.opts.MaxAttempts:
		// Delivered that often without a verdict: its consumers died
		// mid-handler each time, perhaps because of this very event.
		return c.deadLetter(ctx, m, fmt.Errorf("delivered %d times without an acknowledgement (consumers crashed or stopped mid-handler)", attempt), attempt)
	}
	err := c.runHandler(ctx, m, ev) // c.handler in a timerq.consume span (tracing.go)
	if err == nil {
		return c.q.rdb.XAck(ctx, c.stream, c.group, m.ID).Err()
	}
	if ctx.Err() != nil {
		// Stopping: leave it pending for a restart or another consumer.
		return nil
	}
	if attempt >= c.opts.MaxAttempts {
		return c.deadLetter(ctx, m, err, attempt)
	}
	delay := min(c.opts.RetryDelay<<min(attempt-1, 20), c.opts.ClaimIdle/2)
	c.retries[m.ID] = retryState{at: time.Now().Add(delay)}
	return nil
}

// deadLetter appends the entry to the dead-letter stream and acknowledges
// it, atomically: a crash in between would neither lose it nor copy it twice.
func (c *consumerLoop) deadLetter(ctx context.Context, m redis.XMessage, cause error, attempt int) error {
	values := make([]any, 0, 2*len(m.Values)+10)
	known := []string{"id", "due", "fired", "payload"}
	for _, k := range known {
		if v, ok := m.Values[k]; ok {
			values = append(values, k, v)
		}
	}
	var rest []string
	for k := range m.Values {
		if !slices.Contains(known, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		values = append(values, k, m.Values[k])
	}
	values = append(values,
		"error", cause.Error(), "attempts", attempt,
		"group", c.group, "consumer", c.name, "stream_id", m.ID)
	args := &redis.XAddArgs{Stream: c.dead, Values: values}
	if n := c.q.opts.streamMaxLen(); n > 0 {
		args.MaxLen, args.Approx = n, true
	}
	_, err := c.q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, args)
		p.XAck(ctx, c.stream, c.group, m.ID)
		return nil
	})
	if err == nil {
		delete(c.retries, m.ID)
	}
	return err
}

// dueRetries lists the retries whose time has come.
func (c *consumerLoop) dueRetries() []string {
	now := time.Now()
	var ids []string
	for id, r := range c.retries {
		if !r.at.After(now) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// nextWake is the earliest retry or reclaim time, so the read does not
// block past it.
func (c *consumerLoop) nextWake() time.Time {
	t := c.nextReclaim
	for _, r := range c.retries {
		if r.at.Before(t) {
			t = r.at
		}
	}
	return t
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
	return ev, nil
}

// sleepCtx sleeps d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
