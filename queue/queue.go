package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/timerq/timerq/internal/aclright"
	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/sleep"
	"github.com/timerq/timerq/scripts/lua"
	"go.opentelemetry.io/otel/trace"
)

// Queue is a namespace of durable timers in Redis. It is safe for concurrent
// use. Create one with New and Close it when done; closing does not close the
// Redis client, which the caller owns.
type Queue struct {
	rdb    redis.UniversalClient
	opts   Options
	tracer trace.Tracer // from opts.TracerProvider (tracing.go)

	layMu sync.Mutex             // serialises the reads of the layout
	lay   atomic.Pointer[layout] // nil until read from Redis

	// gaveUp holds, per shard, the token of this queue's last claim
	// decision that was not committed (replicas.go), which its next claim
	// of the shard takes over at once.
	gaveUp sync.Map

	mu     sync.Mutex
	hub    *hub // started by the first Wait
	closed bool

	coalesce coalescer // Options.CoalesceSchedules (coalesce.go)

	flow flowCache // the namespace's flow policies, read at most once a second (flow.go)

	quota quotaCache // the namespace's quotas, read at most once a second (quotas.go)

	// noFunctions is set once the server or the user cannot run Redis
	// functions: scripts then run by EVALSHA (scripting.go).
	noFunctions atomic.Bool

	// validated, when a test sets it, is called by each validateTimer:
	// the test counts that a timer is validated once per call.
	validated func(NewTimer)
}

// New returns a Queue over rdb, which may be a standalone, Sentinel or
// Cluster client. It validates opts but does not contact Redis: the
// namespace's shard count is read (and checked against Options.Shards) on
// first use. Give a Cluster client ReloadOnFailover and
// ClusterStateReloadInterval, or a master failover stalls its shards for
// up to a minute.
func New(rdb redis.UniversalClient, opts Options) (*Queue, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: pass a client from redis.NewClient, redis.NewUniversalClient or similar", ErrNilClient)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	q := &Queue{rdb: rdb, opts: opts, tracer: newTracer(opts.TracerProvider)}
	if opts.CoalesceSchedules {
		q.coalesce.slots = make(chan struct{}, maxLeaders)
	}
	return q, nil
}

// Client returns the Redis client the queue was created with. Everything
// built on the queue (a poller.Poller, a ui.Handler) reaches Redis through
// it, so that one queue always means one client.
func (q *Queue) Client() redis.UniversalClient { return q.rdb }

// Namespace returns the queue's namespace.
func (q *Queue) Namespace() string { return q.opts.Namespace }

// Options returns the queue's options with defaults filled in.
func (q *Queue) Options() Options { return q.opts }

// Close stops the queue's waiters, which return ErrClosed. It does not close
// the Redis client.
func (q *Queue) Close() error {
	q.mu.Lock()
	h := q.hub
	q.closed = true
	q.hub = nil
	q.mu.Unlock()
	if h != nil {
		h.close()
	}
	return nil
}

// Schedule creates the timer id, due at due, unless a timer with that ID
// already exists in any state, in which case it returns the existing record
// with Created false and changes nothing. A due time in the past is
// allowed: the timer fires on the next claim. A due time between two
// milliseconds is rounded up to the later one, so it is never early.
//
// Retrying with the same ID is safe, whatever the error: the timer is
// created once at most. An error that wraps ErrOutcomeUnknown means the
// call may have written the timer (its reply was lost, say in a Redis
// crash or failover): call Schedule again with the same ID to learn which
// (Created false if it had been written) and to make sure it is. Other
// errors mean nothing was written.
func (q *Queue) Schedule(ctx context.Context, id string, due time.Time, payload []byte) (ScheduleResult, error) {
	// Validated here, not by ScheduleBatch, so that the error does not
	// speak of a batch.
	t := NewTimer{ID: id, Due: due, Payload: payload}
	if err := q.validateTimer(t); err != nil {
		return ScheduleResult{}, err
	}
	res, err := q.scheduleValid(ctx, []NewTimer{t})
	if err != nil {
		return ScheduleResult{}, err
	}
	return res[0], nil
}

// scheduleChunk is how many timers go into one script call: large enough to
// amortise the call, small enough not to stall Redis for long.
const scheduleChunk = 500

// ScheduleBatch schedules many timers in one round trip (a batch of more
// than 1,000 in pipelines of about 1,000, up to four in flight at once on
// connections of the client's pool) and returns one result per timer, in
// order, each as Schedule would. It validates every
// timer first: if any is invalid it returns an error naming it and writes
// nothing. A repeated ID within the batch is created once; its later
// occurrences report Created false.
//
// On an error some timers may have been written (one shard's call can
// fail while another's succeeds), and an error that wraps
// ErrOutcomeUnknown means a reply was lost. Calling ScheduleBatch again
// with the same timers is safe: each ID is created once at most.
//
// Each call makes one timerq.schedule span (Options.TracerProvider); when it
// is sampled, every timer the call creates carries its trace to the fire.
func (q *Queue) ScheduleBatch(ctx context.Context, timers []NewTimer) ([]ScheduleResult, error) {
	for i, t := range timers {
		if err := q.validateTimer(t); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				fe.Item = i
			}
			return nil, errorf("batch item %d: %w", i, err)
		}
	}
	return q.scheduleValid(ctx, timers)
}

