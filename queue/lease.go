package queue

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/sleep"
	"github.com/timerq/timerq/scripts/lua"
)

// Pull consumption: Lease, Ack, Release and ExtendLease give a consumer
// that holds no Redis connection between calls (an HTTP client, through
// any number of stateless API replicas) the delivery guarantees of
// Consume. Where Consume keeps a failed event's retry time in its own
// memory, these keep every bit of state in Redis: the consumer group's
// pending entry list says who holds a delivery, since when (its lease) and
// how often it was delivered (its attempt), and a per-shard hash keeps
// where the scan for expired leases resumes. Any Queue value, in any
// process, may therefore serve any call for any consumer.

// Limits and defaults of LeaseOptions.
const (
	// DefaultLease is LeaseOptions.Lease when it is 0: Consume's
	// DefaultClaimIdle, so that both may serve one group.
	DefaultLease = DefaultClaimIdle
	// MinLease is the shortest lease.
	MinLease = 10 * time.Millisecond
	// MaxLease is the longest lease.
	MaxLease = 24 * time.Hour
)

// ErrInvalidDeliveryID means a delivery ID given to Ack, Release or
// ExtendLease is not one that Lease hands out (DeliveryRef.String), or
// names a shard the namespace does not have. It wraps ErrInvalidOptions.
var ErrInvalidDeliveryID = fmt.Errorf("%w: invalid delivery ID", ErrInvalidOptions)

// ErrDeliveryNotFound means Release or ExtendLease was given a delivery
// that is not pending in the group: it was acknowledged or dead-lettered
// already, its entry was trimmed from the fire stream, or it was never
// handed out. Nothing changed.
var ErrDeliveryNotFound = errors.New("timerq: delivery not pending in the group")

// ErrLeaseLost means Release or ExtendLease was given a delivery whose
// lease had expired and whose event was handed out again since (to this or
// another consumer): the newer delivery decides its fate, so nothing
// changed. The caller's work may still be acknowledged with Ack.
var ErrLeaseLost = errors.New("timerq: lease lost: the event was delivered again")

// LeaseOptions configures a consumer group's leases. Every caller for one
// group should pass the same Lease and MaxAttempts: like Consume's
// ClaimIdle, the lease is a rule that the callers who reclaim apply, not a
// value stored with each delivery. The zero value selects every default;
// a negative field is refused.
type LeaseOptions struct {
	// Lease is how long a consumer holds a delivery. Once it has been
	// unacknowledged that long, by the Redis server's clock, the next Lease
	// call of any consumer of the group takes it over, as its next attempt.
	// It must exceed the longest time a consumer works on an event (or the
	// consumer calls ExtendLease). 0 means DefaultLease (30 s);
	// MinLease..MaxLease, counted in whole milliseconds (rounded up).
	Lease time.Duration

	// MaxAttempts is how many deliveries an event gets before it goes to
	// the dead-letter stream, as in Consume. 0 means DefaultMaxAttempts (5).
	MaxAttempts int

	// Count is the most events one Lease call hands out. 0 means
	// DefaultConsumeCount (16); at most MaxBatch. Lease only.
	Count int

	// Block is how long Lease waits for an event when none is ready: a
	// long poll. 0 returns at once. Lease only.
	Block time.Duration

	// Start is where the group starts reading when this call creates it:
	// StartOldest ("", the default) or StartNow. It does nothing for a
	// group that exists.
	Start GroupStart

	// OnDeadLetter, if set, is told of each fire the call dead-lettered
	// instead of handing it out: past its deadline (Event.Deadline), or
	// reclaimed from a consumer whose lease ran out on its last attempt
	// (MaxAttempts). It is called before Lease returns, on the goroutine
	// that called it. A Dispatcher logs them as the attempts it did not
	// make, so that a timer's attempt log shows why its fire went to the
	// dead letters. Lease only.
	OnDeadLetter func(LeaseDeadLetter)

	// onSkip, if set, is told of each occurrence skipped under its
	// schedule's overlap policy (leaseOverlap): Consume's OnSkip.
	onSkip func(Skip)
}

// LeaseDeadLetter is a fire that a Lease call dead-lettered instead of
// handing it out (LeaseOptions.OnDeadLetter).
type LeaseDeadLetter struct {
	// Event is the fire. Its Attempt is the attempt it would have been,
	// as a Delivery's; DeliveryID is the delivery it would have been.
	Event      Event
	DeliveryID string
	// DeadLetterID is the dead letter's entry ID in its shard's
	// dead-letter stream (DeadLetter.Event.StreamID).
	DeadLetterID string
	// PastDeadline says the fire's deadline had passed (the cause starts
	// with ReasonDeadline). Otherwise its attempts ran out, or its entry
	// could not be read.
	PastDeadline bool
	// Cause is the dead letter's error.
	Cause string
	// At is when, by the Redis server's clock.
	At time.Time
}

