package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/scripts/lua"
)

// DebounceWindow is what a timer's ID and the namespace say of the debounce
// window it belongs to (Inspector.DebounceWindowOf).
type DebounceWindow struct {
	// Key is the debounce key: the ID's part before its last "@".
	Key string
	// Opened is when the window opened, by the server's clock: the ID's
	// milliseconds.
	Opened time.Time
	// Deadline is the window's deadline while the window is open and this
	// timer is its timer; zero once the window closed (its deadline passed,
	// or a later window of the key is open).
	Deadline time.Time
}

// DebounceWindowOf reports whether timer id is a debounce window's timer,
// and which: its ID has the form "<key>@<Unix ms>" (DebounceID) and key is
// not the ID of a recurring schedule of the namespace. A timer of that
// form whose schedule was deleted reads as a window too: nothing in Redis
// tells them apart, and neither is any schedule's occurrence any more.
// The key's window string, when it names id, gives the deadline. It runs
// one pipeline of an HGET and a GET on the key's shard, and does not check
// that id exists.
func (in Inspector) DebounceWindowOf(ctx context.Context, id string) (DebounceWindow, bool, error) {
	q := in.q
	key, ms, ok := keyspace.SplitOccurrence(id)
	if !ok {
		return DebounceWindow{}, false, nil
	}
	l, err := q.layout(ctx)
	if err != nil {
		return DebounceWindow{}, false, err
	}
	sp := l.spaces[l.scheduleShard(key)]
	var sched, win *redis.StringCmd
	if _, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		sched = p.HGet(ctx, sp.Schedules(), key)
		win = p.Get(ctx, sp.Debounce(key))
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return DebounceWindow{}, false, errorf("debounce window of %q: %w", id, q.redisError(err))
	}
	if sched.Err() == nil {
		return DebounceWindow{}, false, nil // an occurrence of a schedule
	}
	opened := atoi(ms)
	w := DebounceWindow{Key: key, Opened: fromMillis(opened)}
	if v, err := win.Result(); err == nil {
		var o, d int64
		if _, err := fmt.Sscanf(v, "%d:%d", &o, &d); err == nil && o == opened {
			w.Deadline = fromMillis(d)
		}
	}
	return w, true, nil
}

// RestoredWindow is a debounce window's timer as an export recorded it, to
// write with RestoreDebounce.
type RestoredWindow struct {
	// Timer is the window's timer; its ID is "<key>@<Unix ms>".
	Timer Timer
	// Deadline is the window's deadline while it was open
	// (DebounceWindow.Deadline); zero for a closed window.
	Deadline time.Time
}

// RestoreDebounce writes a debounce window's timer as Restore writes a
// timer (state, times, payload, and its owner, labels, epoch and deadline,
// raising the owner's epoch to the timer's; an existing ID is left
// unchanged and its result, with the meta it has, has Created false), and
// reopens the key's window when the timer is scheduled and Deadline is
// after the server's clock: later Debounce calls of the key then push
// this timer, within the deadline, as they would have where it came from.
// A key that has an open window here already keeps it, and the restored
// timer fires as an ordinary timer.
//
// Restore refuses the timer, whose ID has a recurring occurrence's form,
// unless its schedule exists; RestoreDebounce takes it because no
// schedule of the key exists, and refuses it with ErrDebounceKeyIsSchedule
// when one does. All checks run before anything is written.
func (q *Queue) RestoreDebounce(ctx context.Context, w RestoredWindow) (ScheduleResult, error) {
	t := w.Timer
	if err := q.validateRestored(t); err != nil {
		return ScheduleResult{}, errorf("restore debounce window: %w", err)
	}
	key, _, ok := keyspace.SplitOccurrence(t.ID)
	if !ok {
		return ScheduleResult{}, fmt.Errorf("%w: %q is not a debounce window's timer ID, <key>@<Unix ms>; restore it with Restore",
			ErrInvalidID, t.ID)
	}
	deadline := ""
	if !w.Deadline.IsZero() {
		deadline = strconv.FormatInt(millis(w.Deadline), 10)
	}
	l, err := q.layout(ctx)
	if err != nil {
		return ScheduleResult{}, err
	}
	k := l.scheduleShard(key)
	settled := ""
	switch t.State {
	case StateFired:
		settled = strconv.FormatInt(millis(t.FiredAt), 10)
	case StateCancelled:
		settled = strconv.FormatInt(millis(t.CancelledAt), 10)
	}
	reply, err := q.runKeysTries(ctx, l, lua.DebounceRestore, k, key, migrationAttempts,
		q.opts.retentionMillis(), l.spaces[k].Wake(), key, deadline,
		t.ID, t.State.code(), restoreDueArg(t), millis(t.CreatedAt), settled, t.Payload, t.meta().stored())
	if err != nil {
		if mayHaveRun(err) {
			return ScheduleResult{}, errorf("%w: restore debounce window %q: %w", ErrOutcomeUnknown, t.ID, err)
		}
		return ScheduleResult{}, errorf("restore debounce window %q: %w", t.ID, err)
	}
	r, err := replyStrings(reply)
	if err == nil && len(r) == 1 && r[0] == "schedule" {
		return ScheduleResult{}, fmt.Errorf("%w: %q is a recurring schedule of namespace %q, so %q would be its occurrence; restore the window under another namespace, or delete the schedule first",
			ErrDebounceKeyIsSchedule, key, q.opts.Namespace, t.ID)
	}
	// {created, record, reopened, meta}: the meta is the one stored, that
	// of the existing timer when it was not created.
	if err != nil || len(r) != 4 {
		return ScheduleResult{}, errorf("restore debounce window %q: unexpected reply %v", t.ID, reply)
	}
	got, err := decodeRecord(t.ID, r[1])
	if err == nil {
		got, err = got.withMeta(r[3])
	}
	if err != nil {
		return ScheduleResult{}, err
	}
	res := ScheduleResult{Timer: got, Created: r[0] == "1"}
	// The script raised the owner's epoch on the window's shard only. By
	// the stored meta, not t's: a repeated call, after this failed, raises
	// it still, and an existing timer's restore raises no other owner.
	if err := q.raiseEpochs(ctx, l, []Timer{got}); err != nil {
		return res, err
	}
	return res, nil
}