// scheduleValid is ScheduleBatch for timers the public entry has
// validated: the paths below it (coalescing, a second layout read) take
// them as they are, so that each timer is validated once per call.
func (q *Queue) scheduleValid(ctx context.Context, timers []NewTimer) (out []ScheduleResult, err error) {
	ctx, span, tp := q.startSchedule(ctx, timers)
	defer func() { endSchedule(span, out, err) }()
	if q.opts.CoalesceSchedules && len(timers) == 1 && tp == "" && timers[0].URL == "" {
		return q.scheduleCoalesced(ctx, timers[0])
	}
	return q.scheduleBatch(ctx, timers, tp)
}

// scheduleBatch is ScheduleBatch, storing the traceparent tp ("" for none)
// with each timer it creates.
func (q *Queue) scheduleBatch(ctx context.Context, timers []NewTimer, tp string) ([]ScheduleResult, error) {
	out, _, err := q.scheduleEach(ctx, timers, tp)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scheduleEach is scheduleBatch with each timer's own outcome besides the
// batch's error (scheduleLayout), for the coalescer, whose callers each
// get their own timer's.
func (q *Queue) scheduleEach(ctx context.Context, timers []NewTimer, tp string) ([]ScheduleResult, []error, error) {
	out, errs, err := q.scheduleLayout(ctx, timers, tp)
	if errors.Is(err, errRelayout) {
		// Refused before any write: the namespace was created with more
		// shards since the layout was read, and is read again now.
		out, errs, err = q.scheduleLayout(ctx, timers, tp)
	}
	return out, errs, err
}

// scheduleLayout is scheduleBatch in the layout the queue knows. err is
// the batch's error, as ScheduleBatch returns it. When err is one of the
// script calls' (a call refused, or its reply lost or unreadable) errs
// holds each timer's own outcome: nil for a timer whose result out holds
// (its call succeeded; in a batch with several shards another call may
// have failed), else the error of its call, or the error of reading its
// existing record. errs is nil when err fails every timer alike: the
// layout, the endpoints or the quotas could not be read, or refused the
// batch, before any call; or the calls could not be sent (a script that
// cannot be loaded, ctx ending).
func (q *Queue) scheduleLayout(ctx context.Context, timers []NewTimer, tp string) ([]ScheduleResult, []error, error) {
	if len(timers) == 0 {
		return nil, nil, nil
	}
	l, err := q.layout(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Group by shard, keeping the batch's order within each shard, so a
	// repeated ID is created by its first occurrence. One script call per
	// shard (per chunk); the calls go out in pipelines, several in flight
	// (runInFlight), and a Cluster client sends one pipeline per node.
	byShard := make([][]int, len(l.spaces))
	for i, t := range timers {
		k := l.shardOf(t.ID)
		byShard[k] = append(byShard[k], i)
	}
	if err := q.checkEndpoints(ctx, l, byShard, timers); err != nil {
		return nil, nil, err
	}
	for i, t := range timers {
		if t.URL != "" {
			if err := q.checkTimerURLs(ctx, fmt.Sprintf("timer %q", t.ID)); err != nil {
				return nil, nil, errorf("batch item %d: %w", i, err)
			}
			break
		}
	}
	quotas, err := q.quotas(ctx)
	if err != nil {
		return nil, nil, err
	}
	pending := shardQuota(quotas.Pending, len(l.spaces))
	// A shard's part of a batch of up to MaxBatch timers is one script
	// call, so that the pending quota refuses it whole; a larger part is
	// cut into chunks, each checked on its own.
	size := scheduleChunk
	if len(timers) <= MaxBatch {
		size = MaxBatch
	}
	// A shard's chunks may run at once on several connections
	// (runInFlight), so an ID repeated across them would be created by
	// whichever ran first: such a repeat is left out, and takes its first
	// occurrence's result.
	var repeats [][2]int // {index, index of its first occurrence}
	for k, idx := range byShard {
		if len(idx) > size {
			byShard[k], repeats = firstOccurrences(timers, idx, repeats)
		}
	}
	var calls []call
	var order [][]int // timer indexes of each call
	for k, idx := range byShard {
		for start := 0; start < len(idx); start += size {
			chunk := idx[start:min(start+size, len(idx))]
			args := make([]any, 0, 3+5*len(chunk))
			args = append(args, l.spaces[k].Wake(), tp, pending)
			for _, i := range chunk {
				t := timers[i]
				args = append(args, t.ID, t.dueArg(), t.Payload, t.deliveryArg(), t.metaArg())
			}
			calls = append(calls, call{shard: k, args: args})
			order = append(order, chunk)
		}
	}
	var replies []any
	var callErrs []error // each call's own
	if l.replicas > 0 {
		replies, callErrs = q.scheduleWait(ctx, l, calls)
	} else {
		replies, callErrs, err = q.runInFlight(ctx, l, lua.Schedule, calls, func(i int) int { return len(order[i]) })
		if err != nil {
			return nil, nil, scheduleError(err, timers)
		}
	}
	// Any call whose reply was lost makes the batch's outcome unknown,
	// even when an earlier call has a definite error.
	for _, e := range callErrs {
		if e != nil && (err == nil || mayHaveRun(e)) {
			err = e
		}
	}
	if err != nil {
		err = scheduleError(err, timers)
	}
	out := make([]ScheduleResult, len(timers))
	errs := make([]error, len(timers))
	for c, reply := range replies {
		if e := callErrs[c]; e != nil {
			e = scheduleError(e, timers)
			for _, i := range order[c] {
				errs[i] = e
			}
			continue
		}
		if e := decodeScheduleReply(reply, timers, order[c], out, errs); e != nil {
			for _, i := range order[c] {
				errs[i] = e
			}
		}
		// Without a call's error, the batch's is the first timer's whose
		// reply or record did not read.
		for _, i := range order[c] {
			if err == nil && errs[i] != nil {
				err = errs[i]
			}
		}
	}
	for _, r := range repeats {
		t := out[r[1]].Timer
		t.Payload = append([]byte{}, t.Payload...)
		out[r[0]] = ScheduleResult{Timer: t}
		errs[r[0]] = errs[r[1]]
	}
	if err != nil {
		return out, errs, err
	}
	return out, nil, nil
}

// scheduleError is the batch's error for the error err of a script call
// of timers.
func scheduleError(err error, timers []NewTimer) error {
	if mayHaveRun(err) || errors.Is(err, ErrNotReplicated) {
		return errorf("%w: schedule: %w", ErrOutcomeUnknown, err)
	}
	if fe := itemError(err, timers); fe != nil {
		return fe
	}
	return errorf("schedule: %w", err)
}

// itemError is the *FieldError for a script's refusal of one timer's
// field (timerFieldError), naming the timer's item in timers as
// ScheduleBatch's validation does; nil for any other error.
func itemError(err error, timers []NewTimer) error {
	var tf *timerFieldError
	if !errors.As(err, &tf) {
		return nil
	}
	// The first occurrence of the ID is the one the script created, and
	// refused.
	i := slices.IndexFunc(timers, func(t NewTimer) bool { return t.ID == tf.id })
	fe := &FieldError{Item: max(i, 0), Field: tf.field, Err: tf.err}
	if len(timers) == 1 {
		return fe
	}
	return errorf("batch item %d: %w", fe.Item, fe)
}

// firstOccurrences returns the indexes idx of timers whose ID no earlier
// index of idx has, and appends each other to repeats with the index of
// its ID's first occurrence.
func firstOccurrences(timers []NewTimer, idx []int, repeats [][2]int) ([]int, [][2]int) {
	first := make(map[string]int, len(idx))
	keep := idx[:0:0]
	for _, i := range idx {
		if f, ok := first[timers[i].ID]; ok {
			repeats = append(repeats, [2]int{i, f})
			continue
		}
		first[timers[i].ID] = i
		keep = append(keep, i)
	}
	return keep, repeats
}

// decodeScheduleReply fills in out[i] for each timer index i of one
// schedule.lua call from its reply: {now_ms, flags, extra...}, one flag
// byte per timer ('1' created with the due time sent, '2' created with the
// due time that is the next extra, '0' existing, with its record as the
// next extra). A created timer's record is what the client sent, so the
// script does not send it back. An existing timer whose record or meta
// does not read gets the error in errs[i], and the others their results:
// the call has written them. It returns an error for a reply it cannot
// read.
func decodeScheduleReply(reply any, timers []NewTimer, idx []int, out []ScheduleResult, errs []error) error {
	r, err := replyStrings(reply)
	if err != nil || len(r) < 2 || len(r[1]) != len(idx) || !isMillis(r[0]) {
		return errorf("schedule: unexpected reply %v", reply)
	}
	now := fromMillis(atoi(r[0]))
	extra := r[2:]
	next := func() (string, bool) {
		if len(extra) == 0 {
			return "", false
		}
		e := extra[0]
		extra = extra[1:]
		return e, true
	}
	for j, i := range idx {
		t := timers[i]
		flag := r[1][j]
		withMeta := flag >= 'a'
		if withMeta {
			flag = '0' + flag - 'a'
		}
		switch flag {
		case '1', '2':
			due := parseScore(dueScore(t.Due))
			if flag == '2' {
				e, ok := next()
				if !ok || !isDueScore(e) {
					return errorf("schedule: unexpected reply %v", reply)
				}
				due = parseScore(e)
			}
			out[i] = ScheduleResult{Created: true, Timer: Timer{ID: t.ID, State: StateScheduled, Due: due,
				CreatedAt: now, Payload: append([]byte{}, t.Payload...)}}
		case '0':
			e, ok := next()
			if !ok {
				return errorf("schedule: unexpected reply %v", reply)
			}
			rec, err := decodeRecord(t.ID, e)
			if err != nil {
				errs[i] = err
			}
			out[i] = ScheduleResult{Timer: rec}
		default:
			return errorf("schedule: unexpected reply %v", reply)
		}
		if withMeta {
			e, ok := next()
			if !ok {
				return errorf("schedule: unexpected reply %v", reply)
			}
			tm, err := out[i].Timer.withMeta(e)
			if err != nil && errs[i] == nil {
				errs[i] = err
			}
			out[i].Timer = tm
		}
	}
	if len(extra) != 0 {
		return errorf("schedule: unexpected reply %v", reply)
	}
	return nil
}

// ScheduleIn is Schedule with a due time d after the Redis server's clock,
// read inside the script that creates the timer, so the client's clock plays
// no part: a client whose clock is a minute slow still gets a timer due d
// from now. The due time is rounded up to the microsecond; d may be 0 (due
// at once) but not negative. As with Schedule, retrying with the same ID
// is safe, and is what to do on ErrOutcomeUnknown: a timer the lost call
// wrote keeps its due time and comes back with Created false.
func (q *Queue) ScheduleIn(ctx context.Context, id string, d time.Duration, payload []byte) (ScheduleResult, error) {
	res, err := q.ScheduleBatch(ctx, []NewTimer{NewTimerIn(id, d, payload)})
	if err != nil {
		return ScheduleResult{}, err
	}
	return res[0], nil
}

// Restore writes timers as they were exported from another namespace (or
// Redis), with their states and times: a scheduled timer is scheduled at its
// due time, and a fired or cancelled one is written settled, with its fired
// or cancelled time, so it never fires again. It is kept for the queue's
// Retention counted from the time it settled, as in its old namespace.
//
// Restore adds no fire-stream entry and publishes no wakeup for a settled
// timer: it fired (or was cancelled) where it came from, and the consumers of
// this namespace must not see it again. Like Schedule it is idempotent by ID:
// an ID that exists in any state is left unchanged and its result has
// Created false, as has a repeat of an ID within timers; such a result is
// the timer as it is, with the owner, labels, epoch and deadline it has.
//
// Each call is all or nothing per shard: at most MaxBatch timers, checked
// before any write, in one script per shard (one pipeline). CreatedAt, FiredAt and CancelledAt are kept to the
// millisecond; Due is rounded up to it.
//
// A timer whose ID has an occurrence's form, "<schedule ID>@<Unix ms>", is
// restored only while that schedule exists, checked in the same script;
// otherwise the shard's part fails with an error wrapping ErrOccurrenceID
// and writes nothing. An export's occurrences come with their schedule:
// restore them with RecurringTimers.RestoreWith.
func (q *Queue) Restore(ctx context.Context, timers []Timer) ([]ScheduleResult, error) {
	return q.restore(ctx, timers, "")
}

// restore is Restore, also taking occurrences of the schedule allowed
// ("" for none) while it does not exist yet.
func (q *Queue) restore(ctx context.Context, timers []Timer, allowed string) ([]ScheduleResult, error) {
	if len(timers) > MaxBatch {
		return nil, fmt.Errorf("%w: %d timers to restore, over the limit of %d a call; restore them in batches",
			ErrInvalidOptions, len(timers), MaxBatch)
	}
	l, err := q.layout(ctx)
	if err != nil {
		return nil, err
	}
	// One script call per shard, in one pipeline: each shard's part is all
	// or nothing; on a sharded namespace the parts are not one transaction.
	byShard := make([][]int, len(l.spaces))
	for i, t := range timers {
		if err := q.validateRestored(t); err != nil {
			return nil, errorf("restore item %d: %w", i, err)
		}
		k := l.shardOf(t.ID)
		byShard[k] = append(byShard[k], i)
	}
	if len(timers) == 0 {
		return nil, nil
	}
	quotas, err := q.quotas(ctx)
	if err != nil {
		return nil, err
	}
	pending := shardQuota(quotas.Pending, len(l.spaces))
	var calls []call
	var order [][]int
	for k, idx := range byShard {
		if len(idx) == 0 {
			continue
		}
		args := make([]any, 0, 4+7*len(idx))
		args = append(args, q.opts.retentionMillis(), l.spaces[k].Wake(), allowed, pending)
		for _, i := range idx {
			t := timers[i]
			settled := ""
			switch t.State {
			case StateFired:
				settled = strconv.FormatInt(millis(t.FiredAt), 10)
			case StateCancelled:
				settled = strconv.FormatInt(millis(t.CancelledAt), 10)
			}
			args = append(args, t.ID, t.State.code(), restoreDueArg(t), millis(t.CreatedAt), settled, t.Payload, t.meta().stored())
		}
		calls = append(calls, call{shard: k, args: args})
		order = append(order, idx)
	}
	replies, err := q.runMany(ctx, l, lua.Restore, calls)
	if err != nil {
		return nil, errorf("restore: %w", err)
	}
	out := make([]ScheduleResult, len(timers))
	for c, reply := range replies {
		// Triples: created, record, meta (as stored; that of the
		// existing timer when it was not created).
		r, err := replyStrings(reply)
		if err != nil || len(r) != 3*len(order[c]) {
			return nil, errorf("restore: unexpected reply %v", reply)
		}
		for j, i := range order[c] {
			t, err := decodeRecord(timers[i].ID, r[3*j+1])
			if err == nil {
				t, err = t.withMeta(r[3*j+2])
			}
			if err != nil {
				return nil, err
			}
			out[i] = ScheduleResult{Timer: t, Created: r[3*j] == "1"}
		}
	}
	if err := q.raiseEpochs(ctx, l, timers); err != nil {
		return out, err
	}
	return out, nil
}

// Get returns the timer id, or an error wrapping ErrNotFound.
func (q *Queue) Get(ctx context.Context, id string) (Timer, error) {
	if err := ValidateID(id); err != nil {
		return Timer{}, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return Timer{}, err
	}
	reply, err := q.run(ctx, l, lua.Get, l.shardOf(id), id)
	if errors.Is(err, redis.Nil) {
		return Timer{}, fmt.Errorf("%w: %q in namespace %q", ErrNotFound, id, q.opts.Namespace)
	}
	if err != nil {
		return Timer{}, errorf("get %q: %w", id, err)
	}
	rec, meta := reply, ""
	if pair, ok := reply.([]any); ok && len(pair) == 2 {
		rec, meta = pair[0], fmt.Sprint(pair[1])
	}
	s, _ := rec.(string)
	t, err := decodeRecord(id, s)
	if err != nil {
		return t, err
	}
	return t.withMeta(meta)
}

// Cancel cancels the scheduled timer id and wakes its waiters with
// ErrCancelled. Cancelling a cancelled timer is a no-op that returns nil;
// a fired timer gives ErrAlreadyFired and an unknown one ErrNotFound. The
// returned record is the timer as it now is.
func (q *Queue) Cancel(ctx context.Context, id string) (Timer, error) {
	if err := ValidateID(id); err != nil {
		return Timer{}, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return Timer{}, err
	}
	k := l.shardOf(id)
	t, status, err := q.runStatus(ctx, l, lua.Cancel, k, id, id, q.opts.retentionMillis(), l.spaces[k].TimerChannel(id))
	if err != nil {
		return Timer{}, errorf("cancel %q: %w", id, err)
	}
	switch status {
	case "ok", "cancelled":
		return t, nil
	case "fired":
		return t, fmt.Errorf("%w: cannot cancel %q, it fired at %s", ErrAlreadyFired, id, t.FiredAt.Format(time.RFC3339Nano))
	}
	return t, q.statusError(status, id)
}

// Reschedule moves the scheduled timer id to fire at due. It gives
// ErrAlreadyFired, ErrCancelled or ErrNotFound when the timer is not
// scheduled, and returns the timer as it now is. A due time between two
// milliseconds is rounded up to the later one.
func (q *Queue) Reschedule(ctx context.Context, id string, due time.Time) (Timer, error) {
	if err := ValidateID(id); err != nil {
		return Timer{}, err
	}
	if err := ValidateDue(due); err != nil {
		return Timer{}, errorf("timer %q: %w", id, err)
	}
	return q.reschedule(ctx, id, dueScore(due))
}

// RescheduleIn is Reschedule to d after the Redis server's clock, read
// inside the script, rounded up to the microsecond (see ScheduleIn).
func (q *Queue) RescheduleIn(ctx context.Context, id string, d time.Duration) (Timer, error) {
	if err := ValidateID(id); err != nil {
		return Timer{}, err
	}
	if err := validateIn(d); err != nil {
		return Timer{}, errorf("timer %q: %w", id, err)
	}
	return q.reschedule(ctx, id, relativeArg(d))
}

// FireNow makes the scheduled timer id due at the Redis server's current
// time, so the next claim fires it. Errors are those of Reschedule.
func (q *Queue) FireNow(ctx context.Context, id string) (Timer, error) {
	if err := ValidateID(id); err != nil {
		return Timer{}, err
	}
	return q.reschedule(ctx, id, "now")
}

func (q *Queue) reschedule(ctx context.Context, id string, due any) (Timer, error) {
	l, err := q.layout(ctx)
	if err != nil {
		return Timer{}, err
	}
	k := l.shardOf(id)
	t, status, err := q.runStatus(ctx, l, lua.Reschedule, k, id, id, due, l.spaces[k].Wake())
	if err != nil {
		return Timer{}, errorf("reschedule %q: %w", id, err)
	}
	if status == "ok" {
		return t, nil
	}
	return t, q.statusError(status, id)
}

// statusError turns a script's status word into the matching sentinel.
func (q *Queue) statusError(status, id string) error {
	switch status {
	case "fired":
		return fmt.Errorf("%w: %q has fired; schedule a new timer with another ID", ErrAlreadyFired, id)
	case "cancelled":
		return fmt.Errorf("%w: %q was cancelled; schedule a new timer with another ID", ErrCancelled, id)
	case "notfound":
		return fmt.Errorf("%w: %q in namespace %q", ErrNotFound, id, q.opts.Namespace)
	}
	return errorf("%q: unexpected script status %q", id, status)
}

// runStatus runs a script replying {status, record}.
func (q *Queue) runStatus(ctx context.Context, l *layout, s *lua.Script, shard int, id string, args ...any) (Timer, string, error) {
	reply, err := q.run(ctx, l, s, shard, args...)
	if err != nil {
		return Timer{}, "", err
	}
	r, err := replyStrings(reply)
	if err != nil || len(r) != 2 {
		return Timer{}, "", fmt.Errorf("unexpected reply %v", reply)
	}
	if r[1] == "" {
		return Timer{}, r[0], nil
	}
	t, err := decodeRecord(id, r[1])
	return t, r[0], err
}

// call is one script call on one shard.
type call struct {
	shard int
	args  []any
	// keys, when set, replaces the table's keys for the shard: for a
	// script whose keys depend on a consumer group (lua.Overlap).
	keys []string
}

func (c call) keysFor(l *layout, s *lua.Script) []string {
	if c.keys != nil {
		return c.keys
	}
	return l.keysOf(s, c.shard)
}

// run runs one script over one shard's keys, retrying for a few seconds
// while the shard's slot migrates (see migrating).
func (q *Queue) run(ctx context.Context, l *layout, s *lua.Script, shard int, args ...any) (any, error) {
	return q.runTries(ctx, l, s, shard, migrationAttempts, args...)
}

// runTries is run with at most tries attempts.
func (q *Queue) runTries(ctx context.Context, l *layout, s *lua.Script, shard, tries int, args ...any) (any, error) {
	return q.runKeysTries(ctx, l, s, shard, "", tries, args...)
}

// runKeysTries is runTries with the keys the table gives for group (see
// layout.keysFor). A shard found upgraded to layout 2 runs again at once,
// as layout 2 (layout.upgraded).
func (q *Queue) runKeysTries(ctx context.Context, l *layout, s *lua.Script, shard int, group string, tries int, args ...any) (any, error) {
	return q.runCallTries(ctx, l, s, call{shard: shard, args: args}, group, tries)
}

// runCallTries runs c, with its own keys if it has them, else the keys
// the table gives for group.
func (q *Queue) runCallTries(ctx context.Context, l *layout, s *lua.Script, c call, group string, tries int) (any, error) {
	shard, args := c.shard, c.args
	for attempt := 1; ; attempt++ {
		sent, keys := l.layoutOf(shard), c.keys
		if keys == nil {
			keys = l.keysFor(s, shard, group)
		}
		v, err := q.runScript(ctx, q.rdb, l.script(s, shard), keys, args...).Result()
		if err == nil {
			return v, nil
		}
		if l.upgraded(shard, sent, err) {
			continue
		}
		if !migrating(err) || attempt >= tries || !sleep.For(ctx, migrationBackoff(attempt)) {
			return nil, shardErr(l, shard, q.redisError(err))
		}
	}
}

// migrationAttempts bounds the tries of a script whose shard's slot is
// migrating: with migrationBackoff, about 4 s in all.
const migrationAttempts = 10

func migrationBackoff(attempt int) time.Duration {
	return min(25*time.Millisecond<<min(attempt-1, 10), 500*time.Millisecond)
}

// migrating reports whether err is Redis Cluster refusing a script because
// its slot is moving or has moved (TRYAGAIN while the slot's keys are split
// between two nodes; ASK or MOVED once go-redis has used up its own
// redirects; CLUSTERDOWN while the slot has no owner). The script did not
// run, so it is safe to run again.
func migrating(err error) bool {
	for _, code := range []string{"TRYAGAIN", "ASK", "MOVED", "CLUSTERDOWN"} {
		if hasRedisCode(err, code) {
			return true
		}
	}
	return false
}

// runMany runs one script once per call, in one pipeline (which a Cluster
// client splits into one pipeline per node), and returns the replies in
// order, or the first call's error. Scripts in a pipeline get no EVAL
// fallback from go-redis, so on NOSCRIPT (a restarted or failed-over Redis)
// it loads the script (on every master) and runs the calls that failed
// again; so it does, after a backoff, for calls refused because their
// shard's slot is migrating. Calls that succeeded are never repeated.
func (q *Queue) runMany(ctx context.Context, l *layout, s *lua.Script, calls []call) ([]any, error) {
	out, errs, err := q.runEach(ctx, l, s, calls)
	if err != nil {
		return nil, err
	}
	for _, e := range errs {
		if e != nil {
			return nil, e
		}
	}
	return out, nil
}

// Bulk schedules keep several pipelines of script calls in flight: while
// Redis runs one, the client encodes the next and decodes the last, so one
// client keeps a Redis core busy instead of taking turns with it.
const (
	// inFlightItems is how many items (timers) a pipeline gathers before
	// the next call starts a pipeline of its own; a batch of at most this
	// many goes out in one pipeline, as every batch did before.
	inFlightItems = 1000
	// inFlightMax is how many pipelines one runInFlight keeps in flight,
	// each on a connection of its own from the client's pool.
	inFlightMax = 4
)

// runInFlight is runEach with the calls split into pipelines of about
// inFlightItems items (items(i) is call i's), up to inFlightMax of them in
// flight at once, in no particular order: the calls must not depend on
// each other's order.
func (q *Queue) runInFlight(ctx context.Context, l *layout, s *lua.Script, calls []call, items func(i int) int) (out []any, errs []error, err error) {
	var groups [][2]int // {start, end} of each pipeline's calls
	for start := 0; start < len(calls); {
		end, n := start, 0
		for ; end < len(calls) && n < inFlightItems; end++ {
			n += items(end)
		}
		groups = append(groups, [2]int{start, end})
		start = end
	}
	if len(groups) <= 1 {
		return q.runEach(ctx, l, s, calls)
	}
	out, errs = make([]any, len(calls)), make([]error, len(calls))
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, inFlightMax)
	for _, g := range groups {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			o, e, gerr := q.runEach(ctx, l, s, calls[g[0]:g[1]])
			if gerr != nil {
				mu.Lock()
				err = cmp.Or(err, gerr)
				mu.Unlock()
				return
			}
			copy(out[g[0]:g[1]], o)
			copy(errs[g[0]:g[1]], e)
		})
	}
	wg.Wait()
	if err != nil {
		return nil, nil, err
	}
	return out, errs, nil
}

