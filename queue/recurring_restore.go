package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/timerq/timerq/schedule"
)

// Restore recreates a schedule from a RecurringInfo that
// RecurringTimers.Get or RecurringTimers.List returned (timerctl's `schedules export`
// writes them, `schedules import` restores them): its spec, policies, payload, state, count,
// last armed time and creation time, and arms its pending occurrences under
// their IDs (an occurrence that already exists, say restored by a timer
// import, is kept). Then workers top it up as usual; occurrences missed
// since the export are caught up by its policy. Like RecurringTimers.Put it
// changes nothing when the ID exists, and reports created false.
func (rt RecurringTimers) Restore(ctx context.Context, in RecurringInfo) (created bool, err error) {
	q := rt.q
	created, _, err = q.Recurring().RestoreWith(ctx, in, nil)
	return created, err
}

// RestoreWith is RecurringTimers.Restore that first restores the
// schedule's exported occurrence timers, as Restore would, with their
// states and times; results has one entry per occurrence, in order.
// Restore alone refuses them while the schedule does not exist
// (ErrOccurrenceID), since a later schedule of that ID would adopt them.
// Each occurrence's ID must be OccurrenceID(in.ID, nominal) for some
// nominal time. Everything is validated before any write; the occurrences
// and the schedule are then two steps, so a failure between them (Redis
// gone) leaves the occurrences without their schedule until the same call
// is made again, which is idempotent.
func (rt RecurringTimers) RestoreWith(ctx context.Context, in RecurringInfo, occurrences []Timer) (created bool, results []ScheduleResult, err error) {
	q := rt.q
	r, err := q.validateRecurring(in.Recurring)
	if err != nil {
		return false, nil, err
	}
	state := map[RecurringState]recState{RecurringActive: recActive, RecurringPaused: recPaused, RecurringEnded: recEnded}[in.State]
	if state == 0 {
		return false, nil, fmt.Errorf("%w: schedule %q: state %q is not one of active, paused, ended", schedule.ErrInvalidSchedule, r.ID, in.State)
	}
	if r.Every > 0 && r.Anchor.IsZero() {
		return false, nil, fmt.Errorf("%w: schedule %q: an exported interval schedule needs its anchor", schedule.ErrInvalidSchedule, r.ID)
	}
	arms := in.Pending
	if state == recPaused {
		arms = nil
	}
	for _, o := range arms {
		if ValidateDue(o.Nominal) != nil || ValidateDue(o.Due) != nil || o.Due.Before(o.Nominal) {
			return false, nil, fmt.Errorf("%w: schedule %q: pending occurrence %v is out of range", schedule.ErrInvalidSchedule, r.ID, o.Nominal)
		}
	}
	for i, t := range occurrences {
		if err := q.validateRestored(t); err != nil {
			return false, nil, errorf("schedule %q: occurrence %d: %w", r.ID, i, err)
		}
		if sid, _, ok := ParseOccurrenceID(t.ID); !ok || sid != r.ID {
			return false, nil, fmt.Errorf("%w: schedule %q: timer %q is not one of its occurrences, which are %q",
				ErrInvalidID, r.ID, t.ID, r.ID+"@<Unix ms>")
		}
	}
	for start := 0; start < len(occurrences); start += MaxBatch {
		out, err := q.restore(ctx, occurrences[start:min(start+MaxBatch, len(occurrences))], r.ID)
		if err != nil {
			return false, results, errorf("restore schedule %q: its occurrences: %w", r.ID, err)
		}
		results = append(results, out...)
	}
	base := max(in.Count-int64(len(arms)), 0)
	created0, updated0 := in.CreatedAt.UnixMilli(), in.UpdatedAt.UnixMilli()
	b, _ := json.Marshal(r.body(created0, updated0))
	status, _, _, err := q.put(ctx, putArgs{op: "create", id: r.ID, expected: strconv.FormatInt(base, 10), body: string(b), state: state,
		last: lastArg(in.Last), payload: r.Payload, overlap: r.Overlap, endpoint: deliveryOf(r.Endpoint, r.URL, r.FlowKey),
		meta: r.occurrenceMeta(), arms: arms})
	if err != nil {
		return false, results, errorf("restore schedule %q: %w", r.ID, err)
	}
	return status == "created", results, nil
}
