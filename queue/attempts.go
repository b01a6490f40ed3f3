package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/scripts/lua"
)

// AttemptLogLen is how many attempts a delivering timer's attempt log
// keeps: the newest ones.
const AttemptLogLen = 10

// ErrAttemptLog means a delivery was settled but its attempt could not be
// added to the timer's attempt log (a Redis user without RPUSH, LTRIM or
// PEXPIRE on the namespace's keys, for one). The settlement stands.
var ErrAttemptLog = errors.New("timerq: the attempt log was not written")

// DeliveryAttempt is one attempt to deliver a fire to its endpoint, as a
// dispatcher logs it (ReleaseOptions.Log, AckAttempt) and
// Deliveries.Attempts returns it.
type DeliveryAttempt struct {
	// TimerID is the timer whose fire was delivered.
	TimerID string `json:"-"`
	// Attempt is the attempt's number for this fire, from 1.
	Attempt int `json:"attempt"`
	// Due is the fire's due time.
	Due time.Time `json:"due"`
	// StreamID is the fire's entry in its shard's fire stream
	// (Event.StreamID): the attempts of one fire share it, and another
	// fire of the timer (a reschedule, the same fire requeued from the
	// dead letters) has another, so its attempts count afresh.
	StreamID string `json:"stream_id"`
	// At is when the request was sent; Latency how long until the answer
	// was read or the attempt failed.
	At      time.Time     `json:"at"`
	Latency time.Duration `json:"latency"`
	// Status is the answer's HTTP status, 0 if there was none.
	Status int `json:"status,omitempty"`
	// Outcome is "delivered", "retry" or "dead_letter" (deliver.Outcome).
	Outcome string `json:"outcome"`
	// Reason says why, in the delivery engine's words (deliver.Reason),
	// such as "server_error" or "exhausted"; "" when delivered.
	Reason string `json:"reason,omitempty"`
	// Error is an excerpt of what went wrong: the transport error or the
	// start of the answer's body.
	Error string `json:"error,omitempty"`
	// RetryIn is the wait before the next attempt, for a retry.
	RetryIn time.Duration `json:"retry_in,omitempty"`
}

// storedAttempt is an attempt as the list keeps it: times in milliseconds,
// latency in microseconds.
type storedAttempt struct {
	N       int    `json:"n"`
	Due     int64  `json:"due"`
	SID     string `json:"sid,omitempty"`
	At      int64  `json:"at"`
	US      int64  `json:"us"`
	Status  int    `json:"s,omitempty"`
	Outcome string `json:"o"`
	Reason  string `json:"r,omitempty"`
	Error   string `json:"e,omitempty"`
	RetryMS int64  `json:"rt,omitempty"`
}

func encodeAttempt(a DeliveryAttempt) string {
	b, _ := json.Marshal(storedAttempt{N: a.Attempt, Due: a.Due.UnixMilli(), SID: a.StreamID, At: a.At.UnixMilli(), US: a.Latency.Microseconds(),
		Status: a.Status, Outcome: a.Outcome, Reason: a.Reason, Error: a.Error, RetryMS: a.RetryIn.Milliseconds()})
	return string(b)
}

func decodeAttempt(id, v string) (DeliveryAttempt, error) {
	var s storedAttempt
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return DeliveryAttempt{}, fmt.Errorf("%w: an attempt of timer %q is not the JSON timerq writes (%v)", ErrMalformedRecord, id, err)
	}
	return DeliveryAttempt{TimerID: id, Attempt: s.N, Due: fromMillis(s.Due), StreamID: s.SID, At: fromMillis(s.At),
		Latency: time.Duration(s.US) * time.Microsecond, Status: s.Status, Outcome: s.Outcome, Reason: s.Reason,
		Error: s.Error, RetryIn: time.Duration(s.RetryMS) * time.Millisecond}, nil
}

// logAttempt queues on p the commands that append a to its timer's
// attempt log in shard k: RPUSH, LTRIM to AttemptLogLen, and an expiry of
// the namespace's retention (none when it keeps records forever).
func (q *Queue) logAttempt(ctx context.Context, p redis.Pipeliner, l *layout, k int, a DeliveryAttempt) []redis.Cmder {
	key := l.spaces[k].Attempts(a.TimerID)
	cmds := []redis.Cmder{p.RPush(ctx, key, encodeAttempt(a)), p.LTrim(ctx, key, -AttemptLogLen, -1)}
	if ms := q.opts.retentionMillis(); ms > 0 {
		cmds = append(cmds, p.PExpire(ctx, key, time.Duration(ms)*time.Millisecond))
	}
	return cmds
}