// runEach is runMany keeping each call's own error: errs[i] is call i's,
// naming its shard (nil when it succeeded), so a read that visits every shard can report the
// shards that answered when one did not. err is a failure of the whole
// call: a script that cannot be loaded, or ctx ending.
func (q *Queue) runEach(ctx context.Context, l *layout, s *lua.Script, calls []call) (out []any, errs []error, err error) {
	out, errs = make([]any, len(calls)), make([]error, len(calls))
	if len(calls) == 1 {
		out[0], errs[0] = q.runCallTries(ctx, l, s, calls[0], "", migrationAttempts)
		return out, errs, nil
	}
	todo := make([]int, len(calls))
	for i := range todo {
		todo[i] = i
	}
	loaded, fn := false, q.functions()
	for attempt := 1; ; attempt++ {
		cmds, sent := make([]*redis.Cmd, len(todo)), make([]int, len(todo))
		_, _ = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j, i := range todo {
				sent[j] = l.layoutOf(calls[i].shard)
				cmds[j] = q.scriptCmd(ctx, p, l.script(s, calls[i].shard), fn, calls[i].keysFor(l, s), calls[i].args...)
			}
			return nil
		})
		var again []int
		noScript, moving, eval := false, false, false
		for j, i := range todo {
			err := cmds[j].Err()
			retry := q.retryable(err, fn)
			switch {
			case err == nil:
				out[i] = cmds[j].Val()
				continue
			case l.upgraded(calls[i].shard, sent[j], err):
				// Runs again, as layout 2.
			case retry == retryLoad && !loaded:
				noScript = true
			case retry == retryEval:
				eval = true
			case migrating(err) && attempt < migrationAttempts:
				moving = true
			default:
				errs[i] = shardErr(l, calls[i].shard, q.redisError(err))
				continue
			}
			again = append(again, i)
		}
		if len(again) == 0 {
			return out, errs, nil
		}
		if eval {
			// The function did not run; the same calls run as scripts.
			fn = false
		}
		if noScript {
			for _, built := range s.Layouts() {
				if err := q.loadScript(ctx, q.rdb, l.scriptAt(built, 1)); err != nil {
					return nil, nil, q.redisError(err)
				}
			}
			loaded, fn = true, fn && q.functions()
		}
		if moving && !sleep.For(ctx, migrationBackoff(attempt)) {
			return nil, nil, shardErr(l, calls[again[0]].shard, ctx.Err())
		}
		todo = again
	}
}

