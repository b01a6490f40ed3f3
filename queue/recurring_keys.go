package queue

import (
	"context"
	"fmt"

	"github.com/timerq/timerq/internal/keyspace"
)

// scheduleShard returns the shard the schedule id lives in. A schedule
// lives in the shard of its ID (keyspace.ScheduleShard) and its
// occurrences are routed there too (keyspace.ShardOf), so one script sees
// and writes a schedule and its occurrences in one Cluster slot.
func (l *layout) scheduleShard(id string) int { return keyspace.ScheduleShard(id, len(l.spaces)) }

// RecurringKeys returns the two keys that hold shard 0's recurring
// schedules, which for an unsharded namespace are all of them: the
// schedules hash and the sched-due sorted set. Occurrences are ordinary
// timers in the keys Keys returns. A sharded namespace has these per shard
// (ShardRecurringKeys).
func (q *Queue) RecurringKeys() []string { return q.ShardRecurringKeys(0) }

// ShardRecurringKeys returns shard k's schedules hash and sched-due set.
func (q *Queue) ShardRecurringKeys(k int) []string {
	s := q.known().spaces[k]
	return []string{s.Schedules(), s.SchedDue()}
}

// ScheduleShard returns the shard the recurring schedule id lives in, with
// its occurrences.
func (q *Queue) ScheduleShard(ctx context.Context, id string) (int, error) {
	l, err := q.layout(ctx)
	if err != nil {
		return 0, err
	}
	return l.scheduleShard(id), nil
}

// checkShard validates a shard number given by a caller.
func checkShard(l *layout, k int) error {
	if k < 0 || k >= len(l.spaces) {
		return fmt.Errorf("%w: shard %d is outside 0..%d", ErrInvalidOptions, k, len(l.spaces)-1)
	}
	return nil
}
