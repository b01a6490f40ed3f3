package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/timerq/timerq/scripts/lua"
)

// keepLast, as putArgs.last, leaves the schedule's last armed time as it is.
const keepLast = "-"

// putArgs is one call of recur_put.lua, field by field in its ARGV order
// (the script's header says what each means).
type putArgs struct {
	op string // create, update, pause, resume or delete
	id string
	// expected is the version the schedule must have, "" for any; for
	// create, the count to start from ("" for 0).
	expected string
	body     string // the record's JSON, "" to keep it
	state    recState
	last     string // the last armed nominal time in Unix ms, "" for none, or keepLast
	payload  []byte
	overlap  Overlap // the policy after the op, "" to keep it
	// endpoint is what the occurrences it arms deliver to, "" for none
	// (deliveryOf).
	endpoint string
	// meta is the occurrences' owner and labels (NewTimer.metaArg).
	meta string
	arms []Occurrence
}

// put runs recur_put.lua on the shard of the schedule a.id.
func (q *Queue) put(ctx context.Context, a putArgs) (string, time.Time, string, error) {
	l, err := q.layout(ctx)
	if err != nil {
		return "", time.Time{}, "", err
	}
	if _, url := splitDeliver(a.endpoint); url != "" && (a.op == "create" || a.op == "update") {
		if err := q.checkTimerURLs(ctx, fmt.Sprintf("schedule %q", a.id)); err != nil {
			return "", time.Time{}, "", err
		}
	}
	state := ""
	if a.state != 0 {
		state = a.state.arg()
	}
	var quota int64
	if a.op == "create" {
		quotas, err := q.quotas(ctx)
		if err != nil {
			return "", time.Time{}, "", err
		}
		quota = shardQuota(quotas.Schedules, len(l.spaces))
	}
	k := l.scheduleShard(a.id)
	args := []any{a.op, a.id, a.expected, a.body, state, a.last, a.payload, l.spaces[k].Wake(), l.spaces[k].TimerChannelPrefix(),
		q.opts.retentionMillis(), string(a.overlap), a.endpoint, quota, a.meta}
	for _, o := range a.arms {
		args = append(args, o.Nominal.UnixMilli(), o.Due.UnixMilli())
	}
	v, err := q.runKeysTries(ctx, l, lua.RecurPut, k, a.id, migrationAttempts, args...)
	if err != nil {
		return "", time.Time{}, "", err
	}
	r, err := replyStrings(v)
	if err != nil || len(r) != 3 {
		return "", time.Time{}, "", fmt.Errorf("unexpected reply %v", v)
	}
	if r[0] == "debounce" {
		return "", time.Time{}, "", fmt.Errorf("%w: %q is a debounce key with an open window in namespace %q (Debounce); use another schedule ID",
			ErrScheduleIDIsDebounceKey, a.id, q.opts.Namespace)
	}
	return r[0], fromMillis(atoi(r[1])), r[2], nil
}

// Put creates the schedule r and arms its first occurrences,
// unless a schedule with that ID exists, in which case it returns the
// existing one with created false and changes nothing (use RecurringTimers.Update
// to change it). Occurrence times are computed from the Redis server's clock.
func (rt RecurringTimers) Put(ctx context.Context, r Recurring) (info RecurringInfo, created bool, err error) {
	q := rt.q
	if r, err = q.validateRecurring(r); err != nil {
		return RecurringInfo{}, false, err
	}
	now, s, err := q.loadOne(ctx, r.ID)
	if err != nil {
		return RecurringInfo{}, false, errorf("put schedule %q: %w", r.ID, err)
	}
	if s != nil {
		return s.info(now), false, nil
	}
	if r.Every > 0 && r.Anchor.IsZero() {
		r.Anchor = now
	}
	p, err := planFrom(r, now, now, 0, r.Ahead)
	if err != nil {
		return RecurringInfo{}, false, err
	}
	b, _ := json.Marshal(r.body(now.UnixMilli(), now.UnixMilli()))
	status, now, rec, err := q.put(ctx, putArgs{op: "create", id: r.ID, body: string(b), state: stateCode(p.ended), last: lastArg(p.last),
		payload: r.Payload, overlap: r.Overlap, endpoint: deliveryOf(r.Endpoint, r.URL, r.FlowKey), meta: r.occurrenceMeta(), arms: p.arms})
	if err != nil {
		return RecurringInfo{}, false, errorf("put schedule %q: %w", r.ID, err)
	}
	info, err = q.afterPut(ctx, r.ID, now, rec)
	return info, status == "created", err
}

// afterPut reads a schedule back for the reply, with its pending occurrences.
func (q *Queue) afterPut(ctx context.Context, id string, now time.Time, rec string) (RecurringInfo, error) {
	info, err := q.Recurring().Get(ctx, id)
	if err != nil && rec != "" {
		s, derr := decodeSchedule(id, rec, "")
		if derr == nil {
			return s.info(now), err
		}
	}
	return info, err
}