// redisError adds what to do to the errors a user can meet from Redis, and
// wraps the sentinel that names the cause. Redis 7 keeps a refused
// command's error code when a script fails, so the code is found in the
// message whether the command ran alone or inside a script.
func (q *Queue) redisError(err error) error {
	switch {
	case hasRedisCode(err, "TIMERQ_LAYOUT"):
		return q.layoutError(err)
	case hasRedisCode(err, "WRONGTYPE"):
		return fmt.Errorf("%w: %w; another program writes under timerq:{%s}:*: use another namespace, or remove those keys (but not one holding a string that starts \"timerq-layout\": a newer timerq left it when it upgraded the namespace, and this binary must be upgraded instead)",
			ErrWrongType, err, q.opts.Namespace)
	case hasRedisCode(err, "NOPERM") || isScriptACLError(err):
		return fmt.Errorf("%w: %w%s", ErrPermission, err, q.permissionHint(err.Error()))
	case hasRedisCode(err, "CLUSTERDOWN"):
		return fmt.Errorf("%w: %w; retry once Redis has promoted a replica (CLUSTER INFO shows cluster_state:ok)", ErrClusterDown, err)
	case migrating(err):
		return fmt.Errorf("%w: %w; retry once the move ends (other shards are unaffected)", ErrSlotMigrating, err)
	case isDialError(err):
		return fmt.Errorf("%w: %w; is the server down? On a Cluster, retry once the failed master's replica is promoted", ErrUnreachable, err)
	case hasRedisCode(err, "OOM"):
		// Not "cancel timers": a cancel writes, and is refused too. The
		// binaries and the API show this hint, renaming Options.Retention.
		return fmt.Errorf("%w: %w; Redis is at maxmemory with the noeviction policy: raise maxmemory, or lower Options.Retention so the workers' purges, which still run, free more (nothing was written, and writes stay refused until memory is freed)",
			ErrOutOfMemory, err)
	case hasRedisCode(err, "TIMERQ_MALFORMED"):
		return fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	case hasRedisCode(err, "TIMERQ_EPOCH"):
		return staleEpoch(strings.TrimPrefix(err.Error(), "TIMERQ_EPOCH "))
	case hasRedisCode(err, "TIMERQ_FIREBY"):
		return fireByRefused(strings.TrimPrefix(err.Error(), "TIMERQ_FIREBY "))
	case hasRedisCode(err, "TIMERQ_NOENDPOINT"):
		return q.noEndpoint(strings.TrimPrefix(err.Error(), "TIMERQ_NOENDPOINT "))
	case hasRedisCode(err, "TIMERQ_RELAYOUT"):
		return q.relayout(strings.TrimPrefix(err.Error(), "TIMERQ_RELAYOUT "))
	case hasRedisCode(err, "TIMERQ_QUOTA"):
		return q.quotaError(strings.TrimPrefix(err.Error(), "TIMERQ_QUOTA "))
	case hasRedisCode(err, "TIMERQ_OCCURRENCE"):
		// The script's words without its code: the sentinel names the rule.
		return fmt.Errorf("%w: %s; create the schedule first, or restore it with its occurrences (Recurring().RestoreWith)",
			ErrOccurrenceID, strings.TrimPrefix(err.Error(), "TIMERQ_OCCURRENCE "))
	}
	return err
}