// Attempts returns the attempt log of timer id, oldest first: the
// last AttemptLogLen attempts to deliver its fires to its endpoint, kept
// for the namespace's retention after the last one. A timer that never
// delivered has none. One round trip.
func (d Deliveries) Attempts(ctx context.Context, id string) ([]DeliveryAttempt, error) {
	q := d.q
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return nil, err
	}
	vs, err := q.rdb.LRange(ctx, l.spaces[l.shardOf(id)].Attempts(id), 0, -1).Result()
	if err != nil {
		return nil, errorf("delivery attempts of %s: %w", id, q.redisError(err))
	}
	out := make([]DeliveryAttempt, 0, len(vs))
	for _, v := range vs {
		a, err := decodeAttempt(id, v)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// LastAttempt returns the newest entry of timer id's attempt log,
// and false if it has none: a dispatcher counts a fire's attempts from it.
// One round trip.
func (d Deliveries) LastAttempt(ctx context.Context, id string) (DeliveryAttempt, bool, error) {
	q := d.q
	if err := ValidateID(id); err != nil {
		return DeliveryAttempt{}, false, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return DeliveryAttempt{}, false, err
	}
	v, err := q.rdb.LIndex(ctx, l.spaces[l.shardOf(id)].Attempts(id), -1).Result()
	if errors.Is(err, redis.Nil) {
		return DeliveryAttempt{}, false, nil
	}
	if err != nil {
		return DeliveryAttempt{}, false, errorf("last delivery attempt of %s: %w", id, q.redisError(err))
	}
	a, err := decodeAttempt(id, v)
	return a, err == nil, err
}

// LogAttempts appends each attempt to the attempt log of its timer
// (a.TimerID), settling nothing: for what a dispatcher did not attempt
// because Lease dead-lettered the fire first (LeaseOptions.OnDeadLetter).
// One round trip (one pipeline, split by node on a Cluster), however many
// there are. An error wraps ErrAttemptLog and names the first attempt
// that was not written.
func (d Deliveries) LogAttempts(ctx context.Context, attempts []DeliveryAttempt) error {
	q := d.q
	if len(attempts) == 0 {
		return nil
	}
	for _, a := range attempts {
		if err := ValidateID(a.TimerID); err != nil {
			return err
		}
	}
	l, err := q.layout(ctx)
	if err != nil {
		return err
	}
	var cmds [][]redis.Cmder // per attempt
	_, _ = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, a := range attempts {
			cmds = append(cmds, q.logAttempt(ctx, p, l, l.shardOf(a.TimerID), a))
		}
		return nil
	})
	for i, cs := range cmds {
		for _, c := range cs {
			if err := c.Err(); err != nil {
				return errorf("%w: timer %s: %w", ErrAttemptLog, attempts[i].TimerID, q.redisError(err))
			}
		}
	}
	return nil
}

// AckAttempt acknowledges delivery id of group, as Ack does, and appends
// a to the attempt log of timer a.TimerID, in one round trip (one
// pipeline). acked is false if the delivery was not pending. A failed log
// write, after a good acknowledgement, gives an error wrapping
// ErrAttemptLog.
func (d Deliveries) AckAttempt(ctx context.Context, group, id string, a DeliveryAttempt) (acked bool, _ error) {
	q := d.q
	ok, errs := q.Deliveries().AckAttempts(ctx, group, []AttemptAck{{DeliveryID: id, Attempt: a}})
	return ok[0], errs[0]
}

// AttemptAck is one delivery for AckAttempts: its ID, as Lease handed it
// out, and the attempt that delivered it.
type AttemptAck struct {
	DeliveryID string
	Attempt    DeliveryAttempt
}

