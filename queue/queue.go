package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/scripts/lua"
)

// Queue is a namespace of durable timers in Redis. It is safe for concurrent
// use. Create one with New and Close it when done; closing does not close the
// Redis client, which the caller owns.
type Queue struct {
	rdb  redis.UniversalClient
	opts Options
	keys []string // the seven keys every script takes; see scripts/lua/prelude.lua

	wakeChannel   string // pollers listen here for earlier due times
	timerChannels string // prefix of each timer's own wakeup channel

	mu     sync.Mutex
	hub    *hub // started by the first Wait
	closed bool
}

var (
	scheduleScript   = redis.NewScript(lua.Schedule)
	claimScript      = redis.NewScript(lua.Claim)
	cancelScript     = redis.NewScript(lua.Cancel)
	rescheduleScript = redis.NewScript(lua.Reschedule)
	purgeScript      = redis.NewScript(lua.Purge)
	statsScript      = redis.NewScript(lua.Stats)
	listScript       = redis.NewScript(lua.List)
	getScript        = redis.NewScript(lua.Get)
	checkScript      = redis.NewScript(lua.Check)
	restoreScript    = redis.NewScript(lua.Restore)
)

// New returns a Queue over rdb, which may be a standalone, Sentinel or
// Cluster client. It validates opts but does not contact Redis.
func New(rdb redis.UniversalClient, opts Options) (*Queue, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: pass a client from redis.NewClient, redis.NewUniversalClient or similar", ErrNilClient)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// One hash tag per namespace keeps every script inside one Cluster slot.
	prefix := "timerq:{" + opts.Namespace + "}:"
	return &Queue{
		rdb:  rdb,
		opts: opts,
		keys: []string{
			prefix + "due", prefix + "timers", prefix + "fired",
			prefix + "cancelled", prefix + "expire", prefix + "fires",
			prefix + "counters",
		},
		wakeChannel:   prefix + "wake",
		timerChannels: prefix + "t:",
	}, nil
}

// Namespace returns the queue's namespace.
func (q *Queue) Namespace() string { return q.opts.Namespace }

// Options returns the queue's options with defaults filled in.
func (q *Queue) Options() Options { return q.opts }

// Keys returns the Redis keys of the namespace, in the order the scripts
// take them: due, timers, fired, cancelled, expire, fires, counters.
func (q *Queue) Keys() []string { return append([]string(nil), q.keys...) }

// StreamKey returns the key of the fire stream, to which every claim appends
// one entry per fired timer with fields id, due, fired and payload.
func (q *Queue) StreamKey() string { return q.keys[5] }

// WakeChannel returns the pub/sub channel on which Schedule and Reschedule
// announce a due time earlier than any pending one (the message is that
// due time in Unix milliseconds), so that sleeping pollers wake early.
func (q *Queue) WakeChannel() string { return q.wakeChannel }

// TimerChannel returns the pub/sub channel on which a timer's firing
// ("fired") or cancellation ("cancelled") is announced.
func (q *Queue) TimerChannel(id string) string { return q.timerChannels + id }

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
func (q *Queue) Schedule(ctx context.Context, id string, due time.Time, payload []byte) (ScheduleResult, error) {
	// Validated here too, so that the error does not speak of a batch.
	if err := q.validateTimer(NewTimer{ID: id, Due: due, Payload: payload}); err != nil {
		return ScheduleResult{}, err
	}
	res, err := q.ScheduleBatch(ctx, []NewTimer{{ID: id, Due: due, Payload: payload}})
	if err != nil {
		return ScheduleResult{}, err
	}
	return res[0], nil
}

// scheduleChunk is how many timers go into one script call: large enough to
// amortise the call, small enough not to stall Redis for long.
const scheduleChunk = 500

// ScheduleBatch schedules many timers in one round trip and returns one
// result per timer, in order, each as Schedule would. It validates every
// timer first: if any is invalid it returns an error naming it and writes
// nothing. A repeated ID within the batch is created once; its later
// occurrences report Created false.
func (q *Queue) ScheduleBatch(ctx context.Context, timers []NewTimer) ([]ScheduleResult, error) {
	for i, t := range timers {
		if err := q.validateTimer(t); err != nil {
			return nil, fmt.Errorf("batch item %d: %w", i, err)
		}
	}
	if len(timers) == 0 {
		return nil, nil
	}
	var calls [][]any
	for start := 0; start < len(timers); start += scheduleChunk {
		chunk := timers[start:min(start+scheduleChunk, len(timers))]
		args := make([]any, 0, 1+3*len(chunk))
		args = append(args, q.wakeChannel)
		for _, t := range chunk {
			args = append(args, t.ID, t.dueArg(), t.Payload)
		}
		calls = append(calls, args)
	}
	replies, err := q.runMany(ctx, scheduleScript, calls)
	if err != nil {
		return nil, fmt.Errorf("timerq: schedule: %w", err)
	}
	out := make([]ScheduleResult, 0, len(timers))
	for _, reply := range replies {
		r, err := replyStrings(reply)
		if err != nil || len(r)%2 != 1 {
			return nil, fmt.Errorf("timerq: schedule: unexpected reply %v", reply)
		}
		for j := 1; j < len(r); j += 2 {
			id := timers[len(out)].ID
			t, err := decodeRecord(id, r[j+1])
			if err != nil {
				return nil, err
			}
			out = append(out, ScheduleResult{Timer: t, Created: r[j] == "1"})
		}
	}
	return out, nil
}