// layoutError is the error for a script's TIMERQ_LAYOUT reply
// ("TIMERQ_LAYOUT <layout> <key>"): a newer timerq upgraded the shard's
// layout and left its marker in key (keyspace.LayoutMarker).
func (q *Queue) layoutError(err error) error {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, "TIMERQ_LAYOUT "); ok {
		msg = rest
	}
	layout, key, _ := strings.Cut(msg, " ")
	return fmt.Errorf("%w: %s holds the marker of layout %s, which a newer timerq wrote when it upgraded namespace %q; this binary knows layout %d and changed nothing: upgrade it to a timerq that knows layout %s (every process that uses the namespace), and do not delete the marker",
		ErrLayout, key, layout, q.opts.Namespace, keyspace.Layout, layout)
}

// permissionHint says which ACL rule grants what Redis refused. The
// scripts' own refusals (scripts/lua/includes/refusal.lua) already name the right and the rule;
// Redis's words are mapped here for the rest: a command refused outside a
// script names itself, a key or channel only its kind.
func (q *Queue) permissionHint(msg string) string {
	const more = " (docs/security.md lists the rights of each role)"
	rule := func(sigil string) string {
		r := sigil + "timerq:{" + q.opts.Namespace + "}:*"
		if len(q.known().spaces) > 1 {
			// A sharded namespace's keys and channels are timerq:{NS:k}:...
			// besides timerq:{NS}:... (docs/operations.md, "ACL rules").
			r += " " + sigil + "timerq:{" + q.opts.Namespace + ":*}:*"
		}
		return r
	}
	if strings.Contains(msg, "NOPERM timerq:") {
		return more
	}
	// A refused command first: Valkey's wording names the user ("User U
	// has no permissions to run the 'x' command"), whose name may contain
	// "key" or "channel".
	if _, rest, ok := strings.Cut(msg, "to run the '"); ok {
		if cmd, _, ok := strings.Cut(rest, "'"); ok {
			return "; grant it with the ACL rule +" + strings.ToLower(cmd) + more
		}
	}
	switch {
	case strings.Contains(msg, "can't run this command"):
		// Redis names the script and line: the table of scripts gives the
		// command there (aclright).
		if r := aclright.Missing(msg, q.opts.Namespace); strings.HasPrefix(r, "+") {
			return "; grant it with the ACL rule " + r + more
		}
	case strings.Contains(msg, "channel"):
		return "; grant the namespace's channels with the ACL rule " + rule("&") + more
	case strings.Contains(msg, "key"):
		return "; grant the namespace's keys with the ACL rule " + rule("~") + more
	}
	return "; grant the commands timerq runs" + more
}

