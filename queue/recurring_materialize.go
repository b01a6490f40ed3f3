package queue

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"
)

// DefaultRepairGrace is how long past its due time a schedule's earliest
// pending occurrence may stay unreplaced before RepairRecurring tops the
// schedule up: long enough for the worker that fired it to arm the next
// itself, so the repair pass rarely does work twice.
const DefaultRepairGrace = 2 * time.Second

// ArmFired keeps the schedules of the fired occurrences topped up: for each
// schedule, it arms the next occurrences so that Recurring.Ahead of them
// are pending. Pollers call it after every claim that fired an occurrence;
// it is idempotent (occurrence IDs are deterministic and a plan made from a
// stale read is refused), so racing callers arm each occurrence once. It
// returns how many occurrences it armed. Fired timers that are not
// occurrences are ignored.
func (q *Queue) ArmFired(ctx context.Context, fired []Fired) (int, error) {
	var ids []any
	seen := map[string]bool{}
	for _, f := range fired {
		sid, _, ok := ParseOccurrenceID(f.ID)
		if !ok || seen[sid] {
			continue
		}
		seen[sid] = true
		ids = append(ids, sid)
	}
	n := 0
	for start := 0; start < len(ids); start += scheduleChunk {
		chunk := ids[start:min(start+scheduleChunk, len(ids))]
		armed, err := q.topUp(ctx, append([]any{"ids"}, chunk...))
		n += armed
		if err != nil {
			return n, errorf("arm schedules: %w", err)
		}
	}
	return n, nil
}

// RepairRecurring tops up up to limit (1..MaxBatch) active schedules whose
// earliest pending occurrence was due more than grace ago (0 means
// DefaultRepairGrace) without the next being armed: the worker that fired
// it died before ArmFired. It returns how many occurrences it armed and
// whether more schedules may need repair. Pollers call it every second.
func (q *Queue) RepairRecurring(ctx context.Context, limit int, grace time.Duration) (armed int, more bool, err error) {
	if limit < 1 || limit > MaxBatch {
		return 0, false, fmt.Errorf("%w: repair limit %d is outside 1..%d", ErrInvalidOptions, limit, MaxBatch)
	}
	if grace <= 0 {
		grace = DefaultRepairGrace
	}
	armed, scanned, needy, err := q.topUpCounted(ctx, []any{"due", grace.Milliseconds(), limit})
	if err != nil {
		return armed, false, errorf("repair schedules: %w", err)
	}
	// A full page of schedules that were only behind (claims lagging, not
	// a dead worker) ends the pass: going on would scan the whole backlog
	// every second exactly when Redis is short of time.
	return armed, scanned == limit && needy > 0, nil
}

func (q *Queue) topUp(ctx context.Context, loadArgs []any) (int, error) {
	n, _, _, err := q.topUpCounted(ctx, loadArgs)
	return n, err
}

// topUpCounted loads schedules, plans each in Go and arms them all in one
// script call: two round trips however many schedules. It returns how many
// occurrences it armed, how many schedules the script looked at, and how
// many of those it returned as needing a top-up.
func (q *Queue) topUpCounted(ctx context.Context, loadArgs []any) (armed, scanned, needy int, err error) {
	now, ids, recs, scanned, err := q.loadScanned(ctx, loadArgs...)
	if err != nil {
		return 0, 0, 0, err
	}
	needy = len(ids)
	args := []any{q.WakeChannel()}
	planned := 0
	var bad error // the first schedule that could not be planned
	for _, id := range ids {
		s := recs[id]
		if s != nil && s.err != nil {
			bad = cmp.Or(bad, s.err)
			continue
		}
		if s == nil || s.state != 'a' {
			continue
		}
		base := now
		if s.last != "" {
			base = fromMillis(atoi(s.last))
		}
		p, err := planFrom(s.r, base, now, s.count, s.r.Ahead-len(s.pending))
		if err != nil {
			bad = cmp.Or(bad, errorf("schedule %q: %w", id, err))
			continue
		}
		last := s.last
		if !p.last.IsZero() {
			last = lastArg(p.last)
		}
		args = append(args, id, strconv.FormatInt(s.version, 10), s.last, last, stateCode(p.ended), s.r.Payload, len(p.arms))
		for _, o := range p.arms {
			args = append(args, o.Nominal.UnixMilli(), o.Due.UnixMilli())
		}
		planned += len(p.arms)
	}
	if len(args) == 1 {
		return 0, scanned, needy, bad
	}
	rs, keys, err := q.recurring(ctx)
	if err != nil {
		return 0, scanned, needy, err
	}
	v, err := rs.arm.Run(ctx, q.rdb, keys, args...).Result()
	if err != nil {
		return 0, scanned, needy, q.redisError(err)
	}
	if _, err := replyStrings(v); err != nil {
		return 0, scanned, needy, fmt.Errorf("unexpected reply %v", v)
	}
	return planned, scanned, needy, bad
}