func (o LeaseOptions) withDefaults() (LeaseOptions, error) {
	bad := func(format string, args ...any) (LeaseOptions, error) {
		return o, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
	}
	if o.Lease < 0 || o.MaxAttempts < 0 || o.Count < 0 || o.Block < 0 {
		return bad("LeaseOptions fields must not be negative; use 0 for the defaults")
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	o.Lease = ceilMilli(o.Lease)
	if o.Lease < MinLease || o.Lease > MaxLease {
		return bad("lease %v is outside %v..%v; choose one longer than any consumer works on an event", o.Lease, MinLease, MaxLease)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Count == 0 {
		o.Count = DefaultConsumeCount
	}
	if o.Count > MaxBatch {
		return bad("count %d is above %d", o.Count, MaxBatch)
	}
	if o.Start == "" {
		o.Start = StartOldest
	}
	if err := o.Start.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// GroupStart is where a consumer group starts reading the fire streams
// when Lease or Consume creates it, on its first use.
type GroupStart string

// Where a new group starts.
const (
	// StartOldest starts a new group at the oldest fire still kept in the
	// fire streams (Options.StreamMaxLen: up to a million per shard by
	// default): it gets every fire of the namespace that its streams still
	// hold, however old. The default, since a fire is work that someone
	// scheduled: a group that starts later than the timers it should
	// handle, such as a consumer deployed after the first timers fired,
	// still gets them.
	StartOldest GroupStart = "oldest"
	// StartNow starts a new group after the newest fire of each shard, as
	// the group's first Lease finds it: it gets only fires that come after
	// its creation. For a
	// group added to a namespace with a history, such as a new audit
	// consumer, that must not replay the old fires.
	StartNow GroupStart = "now"
)

// Validate reports whether s is StartOldest or StartNow; the error wraps
// ErrInvalidOptions.
func (s GroupStart) Validate() error {
	if s != StartOldest && s != StartNow {
		return fmt.Errorf("%w: group start %q is not one of %q, %q", ErrInvalidOptions, string(s), StartOldest, StartNow)
	}
	return nil
}

// streamID is the ID that XGROUP CREATE takes for s.
func (s GroupStart) streamID() string {
	if s == StartNow {
		return "$"
	}
	return "0"
}

func ceilMilli(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// Delivery is one event that Lease handed out, under a lease.
type Delivery struct {
	Event
	// DeliveryID names this delivery of the event (its shard, stream entry
	// and attempt; DeliveryRef): Ack, Release and ExtendLease take it. It
	// is an opaque string for clients; ParseDeliveryID reads it.
	DeliveryID string
	// LeaseExpires is when the lease ends, by the Redis server's clock:
	// from then on the next Lease call of the group may hand the event to
	// another consumer. It never ends earlier; it may end a little later
	// (Redis 7.0 counts it from when it handed the event out, a moment
	// after the clock reading that LeaseExpires is counted from), so a
	// consumer that keeps to LeaseExpires always holds its lease.
	LeaseExpires time.Time

	requeued bool // a dead letter requeued by Deliveries.Requeue (for_group)
	// served is the server's clock when the delivery was handed out (the
	// script's TIME), and asked the local clock, with its monotonic
	// reading, when the request that got it was sent: before that TIME.
	served, asked time.Time
}

// ServerNow estimates the Redis server's clock now, never behind it: the
// server's time when it handed the delivery out (a millisecond floored,
// so plus one) plus the time this process counted (its monotonic clock)
// since it sent the request that got it, which began before the server
// read its clock. It runs ahead by up to that millisecond and the
// request's trip to the server, and apart from the two clocks' rates
// (parts per million) is never behind. A Delivery that Lease did not make
// gives the local clock.
func (d Delivery) ServerNow() time.Time {
	if d.asked.IsZero() {
		return time.Now()
	}
	return d.served.Add(time.Millisecond + time.Since(d.asked))
}

// PastDeadline reports whether an attempt that began after wait from now,
// by ServerNow, would begin past the fire's deadline (Event.Deadline):
// the delivery must then not begin, and is dead-lettered with the reason
// deadline instead (ReleaseOptions.PastDeadline). A fire without a
// deadline never is. A dispatcher asks before each attempt, with the wait
// of a retry.
func (d Delivery) PastDeadline(wait time.Duration) bool {
	return !d.Event.Deadline.IsZero() && d.ServerNow().Add(wait).After(d.Event.Deadline)
}

// ReasonDeadline is the reason of a delivery that its fire's deadline
// (NewTimer.FireWithin, FireBy) ruled out: the error of its dead letter
// starts with it ("deadline: ..." or, from a dispatcher, "deadline after
// server_error: ..."), and so does its entry in the attempt log
// (DeliveryAttempt.Reason), as deliver.ReasonDeadline.
const ReasonDeadline = "deadline"

// deadlineCause is the error of a dead letter its deadline ruled out, as
// includes/deadline.lua's deadline_cause writes it: what would have been
// late, and when it would have begun (at, by the server's clock).
func deadlineCause(deadline time.Time, what string, at time.Time) string {
	return fmt.Sprintf("%s: %s at %d ms by the server clock, past the fire deadline %d ms (NewTimer.FireWithin or FireBy): dead-lettered, never delivered late",
		ReasonDeadline, what, at.UnixMilli(), deadline.UnixMilli())
}

// DeliveryRef is what a delivery ID says.
type DeliveryRef struct {
	// Shard and StreamID name the fire stream entry, as in Event.
	Shard    int
	StreamID string
	// Attempt is the delivery's attempt (Event.Attempt).
	Attempt int
	// Flow is the flow whose in-flight slot the delivery holds under a
	// flow policy (flow.go), "" for none: settling the delivery frees it.
	Flow string
	// Deadline is the fire's deadline (Event.Deadline), to the
	// millisecond; zero for none. Release checks a retry's delay against
	// it without reading the entry. It decides nothing else: Lease checks
	// the entry's own deadline whenever it hands the event out.
	Deadline time.Time
}

// String is the delivery ID: "<shard>-<stream entry ID>-<attempt>", as in
// "0-1700000000000-0-1", followed for a fire with a deadline by "_" and
// the deadline in Unix milliseconds, and for a delivery under a flow
// policy by "." and its flow in unpadded URL-safe base64; only unreserved
// URL characters.
func (r DeliveryRef) String() string {
	s := strconv.Itoa(r.Shard) + "-" + r.StreamID + "-" + strconv.Itoa(r.Attempt)
	if !r.Deadline.IsZero() {
		s += "_" + strconv.FormatInt(r.Deadline.UnixMilli(), 10)
	}
	if r.Flow != "" {
		s += "." + base64.RawURLEncoding.EncodeToString([]byte(r.Flow))
	}
	return s
}

// ParseDeliveryID reads a delivery ID that Lease handed out. An ID that is
// not exactly what DeliveryRef.String writes (garbled, forged, or with a
// shard beyond MaxShards) gives an error wrapping ErrInvalidDeliveryID.
func ParseDeliveryID(id string) (DeliveryRef, error) {
	bad := func() (DeliveryRef, error) {
		shown := id
		if len(shown) > 80 {
			shown = shown[:80] + "..."
		}
		return DeliveryRef{}, fmt.Errorf("%w %q: use a delivery ID exactly as Lease returned it, such as 0-1700000000000-0-1", ErrInvalidDeliveryID, shown)
	}
	base, flow, hasFlow := strings.Cut(id, ".")
	var flowID string
	if hasFlow {
		b, err := base64.RawURLEncoding.DecodeString(flow)
		if err != nil || !validFlowID(string(b)) {
			return bad()
		}
		flowID = string(b)
	}
	base, deadline, hasDeadline := strings.Cut(base, "_")
	var at time.Time
	if hasDeadline {
		ms, err := strconv.ParseUint(deadline, 10, 63)
		if err != nil || ms == 0 || ms > maxDeadlineMillis {
			return bad()
		}
		at = fromMillis(int64(ms))
	}
	parts := strings.Split(base, "-")
	if len(parts) != 4 {
		return bad()
	}
	var n [4]uint64
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return bad()
		}
		n[i] = v
	}
	if n[0] >= MaxShards || n[3] < 1 || n[3] > 1<<31 {
		return bad()
	}
	r := DeliveryRef{Shard: int(n[0]), StreamID: strconv.FormatUint(n[1], 10) + "-" + strconv.FormatUint(n[2], 10), Attempt: int(n[3]),
		Flow: flowID, Deadline: at}
	if r.String() != id { // leading zeros, a sign: not one Lease wrote
		return bad()
	}
	return r, nil
}

// maxDeadlineMillis bounds a delivery ID's deadline: 2^53 ms, which every
// script holds exactly.
const maxDeadlineMillis = 1 << 53

// deadlineArg is r's deadline as release.lua takes it: ms, or "" for none.
func (r DeliveryRef) deadlineArg() string {
	if r.Deadline.IsZero() {
		return ""
	}
	return strconv.FormatInt(r.Deadline.UnixMilli(), 10)
}

// parseDeliveryIDIn is ParseDeliveryID checking the shard against the
// namespace's layout.
func (q *Queue) parseDeliveryIDIn(l *layout, id string) (DeliveryRef, error) {
	r, err := ParseDeliveryID(id)
	if err != nil {
		return r, err
	}
	if r.Shard >= len(l.spaces) {
		return r, fmt.Errorf("%w %q: shard %d is outside 0..%d of namespace %q; use a delivery ID that Lease returned for this namespace",
			ErrInvalidDeliveryID, id, r.Shard, len(l.spaces)-1, q.opts.Namespace)
	}
	return r, nil
}

// Lease hands consumer, of consumer group group, up to opts.Count fire
// events of the namespace, each under a lease of opts.Lease, and returns
// them oldest reclaim first, then new events in stream order per shard.
// The group is created on first use, in each shard's fire stream by the
// first call that visits the shard (a call with nothing to hand out visits
// every shard), at opts.Start: the oldest fire kept by default, or the
// newest with StartNow; give every caller of a group the same Start.
// Consume is built on Lease: both may serve one group if Lease equals
// ConsumeOptions.ClaimIdle.
//
// A lease is the time a delivery may stay unacknowledged with its
// consumer, counted by the Redis server's clock from when it was handed
// out (Delivery.LeaseExpires). The consumer settles it with Ack (done),
// Release (failed: deliver again, perhaps after a delay) or ExtendLease
// (still working). A lease that runs out, because the consumer crashed,
// lost its network or works too long, is not an error: the next Lease call
// of any consumer of the group reclaims the event first, as its next
// Attempt, while the first consumer may still be working on it. Delivery
// is therefore at least once, and consumers must deduplicate side effects
// by Event.ID. Nothing is ever lost for want of an acknowledgement: an
// event stays pending until it is acknowledged or dead-lettered.
//
// An event reclaimed for the (MaxAttempts+1)th time is not handed out:
// it is appended to the dead-letter stream and acknowledged, field for
// field as Consume does it, so Deliveries.DeadLetters and Deliveries.Requeue see it. A requeued
// dead letter goes only to the group that dead-lettered it.
//
// Each call reclaims before it reads new events, so retries and expired
// leases are not starved. Expired leases are found by a walk of the
// group's pending entries (XPENDING IDLE, which reads no stream entry), at
// most Count of them per shard per call. When a shard has more than 128
// entries pending and its walk finds none expired, its scan pauses, for
// every caller, for a tenth of the lease (at most 100 ms): a lease that
// runs out, or a release's delay that ends, meanwhile is reclaimed that
// much later. Without the pause, a walk of thousands of live leases at
// every call was most of Redis's work per delivery.
//
// Cost: one round trip, a pipeline of one script per shard (split by
// node, in parallel, on a Cluster), whatever the number of events. Count
// is spread over the shards, so a shard holding more than its share is
// asked again in a second round (one more round trip, rarely two), and a
// Count below the shard count visits Count shards per round: keep Count at
// least the shard count. A batch holding occurrences of recurring
// schedules costs one more (the overlap check), and a malformed entry,
// dead-lettered at once, one more. With Block, a
// call that finds nothing waits with one blocking XREADGROUP over every
// shard's stream, in the group's wake group (NOACK, keyspace.WakeGroup),
// so that a new event wakes one waiting call, not all of them; woken by a
// new event and at most every second to look for
// expired leases and released events that became due; on a Cluster, where
// one XREAD cannot span a sharded namespace's slots, it looks every 200 ms.
//
// Flow policies (Flows.PutPolicy) apply to fires with a flow key: a fire
// whose key has no rate or in-flight slot free is parked instead of
// handed out, and a later Lease hands it out, round-robin across the keys
// that are ready, with the attempt it had; its delivery ID then names its
// key, whose slot Ack, Release and ExtendLease settle. That costs one more
// round trip per call (the parked fires, every shard in one pipeline),
// and one or two for a batch holding keyed fires; see flow.go.
//
// Overlap policies of recurring schedules apply as in Consume: an
// occurrence of a schedule under OverlapSkip is not handed out while the
// group has another of its occurrences pending; it is acknowledged and
// counted in Counters.OverlapSkipped instead. Checking costs one more
// round trip for a batch that holds occurrences, none for plain timers.
func (q *Queue) Lease(ctx context.Context, group, consumer string, opts LeaseOptions) ([]Delivery, error) {
	return q.lease(ctx, group, consumer, opts, nil)
}

// Leaser is Lease for a consumer that calls it over and over, one call
// after the other, as a dispatcher does: Lease(ctx, opts) is
// Queue.Lease(ctx, Group, Consumer, opts), with every guarantee, but for
// one round trip and one lease.lua call fewer per batch.
//
// A call of Lease that hands out fires and leaves the group nothing more
// in the streams (every shard read fewer new fires than it asked for and
// found fewer expired leases than it could take) remembers where each
// shard's stream ended. The next call with a Block then waits for a fire
// after those first, as a call that found nothing does, instead of a
// lease round that would find nothing: with 4 dispatchers at 2,000 fires
// a second, lease calls per delivered fire fell from 0.83 to 0.40
// (BENCHMARKS.md, "Delivery at 2,000/s: one lease call fewer a batch"),
// and empty ones from 8,570 to 334 of 20,000 fires. Expired leases and
// released fires whose delay ended are found by the round after the wait:
// woken by a new fire, or within a second, as while any Lease waits. A
// call without Block, more than leaserFresh (100 ms) after the last, after
// a change of the namespace's shards, or on a Cluster with several shards
// (where a wait is a pause, not a read that a new fire ends), runs its
// round first.
//
// A Leaser is not safe for concurrent use: give each goroutine its own
// (one consumer name may have several).
type Leaser struct {
	Queue           *Queue
	Group, Consumer string

	last  []string      // where each shard's stream ended when the last call drained it; nil: unknown
	at    time.Time     // when that call returned
	fresh time.Duration // leaserFresh if 0 (tests set it)
}

// leaserFresh is how long after a call that drained the streams the next
// call of its Leaser skips its first round. A fire added since has an
// entry in the wake group that wakes the wait at once, unless another
// waiting call took that entry, and with it the fire's lease (it asks
// again at once while it may have more). Past leaserFresh (a dispatcher
// that waited for room) the round runs first, as in Queue.Lease, so that
// no fire waits for the poll on such a call.
const leaserFresh = 100 * time.Millisecond

// Lease hands out up to opts.Count fire events under leases, as
// Queue.Lease does.
func (lr *Leaser) Lease(ctx context.Context, opts LeaseOptions) ([]Delivery, error) {
	return lr.Queue.lease(ctx, lr.Group, lr.Consumer, opts, lr)
}

func (q *Queue) lease(ctx context.Context, group, consumer string, opts LeaseOptions, lr *Leaser) ([]Delivery, error) {
	if err := ValidateConsumerName("group", group); err != nil {
		return nil, err
	}
	if err := ValidateConsumerName("consumer", consumer); err != nil {
		return nil, err
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(opts.Block)
	if lr != nil {
		last, fresh := lr.last, time.Since(lr.at) < cmp.Or(lr.fresh, leaserFresh)
		lr.last = nil
		if last != nil && fresh && len(last) == len(l.spaces) && opts.Block > 0 {
			// The last call drained the streams: wait for a fire first.
			if err := q.awaitFires(ctx, l, group, last, opts.Count, min(opts.Block, leasePoll)); err != nil {
				if ctx.Err() != nil {
					return nil, nil
				}
				return nil, errorf("lease %s/%s: %w", group, consumer, q.redisError(err))
			}
		}
	}
	for {
		out, last, parkedWait, err := q.leaseRound(ctx, l, group, consumer, opts)
		if err != nil {
			return nil, err
		}
		wait := time.Until(deadline)
		if len(out) > 0 || wait <= 0 {
			if lr != nil && parkedWait <= 0 && q.blocksOnFires(l) {
				lr.last, lr.at = last, time.Now()
			}
			return out, nil
		}
		if parkedWait > 0 && parkedWait < wait {
			// A parked fire may be handed out then (flow.go).
			if !q.awaitParked(ctx, l, group, last, opts.Count, parkedWait) {
				return nil, nil
			}
			continue
		}
		if err := q.awaitFires(ctx, l, group, last, opts.Count, min(wait, leasePoll)); err != nil {
			if ctx.Err() != nil {
				return nil, nil
			}
			return nil, errorf("lease %s/%s: %w", group, consumer, q.redisError(err))
		}
	}
}

// leasePoll bounds each wait of a blocking Lease, so that expired leases
// and released events that became due are picked up while it waits.
const leasePoll = time.Second

// leaseOnce hands out up to opts.Count events over every shard, in rounds
// of one pipeline each: the first spreads Count over the shards (from a
// random one, so that with Count below the shard count each gets its
// turn); each further round spreads what is left over the shards not yet
// visited and those that filled their share, and so may have more. last is
// each shard's last stream entry ID when every shard was visited and left
// nothing more to hand out (lease.lua's Drained; nil otherwise), for
// awaitFires: when out is empty, that was a round that found nothing.
func (q *Queue) leaseOnce(ctx context.Context, l *layout, group, consumer string, opts LeaseOptions) (out []Delivery, last []string, _ error) {
	n := len(l.spaces)
	cands := make([]int, n)
	off := rand.N(n)
	for i := range cands {
		cands[i] = (off + i) % n
	}
	last = make([]string, n)
	visited := make([]bool, n)
	busy := false // some shard may have more
	for left := opts.Count; left > 0 && len(cands) > 0; {
		var calls []call
		var rest []int
		for i, k := range cands {
			quota := left / len(cands)
			if i < left%len(cands) {
				quota++
			}
			if quota == 0 {
				rest = append(rest, k) // its turn comes in a later round
				continue
			}
			calls = append(calls, call{shard: k,
				args: []any{group, consumer, opts.Lease.Milliseconds(), opts.MaxAttempts, quota, q.opts.streamMaxLen(), opts.Start.streamID()}})
		}
		asked := time.Now()
		replies, err := q.runMany(ctx, l, lua.Lease, calls)
		if err != nil {
			return nil, nil, errorf("lease %s/%s: %w", group, consumer, err)
		}
		var round []Delivery
		for i, reply := range replies {
			c := calls[i]
			k, quota := c.shard, c.args[4].(int)
			visited[k] = true
			got, tail, settled, err := q.leaseReply(ctx, l, group, k, reply, opts, asked)
			if err != nil {
				return nil, nil, errorf("lease %s/%s: %w", group, consumer, err)
			}
			if settled {
				tail = "" // something happened: the group may have more
			}
			round = append(round, got...)
			last[k] = tail
			if tail == "" {
				busy = true
			}
			if len(got) == quota {
				rest = append(rest, k) // full: it may have more
			}
		}
		kept, err := q.leaseOverlap(ctx, l, group, round, opts.onSkip)
		if err != nil {
			return nil, nil, errorf("lease %s/%s: %w", group, consumer, err)
		}
		out = append(out, kept...)
		left -= len(kept)
		cands = rest
	}
	if busy || slices.Contains(visited, false) {
		return out, nil, nil
	}
	return out, last, nil
}

// leaseReply reads one shard's lease.lua (or flow_pop.lua) reply to the
// request sent at asked. It dead-letters the malformed entries at once
// (retrying cannot fix them), and those past their deadline by the
// reply's server clock, which lease.lua leaves out already but
// flow_pop.lua hands out (a round trip each, to release.lua), and returns
// the others, the reply's last (flow_pop.lua's next) as the script sent
// it, and whether it settled some entry itself: a lease caller takes that
// as "something happened", as it takes an empty last of lease.lua's. It tells
// opts.OnDeadLetter of both, and of those the script dead-lettered.
func (q *Queue) leaseReply(ctx context.Context, l *layout, group string, k int, reply any, opts LeaseOptions, asked time.Time) (_ []Delivery, last string, settled bool, _ error) {
	arr, ok := reply.([]any)
	if !ok || len(arr) < 3 {
		return nil, "", false, fmt.Errorf("unexpected reply %v from shard %d", reply, k)
	}
	nowMs, err := strconv.ParseInt(fmt.Sprint(arr[0]), 10, 64)
	died, ok := arr[2].([]any)
	if err != nil || !ok {
		return nil, "", false, fmt.Errorf("unexpected reply %v from shard %d", reply, k)
	}
	tail := fmt.Sprint(arr[1])
	served := fromMillis(nowMs)
	expires := served.Add(opts.Lease)
	// entry reads one entry {stream_id, attempt, head..., field_1,
	// value_1, ...}, with head strings before the fields.
	entry := func(e any, head int) (m redis.XMessage, attempt int, hd []string, err error) {
		f, err := replyStrings(e)
		if err != nil || len(f) < 2+head || (len(f)-head)%2 != 0 {
			return m, 0, nil, fmt.Errorf("unexpected entry %v from shard %d", e, k)
		}
		attempt, _ = strconv.Atoi(f[1])
		m = redis.XMessage{ID: f[0], Values: make(map[string]any, (len(f)-head)/2-1)}
		for i := 2 + head; i < len(f); i += 2 {
			m.Values[f[i]] = f[i+1]
		}
		return m, attempt, f[2 : 2+head], nil
	}
	// report tells OnDeadLetter of a fire dead-lettered, here or by the
	// script.
	report := func(ev Event, deliveryID, deadID string, pastDeadline bool, cause string) {
		if opts.OnDeadLetter != nil {
			opts.OnDeadLetter(LeaseDeadLetter{Event: ev, DeliveryID: deliveryID, DeadLetterID: deadID, PastDeadline: pastDeadline,
				Cause: cause, At: served})
		}
	}
	for _, e := range died {
		m, attempt, head, err := entry(e, 3)
		if err != nil {
			return nil, "", false, err
		}
		ev, _ := parseEvent(m, attempt)
		ev.Shard = k
		report(ev, DeliveryRef{Shard: k, StreamID: m.ID, Attempt: attempt, Deadline: ev.Deadline}.String(), head[0], head[1] == "deadline", head[2])
	}
	var out []Delivery
	for _, e := range arr[3:] {
		m, attempt, _, err := entry(e, 0)
		if err != nil {
			return nil, "", false, err
		}
		ev, perr := parseEvent(m, attempt)
		ev.Shard = k
		_, requeued := m.Values["for_group"]
		d := Delivery{Event: ev, LeaseExpires: expires, requeued: requeued, served: served, asked: asked,
			DeliveryID: DeliveryRef{Shard: k, StreamID: m.ID, Attempt: attempt, Deadline: ev.Deadline}.String()}
		op, cause := "dead", ""
		switch {
		case perr != nil:
			cause = perr.Error()
		case !ev.Deadline.IsZero() && served.After(ev.Deadline):
			op, cause = "deadline", deadlineCause(ev.Deadline, "not handed out", served)
		}
		if cause != "" {
			r, err := q.settle(ctx, l, group, d.DeliveryID, op, 0, cause, opts)
			if err != nil && !errors.Is(err, ErrDeliveryNotFound) && !errors.Is(err, ErrLeaseLost) {
				return nil, "", false, err
			}
			if err == nil && (r[0] == "dead" || r[0] == "deadline") {
				report(ev, d.DeliveryID, r[1], r[0] == "deadline", cause)
			}
			settled = true
			continue
		}
		out = append(out, d)
	}
	return out, tail, settled, nil
}

// leaseOverlap applies the schedules' overlap policies to deliveries about
// to be handed out, as Consume does (overlap.go): an occurrence of a
// schedule under OverlapSkip while the group has another of its
// occurrences pending is acknowledged by overlap.lua, counted in
// Counters.OverlapSkipped, reported to onSkip (if set), and left out. One
// pipeline of one script per shard whose deliveries hold occurrences; none
// for plain timers. Should it fail, the deliveries stay leased to the
// consumer and come back when their leases run out.
func (q *Queue) leaseOverlap(ctx context.Context, l *layout, group string, ds []Delivery, onSkip func(Skip)) ([]Delivery, error) {
	var calls []call
	var idx [][]int // per call, the deliveries it asks about
	byShard := map[int]int{}
	for i, d := range ds {
		sid, _, ok := ParseOccurrenceID(d.Event.ID)
		if !ok || d.requeued {
			continue // a requeued dead letter: a decision the policy does not undo
		}
		c, seen := byShard[d.Event.Shard]
		if !seen {
			c = len(calls)
			byShard[d.Event.Shard] = c
			calls = append(calls, call{shard: d.Event.Shard, keys: lua.Overlap.Keys(l.spaces[d.Event.Shard], group), args: []any{group}})
			idx = append(idx, nil)
		}
		calls[c].args = append(calls[c].args, d.Event.StreamID, sid)
		idx[c] = append(idx[c], i)
	}
	if len(calls) == 0 {
		return ds, nil
	}
	replies, err := q.runMany(ctx, l, lua.Overlap, calls)
	if err != nil {
		return nil, fmt.Errorf("overlap policy: %w", err)
	}
	pending := make([]string, len(ds)) // for a skipped delivery, the pending entry it yields to
	for c, reply := range replies {
		v, err := replyStrings(reply)
		if err != nil || len(v) != len(idx[c]) {
			return nil, fmt.Errorf("overlap script: unexpected reply %v", reply)
		}
		for j, i := range idx[c] {
			pending[i] = v[j]
		}
	}
	kept := ds[:0:0]
	for i, d := range ds {
		if pending[i] == "" {
			kept = append(kept, d)
		} else if onSkip != nil {
			sid, _, _ := ParseOccurrenceID(d.Event.ID)
			onSkip(Skip{Event: d.Event, Schedule: sid, Pending: pending[i]})
		}
	}
	return kept, nil
}

// awaitFires waits up to d for an entry after last[k] in any shard's fire
// stream: one blocking XREADGROUP over them all, in group's wake group
// (keyspace.WakeGroup), or on a Cluster with several shards, whose slots
// one read cannot span, a pause of fireReadPoll. count is how many fires
// the waiter will lease when woken.
//
// The wake group is what keeps blocked Lease calls from waking as a herd.
// A plain XREAD wakes every caller blocked on a stream for each new entry,
// and each then ran a lease round that all but one found empty: with four
// dispatchers, three empty rounds per delivered fire, more Redis work than
// the fire (BENCHMARKS.md, "Delivery at a fire's cost"). In a group, Redis
// hands each new entry to one blocked reader, up to its COUNT, so k new
// fires wake about k/count waiters, and NOACK keeps the group's pending
// list empty. An entry added after the lease round that found nothing
// and before this read is still undelivered in the wake group, so it wakes
// this read at once: no fire waits for the poll. A wake group that fell
// behind while its waiters were busy hands out entries at or before
// last[k], which the lease round already saw: those are read past without
// another round.
func (q *Queue) awaitFires(ctx context.Context, l *layout, group string, last []string, count int, d time.Duration) error {
	if last == nil {
		return nil // something happened: look again at once
	}
	if !q.blocksOnFires(l) {
		sleep.For(ctx, min(d, fireReadPoll))
		return nil
	}
	deadline := time.Now().Add(d)
	args := &redis.XReadGroupArgs{Group: keyspace.WakeGroup(group), Consumer: keyspace.WakeConsumer,
		Count: int64(max(count, 1)), NoAck: true}
	for _, sp := range l.spaces {
		args.Streams = append(args.Streams, sp.Fires())
	}
	for range l.spaces {
		args.Streams = append(args.Streams, ">")
	}
	for {
		// BLOCK 0 would wait forever.
		args.Block = max(time.Until(deadline), time.Millisecond)
		got, err := q.rdb.XReadGroup(ctx, args).Result()
		switch {
		case errors.Is(err, redis.Nil):
			return nil
		case err != nil && hasRedisCode(err, "NOGROUP"):
			// The first wait of group (or a stream deleted since): create
			// the wake group at the streams' ends. The caller's next lease
			// round sees any fire added meanwhile.
			return q.createWakeGroups(ctx, l, args.Group)
		case err != nil:
			return err
		}
		if !staleWakes(got, l, last) || time.Until(deadline) < time.Millisecond {
			return nil
		}
	}
}

// blocksOnFires reports whether awaitFires waits in a blocking read,
// woken by a new fire; if not (a Cluster with several shards), it pauses
// for fireReadPoll, and a Leaser runs its round first.
func (q *Queue) blocksOnFires(l *layout) bool {
	_, cluster := q.rdb.(*redis.ClusterClient)
	return !cluster || len(l.spaces) == 1
}

// staleWakes reports whether every entry of a wake read is at or before
// the last entry the lease round saw in its stream.
func staleWakes(got []redis.XStream, l *layout, last []string) bool {
	for _, s := range got {
		k := slices.IndexFunc(l.spaces, func(sp keyspace.Space) bool { return sp.Fires() == s.Stream })
		if k < 0 || len(s.Messages) == 0 {
			return false
		}
		newest := Event{StreamID: s.Messages[len(s.Messages)-1].ID}
		if compareEntryIDs(newest, Event{StreamID: last[k]}) > 0 {
			return false
		}
	}
	return true
}

// createWakeGroups creates the wake group named wake on every shard's fire
// stream that lacks it, at the stream's end (creating an empty stream
// where there is none, as lease.lua does for a group).
func (q *Queue) createWakeGroups(ctx context.Context, l *layout, wake string) error {
	cmds := make([]*redis.StatusCmd, len(l.spaces))
	_ = q.each(ctx, len(l.spaces), func(c redis.Cmdable, k int) redis.Cmder {
		cmds[k] = c.XGroupCreateMkStream(ctx, l.spaces[k].Fires(), wake, "$")
		return cmds[k]
	}) // each command's error is looked at below
	for _, c := range cmds {
		if err := c.Err(); err != nil && !hasRedisCode(err, "BUSYGROUP") {
			return err
		}
	}
	return nil
}

// Ack acknowledges deliveries of group by their delivery IDs, in one round
// trip (one pipeline): done, never to be delivered again. acked[i] reports
// whether ids[i] was pending; false means it was acknowledged or
// dead-lettered already, its entry was trimmed, or it never was handed
// out, and is no error, so acknowledging twice is safe. A delivery whose
// lease expired may still be acknowledged, even after its event was handed
// out again: the work was done. An invalid ID (ErrInvalidDeliveryID), or
// more than MaxBatch, fails the whole call before anything is acknowledged.
func (q *Queue) Ack(ctx context.Context, group string, ids ...string) (acked []bool, _ error) {
	if err := ValidateConsumerName("group", group); err != nil {
		return nil, err
	}
	if len(ids) > MaxBatch {
		return nil, fmt.Errorf("%w: %d delivery IDs in one Ack, above %d; acknowledge in batches", ErrInvalidOptions, len(ids), MaxBatch)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	l, err := q.layout(ctx)
	if err != nil {
		return nil, err
	}
	refs := make([]DeliveryRef, len(ids))
	for i, id := range ids {
		if refs[i], err = q.parseDeliveryIDIn(l, id); err != nil {
			return nil, err
		}
	}
	cmds := make([]*redis.IntCmd, len(ids))
	err = q.each(ctx, len(ids), func(c redis.Cmdable, i int) redis.Cmder {
		cmds[i] = c.XAck(ctx, l.spaces[refs[i].Shard].Fires(), group, refs[i].StreamID)
		return cmds[i]
	})
	acked = make([]bool, len(ids))
	for i, c := range cmds {
		if err := c.Err(); err != nil {
			if isNoGroup(err) {
				continue // no group, nothing pending
			}
			return nil, errorf("ack %s: %w", ids[i], q.redisError(err))
		}
		acked[i] = c.Val() > 0
	}
	if err != nil && !isNoGroup(err) {
		return nil, errorf("ack: %w", q.redisError(err))
	}
	if err := q.flowDone(ctx, l, group, refs...); err != nil {
		return acked, err
	}
	return acked, nil
}

// ReleaseOptions says how Release settles a delivery.
type ReleaseOptions struct {
	// Delay is how long, from now by the Redis server's clock, the event
	// waits before it may be delivered again: 0 (at once) up to the
	// group's lease. It is handed to the first Lease call of the group
	// after that, to the millisecond at best.
	Delay time.Duration
	// Error says why the consumer failed; it is recorded if the event is
	// dead-lettered. "" records "released by the consumer".
	Error string
	// DeadLetter dead-letters the event now, whatever its attempt: for an
	// event the consumer knows it can never handle.
	DeadLetter bool
	// PastDeadline dead-letters the event now because its deadline
	// (Event.Deadline) has passed, or would before its next attempt could
	// begin (Delivery.PastDeadline): as DeadLetter, and counted in
	// Counters.DeadlineDeadLetters. Start Error with ReasonDeadline.
	PastDeadline bool
	// Log, if set, is appended to the attempt log of timer Log.TimerID
	// (Deliveries.Attempts) in the same round trip. A failed log write, after
	// a good release, gives the Released and an error wrapping
	// ErrAttemptLog.
	Log *DeliveryAttempt
}

// Released is what Release did.
type Released struct {
	// DeadLetterID is the dead letter's entry ID in its shard's
	// dead-letter stream (DeadLetter.Event.StreamID) if Release
	// dead-lettered the event, else "".
	DeadLetterID string
	// RedeliverAt is when the event may be delivered again, by the Redis
	// server's clock; zero if it was dead-lettered.
	RedeliverAt time.Time
	// PastDeadline says the event was dead-lettered for its deadline
	// (ReasonDeadline): ReleaseOptions.PastDeadline, or a release whose
	// delay would have brought the redelivery past it.
	PastDeadline bool
}

// Release hands the delivery id of group back, as a failed attempt: the
// event is delivered again ro.Delay from now, as its next attempt, as
// Consume retries an event whose handler failed. A delivery that was the
// event's last attempt (opts.MaxAttempts) is dead-lettered instead, with
// ro.Error, as Consume does; so is any delivery with ro.DeadLetter. So is
// a delivery whose redelivery, ro.Delay from now by the server's clock,
// would come past its fire's deadline (Event.Deadline, which id carries):
// with the reason ReasonDeadline, ro.Error after it, and
// Released.PastDeadline set. opts are the group's LeaseOptions; Release
// uses Lease and MaxAttempts.
//
// The delay is kept in the group's pending entry list: the entry's last
// delivery time is set so that its lease runs out ro.Delay from now, after
// which the next Lease call of the group reclaims it. Its precision is
// therefore the millisecond plus the time until the next Lease call (while
// a Lease long-polls, at most a second), plus, with more than 128 entries
// pending, up to a tenth of the lease (at most 100 ms) of a paused scan
// (Lease).
//
// A delivery whose lease already expired and whose event went out again
// gives ErrLeaseLost, one no longer pending ErrDeliveryNotFound; neither
// changes anything. One round trip (one script).
func (q *Queue) Release(ctx context.Context, group, id string, ro ReleaseOptions, opts LeaseOptions) (Released, error) {
	opts, err := q.settleArgs(group, opts)
	if err != nil {
		return Released{}, err
	}
	if ro.Delay < 0 || ceilMilli(ro.Delay) > opts.Lease {
		return Released{}, fmt.Errorf("%w: release delay %v is outside 0..%v (the group's lease); release with a shorter delay",
			ErrInvalidOptions, ro.Delay, opts.Lease)
	}
	l, err := q.layout(ctx)
	if err != nil {
		return Released{}, err
	}
	op, cause := "release", ro.Error
	switch {
	case ro.PastDeadline:
		op = "deadline"
	case ro.DeadLetter:
		op = "dead"
	}
	if cause == "" {
		cause = "released by the consumer"
	}
	var r []string
	var logErr error
	if ro.Log != nil {
		if err := ValidateID(ro.Log.TimerID); err != nil {
			return Released{}, err
		}
		ref, err := q.parseDeliveryIDIn(l, id)
		if err != nil {
			return Released{}, err
		}
		r, err = q.releaseLogged(ctx, l, group, id, ref, op, ceilMilli(ro.Delay), cause, opts, *ro.Log)
		if r == nil {
			return Released{}, err
		}
		logErr = err
	} else if r, err = q.settle(ctx, l, group, id, op, ceilMilli(ro.Delay), cause, opts); err != nil {
		return Released{}, err
	}
	if ref, _ := ParseDeliveryID(id); ref.Flow != "" {
		if err := q.flowDone(ctx, l, group, ref); err != nil && logErr == nil {
			logErr = err
		}
	}
	if r[0] == "dead" || r[0] == "deadline" {
		return Released{DeadLetterID: r[1], PastDeadline: r[0] == "deadline"}, logErr
	}
	at, _ := strconv.ParseInt(r[1], 10, 64)
	return Released{RedeliverAt: fromMillis(at)}, logErr
}

// ExtendLease renews the lease of delivery id of group, so that it ends d
// from now by the Redis server's clock (0 means opts.Lease; at most
// opts.Lease), and returns when it ends. Call it before the lease runs out
// when an event takes long. The attempt does not change. A lease that ran
// out may be extended while no other consumer has taken the event over;
// afterwards it gives ErrLeaseLost. One round trip (one script).
func (q *Queue) ExtendLease(ctx context.Context, group, id string, d time.Duration, opts LeaseOptions) (time.Time, error) {
	opts, err := q.settleArgs(group, opts)
	if err != nil {
		return time.Time{}, err
	}
	if d == 0 {
		d = opts.Lease
	}
	if d < 0 || ceilMilli(d) > opts.Lease {
		return time.Time{}, fmt.Errorf("%w: lease extension %v is outside 0..%v (the group's lease)", ErrInvalidOptions, d, opts.Lease)
	}
	l, err := q.layout(ctx)
	if err != nil {
		return time.Time{}, err
	}
	r, err := q.settle(ctx, l, group, id, "extend", ceilMilli(d), "", opts)
	if err != nil {
		return time.Time{}, err
	}
	at, _ := strconv.ParseInt(r[1], 10, 64)
	if ref, _ := ParseDeliveryID(id); ref.Flow != "" {
		if err := q.flowExtend(ctx, l, group, ref, fromMillis(at), opts); err != nil {
			return fromMillis(at), err
		}
	}
	return fromMillis(at), nil
}

func (q *Queue) settleArgs(group string, opts LeaseOptions) (LeaseOptions, error) {
	if err := ValidateConsumerName("group", group); err != nil {
		return opts, err
	}
	return opts.withDefaults()
}

// settle runs release.lua for one delivery and turns its refusals into
// errors; it returns the reply's two strings otherwise.
func (q *Queue) settle(ctx context.Context, l *layout, group, id, op string, d time.Duration, cause string, opts LeaseOptions) ([]string, error) {
	ref, err := q.parseDeliveryIDIn(l, id)
	if err != nil {
		return nil, err
	}
	reply, err := q.run(ctx, l, lua.Release, ref.Shard,
		group, ref.StreamID, ref.Attempt, op, d.Milliseconds(), opts.Lease.Milliseconds(), opts.MaxAttempts, cause, q.opts.streamMaxLen(),
		ref.deadlineArg())
	if err != nil {
		return nil, errorf("%s %s: %w", op, id, err)
	}
	return settleReply(reply, group, id, op)
}

// settleReply reads release.lua's reply, turning its refusals into
// errors; it returns the reply's two strings otherwise.
func settleReply(reply any, group, id, op string) ([]string, error) {
	r, err := replyStrings(reply)
	if err != nil || len(r) != 2 {
		return nil, errorf("%s %s: unexpected reply %v", op, id, reply)
	}
	switch r[0] {
	case "notpending":
		return nil, fmt.Errorf("%w: %s in group %q was acknowledged or dead-lettered already, or never handed out; nothing to do",
			ErrDeliveryNotFound, id, group)
	case "trimmed":
		return nil, fmt.Errorf("%w: %s left the fire stream (Options.StreamMaxLen trimmed it), so it was acknowledged; raise StreamMaxLen if consumers fall this far behind",
			ErrDeliveryNotFound, id)
	case "lost":
		return nil, fmt.Errorf("%w: %s: its lease expired and the event was handed out again (now attempt %s), which decides its fate; extend leases before they run out, or lease for longer",
			ErrLeaseLost, id, r[1])
	}
	return r, nil
}