// AckAttempts is AckAttempt for many deliveries of group at once, in one
// round trip (one pipeline, split by node on a Cluster), however many
// there are: what a dispatcher settles while the previous round trip was
// under way goes in the next. acked[i] and errs[i] are what AckAttempt
// would return for acks[i]; an invalid group gives its error for every
// item.
func (d Deliveries) AckAttempts(ctx context.Context, group string, acks []AttemptAck) (acked []bool, errs []error) {
	q := d.q
	acked, errs = make([]bool, len(acks)), make([]error, len(acks))
	fail := func(err error) ([]bool, []error) {
		for i := range errs {
			errs[i] = err
		}
		return acked, errs
	}
	if err := ValidateConsumerName("group", group); err != nil {
		return fail(err)
	}
	l, err := q.layout(ctx)
	if err != nil {
		return fail(err)
	}
	refs := make([]DeliveryRef, len(acks))
	valid := make([]bool, len(acks))
	for i, a := range acks {
		if errs[i] = ValidateID(a.Attempt.TimerID); errs[i] != nil {
			continue
		}
		if refs[i], errs[i] = q.parseDeliveryIDIn(l, a.DeliveryID); errs[i] != nil {
			continue
		}
		valid[i] = true
	}
	xacks := make([]*redis.IntCmd, len(acks))
	logs := make([][]redis.Cmder, len(acks))
	_, _ = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, a := range acks {
			if !valid[i] {
				continue
			}
			xacks[i] = p.XAck(ctx, l.spaces[refs[i].Shard].Fires(), group, refs[i].StreamID)
			logs[i] = q.logAttempt(ctx, p, l, refs[i].Shard, a.Attempt)
		}
		return nil
	})
	for i, a := range acks {
		if !valid[i] {
			continue
		}
		if err := xacks[i].Err(); err != nil && !isNoGroup(err) {
			errs[i] = errorf("ack %s: %w", a.DeliveryID, q.redisError(err))
			continue
		}
		acked[i] = xacks[i].Val() > 0
		for _, c := range logs[i] {
			if err := c.Err(); err != nil {
				errs[i] = errorf("%w: timer %s: %w", ErrAttemptLog, a.Attempt.TimerID, q.redisError(err))
				break
			}
		}
	}
	// Free the flow slots of what was acknowledged (a second round trip,
	// only when some of them carry a flow key).
	var settled []DeliveryRef
	for i := range acks {
		if valid[i] && xacks[i].Err() == nil {
			settled = append(settled, refs[i])
		}
	}
	if err := q.flowDone(ctx, l, group, settled...); err != nil {
		for i := range acks {
			if valid[i] && xacks[i].Err() == nil && refs[i].Flow != "" && errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return acked, errs
}

// releaseLogged appends log to its timer's attempt log, then runs
// release.lua for delivery ref, in one pipeline. The log goes first: a
// pipeline is not atomic, and a release with a short retry delay lets
// another lease take the fire between the two, whose dispatcher would then
// read the log without this attempt and repeat its number (an extra
// request; seen on miniredis under load). When the script is not loaded
// yet, or the shard's slot is moving, it settles again the ordinary way
// (the log is written already).
func (q *Queue) releaseLogged(ctx context.Context, l *layout, group, id string, ref DeliveryRef, op string, d time.Duration, cause string,
	opts LeaseOptions, log DeliveryAttempt) ([]string, error) {
	args := []any{group, ref.StreamID, ref.Attempt, op, d.Milliseconds(), opts.Lease.Milliseconds(), opts.MaxAttempts, cause, q.opts.streamMaxLen(),
		ref.deadlineArg()}
	var ev *redis.Cmd
	fn := q.functions()
	cmds, _ := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		q.logAttempt(ctx, p, l, ref.Shard, log)
		ev = q.scriptCmd(ctx, p, l.script(lua.Release, ref.Shard), fn, l.keysOf(lua.Release, ref.Shard), args...)
		return nil
	})
	var logErr error
	for _, c := range cmds[:len(cmds)-1] {
		if err := c.Err(); err != nil {
			logErr = errorf("%w: timer %s: %w", ErrAttemptLog, log.TimerID, q.redisError(err))
			break
		}
	}
	reply, err := ev.Result()
	if err != nil {
		if q.retryable(err, fn) == retryNone && !migrating(err) {
			return nil, errorf("%s %s: %w", op, id, shardErr(l, ref.Shard, q.redisError(err)))
		}
		r, err := q.settle(ctx, l, group, id, op, d, cause, opts)
		if err != nil {
			return nil, err
		}
		return r, logErr
	}
	r, err := settleReply(reply, group, id, op)
	if err != nil {
		return nil, err
	}
	return r, logErr
}