// Update replaces the spec, payload and policies of the existing
// schedule r.ID, atomically: its pending occurrences are cancelled, except
// those the new spec also has, which are rewritten with the new payload and
// jitter, and the next occurrences after the server's now are armed. A
// paused schedule stays paused; an ended one becomes active again if the
// new spec has occurrences left. Missed occurrences are not caught up.
func (rt RecurringTimers) Update(ctx context.Context, r Recurring) (RecurringInfo, error) {
	q := rt.q
	var err error
	if r, err = q.validateRecurring(r); err != nil {
		return RecurringInfo{}, err
	}
	return q.modify(ctx, "update", r.ID, r.Overlap, func(s *record, now time.Time) (putArgs, error) {
		if r.Every > 0 && r.Anchor.IsZero() {
			r.Anchor = now
			if s.r.Every > 0 && !s.r.Anchor.IsZero() {
				r.Anchor = s.r.Anchor
			}
		}
		b, _ := json.Marshal(r.body(s.body.CreatedMs, now.UnixMilli()))
		if s.state == recPaused {
			return putArgs{body: string(b), state: recPaused, last: keepLast, payload: r.Payload}, nil
		}
		p, err := planFrom(r, now, now, s.count-int64(len(s.pending)), r.Ahead)
		if err != nil {
			return putArgs{}, err
		}
		return putArgs{body: string(b), state: stateCode(p.ended), last: lastArg(p.last), payload: r.Payload, arms: p.arms}, nil
	})
}

// Pause pauses the schedule id: its pending occurrences are
// cancelled and nothing is armed until RecurringTimers.Resume. Pausing a paused
// schedule changes nothing, its version included.
func (rt RecurringTimers) Pause(ctx context.Context, id string) (RecurringInfo, error) {
	q := rt.q
	return q.modify(ctx, "pause", id, "", func(s *record, now time.Time) (putArgs, error) {
		if s.state == recPaused {
			// Already paused: nothing to cancel, and the version (which
			// counts changes) stays.
			return putArgs{}, errNoChange
		}
		if s.state == recEnded {
			return putArgs{state: recEnded, last: keepLast}, nil
		}
		return putArgs{state: recPaused, last: keepLast}, nil
	})
}

// Resume resumes a paused schedule from the server's now: the
// occurrences that fell in the pause are skipped, whatever the catch-up
// policy (a pause is not downtime), and the next ones are armed. Resuming
// an active or ended schedule changes nothing.
func (rt RecurringTimers) Resume(ctx context.Context, id string) (RecurringInfo, error) {
	q := rt.q
	return q.modify(ctx, "resume", id, "", func(s *record, now time.Time) (putArgs, error) {
		if s.state != recPaused {
			return putArgs{}, errNoChange
		}
		r := s.r
		r.CatchUp = CatchUpSkip
		p, err := planFrom(r, now, now, s.count, r.Ahead)
		if err != nil {
			return putArgs{}, err
		}
		return putArgs{state: stateCode(p.ended), last: lastArg(p.last), payload: s.r.Payload, arms: p.arms}, nil
	})
}

var errNoChange = errors.New("no change")

// Delete deletes the schedule id and cancels its pending
// occurrences. Fired occurrences stay until their retention passes.
func (rt RecurringTimers) Delete(ctx context.Context, id string) error {
	q := rt.q
	if err := ValidateID(id); err != nil {
		return err
	}
	status, _, _, err := q.put(ctx, putArgs{op: "delete", id: id, last: keepLast})
	if err != nil {
		return errorf("delete schedule %q: %w", id, err)
	}
	if status == "notfound" {
		return q.recurringNotFound(id)
	}
	return nil
}

// modify reads a schedule, lets fn plan the change from it, and writes it
// if the schedule has not changed meanwhile, retrying a few times if it has.
// overlap is the schedule's overlap policy after the change, "" to keep it.
// fn plans the body, state, last time, payload and arms of the call; modify
// fills in the rest.
func (q *Queue) modify(ctx context.Context, op, id string, overlap Overlap, fn func(s *record, now time.Time) (putArgs, error)) (RecurringInfo, error) {
	if err := ValidateID(id); err != nil {
		return RecurringInfo{}, err
	}
	for range 5 {
		now, s, err := q.loadOne(ctx, id)
		if err != nil {
			return RecurringInfo{}, errorf("%s schedule %q: %w", op, id, err)
		}
		if s == nil {
			return RecurringInfo{}, q.recurringNotFound(id)
		}
		a, err := fn(s, now)
		if errors.Is(err, errNoChange) {
			return s.info(now), nil
		}
		if err != nil {
			return RecurringInfo{}, err
		}
		// The endpoint after the change: the new body's, or the kept one's.
		a.endpoint, a.meta = deliveryOf(s.r.Endpoint, s.r.URL, s.r.FlowKey), s.r.occurrenceMeta()
		if a.body != "" {
			var nb body
			if err := json.Unmarshal([]byte(a.body), &nb); err != nil {
				return RecurringInfo{}, errorf("%s schedule %q: %w", op, id, err)
			}
			if nb.Owner != s.r.Owner {
				// An owner does not change in place (guarantees.md,
				// "Owners and fencing epochs"): delete the schedule and
				// create it under the new owner, which moves the
				// revived occurrences' index entries (recur_put.lua).
				return RecurringInfo{}, &FieldError{Field: "Owner", Err: fmt.Errorf("%w: schedule %q is owned by %q; an owner cannot change: delete the schedule and create it under %q",
					ErrInvalidOptions, id, s.r.Owner, nb.Owner)}
			}
			a.endpoint, a.meta = deliveryOf(nb.Endpoint, nb.URL, nb.FlowKey), nb.occurrenceMeta()
		}
		a.op, a.id, a.expected, a.overlap = op, id, strconv.FormatInt(s.version, 10), overlap
		status, now, rec, err := q.put(ctx, a)
		if err != nil {
			return RecurringInfo{}, errorf("%s schedule %q: %w", op, id, err)
		}
		switch status {
		case "ok":
			return q.afterPut(ctx, id, now, rec)
		case "notfound":
			return RecurringInfo{}, q.recurringNotFound(id)
		}
	}
	return RecurringInfo{}, errorf("%s schedule %q: it kept changing under concurrent updates; retry", op, id)
}
