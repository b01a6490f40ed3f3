package queue

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/timerq/timerq/scripts/lua"
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
func (en Engine) ArmFired(ctx context.Context, fired []Fired) (int, error) {
	q := en.q
	l, err := q.layout(ctx)
	if err != nil {
		return 0, errorf("arm schedules: %w", err)
	}
	byShard := map[int][]any{}
	var shards []int
	seen := map[string]bool{}
	for _, f := range fired {
		sid, _, ok := ParseOccurrenceID(f.ID)
		if !ok || seen[sid] {
			continue
		}
		seen[sid] = true
		k := l.scheduleShard(sid)
		if byShard[k] == nil {
			shards = append(shards, k)
		}
		byShard[k] = append(byShard[k], sid)
	}
	n := 0
	var bad error
	for _, k := range shards {
		ids := byShard[k]
		for start := 0; start < len(ids); start += scheduleChunk {
			chunk := ids[start:min(start+scheduleChunk, len(ids))]
			armed, err := q.topUp(ctx, l, k, append([]any{"ids"}, chunk...))
			n += armed
			if err != nil {
				// One shard's failure (say, its slot moving) must not
				// keep the others from being armed.
				bad = cmp.Or(bad, err)
			}
		}
	}
	if bad != nil {
		return n, errorf("arm schedules: %w", bad)
	}
	return n, nil
}

// ScheduleShards returns those of shards (all of the namespace's when nil)
// that hold active recurring schedules: a non-empty sched-due set. It asks
// every shard in one pipeline of ZCARDs, so a repair pass over a sharded
// namespace with few schedules runs its script only where there is
// something to repair. A shard whose ZCARD fails is returned too, so that
// its repair reports the error.
func (en Engine) ScheduleShards(ctx context.Context, shards []int) ([]int, error) {
	q := en.q
	l, err := q.layout(ctx)
	if err != nil {
		return nil, err
	}
	if shards == nil {
		shards = make([]int, len(l.spaces))
		for k := range shards {
			shards[k] = k
		}
	}
	for _, k := range shards {
		if err := checkShard(l, k); err != nil {
			return nil, err
		}
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(shards))
	for i, k := range shards {
		cmds[i] = pipe.ZCard(ctx, l.spaces[k].SchedDue())
	}
	if _, err := pipe.Exec(ctx); err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var out []int
	for i, k := range shards {
		if n, err := cmds[i].Result(); err != nil || n > 0 {
			out = append(out, k)
		}
	}
	return out, nil
}

// RepairRecurring tops up up to limit (1..MaxBatch) active schedules per
// shard whose earliest pending occurrence was due more than grace ago (0
// means DefaultRepairGrace) without the next being armed: the worker that
// fired it died before ArmFired. It visits every shard of the namespace
// (RepairRecurringShard visits one) and returns how many occurrences it
// armed and whether more schedules may need repair.
func (en Engine) RepairRecurring(ctx context.Context, limit int, grace time.Duration) (armed int, more bool, err error) {
	q := en.q
	l, err := q.layout(ctx)
	if err != nil {
		return 0, false, errorf("repair schedules: %w", err)
	}
	shards := []int{0}
	if len(l.spaces) > 1 {
		if shards, err = q.Engine().ScheduleShards(ctx, nil); err != nil {
			return 0, false, errorf("repair schedules: %w", err)
		}
	}
	for _, k := range shards {
		n, m, err := q.Engine().RepairRecurringShard(ctx, k, limit, grace)
		armed += n
		more = more || m
		if err != nil {
			return armed, more, err
		}
	}
	return armed, more, nil
}

// RepairRecurringShard is RepairRecurring for the schedules of shard k
// only. Pollers call it every second for the shards they own.
func (en Engine) RepairRecurringShard(ctx context.Context, k, limit int, grace time.Duration) (armed int, more bool, err error) {
	q := en.q
	if limit < 1 || limit > MaxBatch {
		return 0, false, fmt.Errorf("%w: repair limit %d is outside 1..%d", ErrInvalidOptions, limit, MaxBatch)
	}
	if grace <= 0 {
		grace = DefaultRepairGrace
	}
	l, err := q.layout(ctx)
	if err == nil {
		err = checkShard(l, k)
	}
	if err != nil {
		return 0, false, errorf("repair schedules: %w", err)
	}
	armed, scanned, needy, err := q.topUpCounted(ctx, l, k, []any{"due", grace.Milliseconds(), limit})
	if err != nil {
		return armed, false, errorf("repair schedules: %w", err)
	}
	// A full page of schedules that were only behind (claims lagging, not
	// a dead worker) ends the pass: going on would scan the whole backlog
	// every second exactly when Redis is short of time.
	return armed, scanned == limit && needy > 0, nil
}

func (q *Queue) topUp(ctx context.Context, l *layout, k int, loadArgs []any) (int, error) {
	n, _, _, err := q.topUpCounted(ctx, l, k, loadArgs)
	return n, err
}

// topUpCounted loads schedules of shard k, plans each in Go and arms them
// all in one script call: two round trips however many schedules. It
// returns how many occurrences it armed, how many schedules the script
// looked at, and how many of those it returned as needing a top-up.
func (q *Queue) topUpCounted(ctx context.Context, l *layout, k int, loadArgs []any) (armed, scanned, needy int, err error) {
	now, ids, recs, scanned, err := q.loadScanned(ctx, l, k, loadArgs...)
	if err != nil {
		return 0, 0, 0, err
	}
	needy = len(ids)
	args := []any{l.spaces[k].Wake()}
	planned := 0
	var bad error // the first schedule that could not be planned
	for _, id := range ids {
		s := recs[id]
		if s != nil && s.err != nil {
			bad = cmp.Or(bad, s.err)
			continue
		}
		if s == nil || s.state != recActive {
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
		args = append(args, id, strconv.FormatInt(s.version, 10), s.last, last, stateCode(p.ended).arg(), s.r.Payload,
			deliveryOf(s.r.Endpoint, s.r.URL, s.r.FlowKey), s.r.occurrenceMeta(), len(p.arms))
		for _, o := range p.arms {
			args = append(args, o.Nominal.UnixMilli(), o.Due.UnixMilli())
		}
		planned += len(p.arms)
	}
	if len(args) == 1 {
		return 0, scanned, needy, bad
	}
	v, err := q.run(ctx, l, lua.RecurArm, k, args...)
	if err != nil {
		return 0, scanned, needy, err
	}
	if _, err := replyStrings(v); err != nil {
		return 0, scanned, needy, fmt.Errorf("unexpected reply %v", v)
	}
	return planned, scanned, needy, bad
}