// ScheduleIn is Schedule with a due time d after the Redis server's clock,
// read inside the script that creates the timer, so the client's clock plays
// no part: a client whose clock is a minute slow still gets a timer due d
// from now. The due time is rounded up to the millisecond; d may be 0 (due
// at once) but not negative.
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
// Created false, as has a repeat of an ID within timers.
//
// Each call is all or nothing: at most MaxBatch timers, checked before any
// write, in one script. CreatedAt, FiredAt and CancelledAt are kept to the
// millisecond; Due is rounded up to it.
func (q *Queue) Restore(ctx context.Context, timers []Timer) ([]ScheduleResult, error) {
	if len(timers) > MaxBatch {
		return nil, fmt.Errorf("%w: %d timers to restore, over the limit of %d a call; restore them in batches",
			ErrInvalidOptions, len(timers), MaxBatch)
	}
	args := make([]any, 0, 2+6*len(timers))
	args = append(args, q.opts.retentionMillis(), q.wakeChannel)
	for i, t := range timers {
		if err := q.validateRestored(t); err != nil {
			return nil, fmt.Errorf("restore item %d: %w", i, err)
		}
		settled := ""
		switch t.State {
		case StateFired:
			settled = strconv.FormatInt(millis(t.FiredAt), 10)
		case StateCancelled:
			settled = strconv.FormatInt(millis(t.CancelledAt), 10)
		}
		args = append(args, t.ID, t.State.code(), dueMillis(t.Due), millis(t.CreatedAt), settled, t.Payload)
	}
	if len(timers) == 0 {
		return nil, nil
	}
	reply, err := q.run(ctx, restoreScript, args...)
	if err != nil {
		return nil, fmt.Errorf("timerq: restore: %w", err)
	}
	r, err := replyStrings(reply)
	if err != nil || len(r) != 2*len(timers) {
		return nil, fmt.Errorf("timerq: restore: unexpected reply %v", reply)
	}
	out := make([]ScheduleResult, len(timers))
	for i := range timers {
		t, err := decodeRecord(timers[i].ID, r[2*i+1])
		if err != nil {
			return nil, err
		}
		out[i] = ScheduleResult{Timer: t, Created: r[2*i] == "1"}
	}
	return out, nil
}

// Get returns the timer id, or an error wrapping ErrNotFound.
func (q *Queue) Get(ctx context.Context, id string) (Timer, error) {
	if err := ValidateID(id); err != nil {
		return Timer{}, err
	}
	reply, err := q.run(ctx, getScript, id)
	if errors.Is(err, redis.Nil) {
		return Timer{}, fmt.Errorf("%w: %q in namespace %q", ErrNotFound, id, q.opts.Namespace)
	}
	if err != nil {
		return Timer{}, fmt.Errorf("timerq: get %q: %w", id, err)
	}
	rec, _ := reply.(string)
	return decodeRecord(id, rec)
}

// Cancel cancels the scheduled timer id and wakes its waiters with
// ErrCancelled. Cancelling a cancelled timer is a no-op that returns nil;
// a fired timer gives ErrAlreadyFired and an unknown one ErrNotFound. The
// returned record is the timer as it now is.
func (q *Queue) Cancel(ctx context.Context, id string) (Timer, error) {
	if err := ValidateID(id); err != nil {
		return Timer{}, err
	}
	t, status, err := q.runStatus(ctx, cancelScript, id, id, q.opts.retentionMillis(), q.TimerChannel(id))
	if err != nil {
		return Timer{}, fmt.Errorf("timerq: cancel %q: %w", id, err)
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
		return Timer{}, fmt.Errorf("timer %q: %w", id, err)
	}
	return q.reschedule(ctx, id, dueMillis(due))
}