// Wordings of an ACL refusal of a command run inside a script, which both
// servers report as ERR, not NOPERM, naming what was refused (a command,
// a key or a channel) in their own words.
const (
	// Redis 7.0: "The user executing the script can't run this command or
	// subcommand", "... can't access at least one of the keys mentioned in
	// the command arguments", "... can't publish to the channel mentioned
	// in the command".
	redisScriptACL = "The user executing the script can't"
	// Valkey 8: "ACL failure in script: User U has no permissions to run
	// the 'x' command", "ACL failure in script: No permissions to access a
	// key", "ACL failure in script: No permissions to access a channel".
	valkeyScriptACL = "ACL failure in script: "
)

// isScriptACLError reports whether err is an ACL refusal of a command run
// inside a script, in Redis's words or Valkey's.
func isScriptACLError(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.Contains(msg, redisScriptACL) || strings.Contains(msg, valkeyScriptACL)
}

// hasRedisCode reports whether err is a Redis error reply carrying code,
// either as its prefix or inside a script's error message.
func hasRedisCode(err error, code string) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, code+" ") || strings.Contains(msg, " "+code+" ") || strings.Contains(msg, "-"+code+" ")
}

// replyStrings flattens a script's array reply into strings.
func replyStrings(v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("reply is %T, not an array", v)
	}
	out := make([]string, len(arr))
	for i, e := range arr {
		switch e := e.(type) {
		case string:
			out[i] = e
		case int64:
			out[i] = strconv.FormatInt(e, 10)
		default:
			return nil, fmt.Errorf("reply element %d is %T", i, e)
		}
	}
	return out, nil
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
