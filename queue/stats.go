package queue

import (
	"context"
	"time"

	"github.com/timerq/timerq/scripts/lua"
)

// Stats is a snapshot of a namespace, each shard's part taken atomically.
type Stats struct {
	// Now is the Redis server's clock when the snapshot was taken.
	Now       time.Time
	Scheduled int64
	// Fired and Cancelled count settled records not yet purged.
	Fired     int64
	Cancelled int64
	// EarliestDue is the earliest pending due time; zero if none.
	EarliestDue time.Time
	// Overdue counts scheduled timers whose due time has passed: the backlog
	// the workers have not fired yet.
	Overdue int64
	// OldestOverdueAge is how long ago the earliest overdue timer came due;
	// zero when nothing is overdue.
	OldestOverdueAge time.Duration
	// Shards holds each shard's own figures (Shards[k].Shards is nil); one
	// entry for an unsharded namespace.
	Shards []Stats
}

// Stats returns counts per state and the overdue backlog, summed over the
// shards, with each shard's figures in Stats.Shards. The shards are read in
// one pipeline; each shard's figures are atomic, their sum is not one
// snapshot.
//
// When some shards fail and others answer, Stats returns the figures of
// those that answered (the failed shards' entries in Stats.Shards are zero,
// and the totals leave them out) with a *ShardError naming the failed ones.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	l, err := q.layout(ctx)
	if err != nil {
		return Stats{}, err
	}
	calls := make([]call, len(l.spaces))
	for k := range calls {
		calls[k] = call{shard: k}
	}
	replies, errs, err := q.runEach(ctx, l, lua.Stats, calls)
	if err != nil {
		return Stats{}, errorf("stats: %w", err)
	}
	var total Stats
	var failed map[int]error
	for k, reply := range replies {
		if errs[k] != nil {
			if len(l.spaces) == 1 {
				return Stats{}, errorf("stats: %w", errs[k])
			}
			if failed == nil {
				failed = map[int]error{}
			}
			failed[k] = errs[k]
			total.Shards = append(total.Shards, Stats{})
			continue
		}
		r, err := replyStrings(reply)
		if err != nil || len(r) != 6 {
			return Stats{}, errorf("stats: unexpected reply %v", reply)
		}
		// The clock to the µs, for the age of a due time that has µs; Now
		// stays in ms, as the other server times.
		clock := parseScore(r[0])
		s := Stats{
			Now:       clock.Truncate(time.Millisecond),
			Scheduled: atoi(r[1]),
			Fired:     atoi(r[2]),
			Cancelled: atoi(r[3]),
			Overdue:   atoi(r[5]),
		}
		if r[4] != "" {
			s.EarliestDue = parseScore(r[4])
			if s.Overdue > 0 {
				s.OldestOverdueAge = clock.Sub(s.EarliestDue)
			}
		}
		total.Shards = append(total.Shards, s)
		if s.Now.After(total.Now) {
			total.Now = s.Now
		}
		total.Scheduled += s.Scheduled
		total.Fired += s.Fired
		total.Cancelled += s.Cancelled
		total.Overdue += s.Overdue
		if !s.EarliestDue.IsZero() && (total.EarliestDue.IsZero() || s.EarliestDue.Before(total.EarliestDue)) {
			total.EarliestDue = s.EarliestDue
		}
		total.OldestOverdueAge = max(total.OldestOverdueAge, s.OldestOverdueAge)
	}
	switch {
	case len(failed) == len(l.spaces):
		return Stats{}, errorf("stats: %w", errs[0])
	case failed != nil:
		return total, &ShardError{Failed: failed}
	}
	return total, nil
}