// RescheduleIn is Reschedule to d after the Redis server's clock, read
// inside the script, rounded up to the millisecond (see ScheduleIn).
func (q *Queue) RescheduleIn(ctx context.Context, id string, d time.Duration) (Timer, error) {
	if err := ValidateID(id); err != nil {
		return Timer{}, err
	}
	if err := validateIn(d); err != nil {
		return Timer{}, fmt.Errorf("timer %q: %w", id, err)
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
	t, status, err := q.runStatus(ctx, rescheduleScript, id, id, due, q.wakeChannel)
	if err != nil {
		return Timer{}, fmt.Errorf("timerq: reschedule %q: %w", id, err)
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
	return fmt.Errorf("timerq: %q: unexpected script status %q", id, status)
}

// runStatus runs a script replying {status, record}.
func (q *Queue) runStatus(ctx context.Context, s *redis.Script, id string, args ...any) (Timer, string, error) {
	reply, err := q.run(ctx, s, args...)
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

// run runs one script over the namespace's keys.
func (q *Queue) run(ctx context.Context, s *redis.Script, args ...any) (any, error) {
	v, err := s.Run(ctx, q.rdb, q.keys, args...).Result()
	if err != nil {
		return nil, q.redisError(err)
	}
	return v, nil
}

// runMany runs one script once per argument list, in one pipeline. Scripts
// in a pipeline get no EVAL fallback from go-redis, so on NOSCRIPT (a
// restarted or failed-over Redis) it loads the script and retries; every
// timerq script is safe to repeat.
func (q *Queue) runMany(ctx context.Context, s *redis.Script, calls [][]any) ([]any, error) {
	if len(calls) == 1 {
		v, err := q.run(ctx, s, calls[0]...)
		return []any{v}, err
	}
	for attempt := 0; ; attempt++ {
		cmds := make([]*redis.Cmd, len(calls))
		_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, args := range calls {
				cmds[i] = s.EvalSha(ctx, p, q.keys, args...)
			}
			return nil
		})
		if err != nil && attempt == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
			if err := s.Load(ctx, q.rdb).Err(); err != nil {
				return nil, q.redisError(err)
			}
			continue
		}
		if err != nil {
			return nil, q.redisError(err)
		}
		out := make([]any, len(cmds))
		for i, c := range cmds {
			out[i] = c.Val()
		}
		return out, nil
	}
}

// redisError adds what to do to the errors a user can meet from Redis, and
// wraps the sentinel that names the cause. Redis 7 keeps a refused
// command's error code when a script fails, so the code is found in the
// message whether the command ran alone or inside a script.
func (q *Queue) redisError(err error) error {
	switch {
	case hasRedisCode(err, "WRONGTYPE"):
		return fmt.Errorf("%w: %w; another program writes under timerq:{%s}:*, so use another namespace or remove those keys",
			ErrWrongType, err, q.opts.Namespace)
	case hasRedisCode(err, "NOPERM") || isScriptACLError(err):
		return fmt.Errorf("%w: %w%s", ErrPermission, err, q.permissionHint(err.Error()))
	case hasRedisCode(err, "OOM"):
		return fmt.Errorf("%w: %w; raise maxmemory, lower Options.Retention so purges free more, or cancel timers you no longer need",
			ErrOutOfMemory, err)
	case hasRedisCode(err, "TIMERQ_MALFORMED"):
		return fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	return err
}

// permissionHint says which ACL rule grants what Redis refused. The
// scripts' own refusals (prelude.lua) already name the right and the rule;
// Redis's words are mapped here for the rest: a command refused outside a
// script names itself, a key or channel only its kind.
func (q *Queue) permissionHint(msg string) string {
	const more = " (docs/security.md lists the rights of each role)"
	prefix := "timerq:{" + q.opts.Namespace + "}:"
	switch {
	case strings.Contains(msg, "NOPERM timerq:"):
		return more
	case strings.Contains(msg, "channel"):
		return "; grant the namespace's channels with the ACL rule &" + prefix + "*" + more
	case strings.Contains(msg, "key"):
		return "; grant the namespace's keys with the ACL rule ~" + prefix + "*" + more
	}
	if _, rest, ok := strings.Cut(msg, "to run the '"); ok {
		if cmd, _, ok := strings.Cut(rest, "'"); ok {
			return "; grant it with the ACL rule +" + strings.ToLower(cmd) + more
		}
	}
	return "; grant the commands timerq runs" + more
}

// isScriptACLError reports whether err is an ACL refusal of a command run
// inside a script: Redis 7.0 reports those as ERR, not NOPERM, in words
// that name what was refused (a command, a key or a channel).
func isScriptACLError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.Contains(rerr.Error(), "The user executing the script can't")
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
