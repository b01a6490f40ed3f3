package queue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/scripts/lua"
)

// recurScripts are the recurring-schedule scripts in one pub/sub flavour.
type recurScripts struct{ load, arm, put *redis.Script }

func newRecurScripts(sharded bool) *recurScripts {
	src := func(s string) *redis.Script {
		if sharded {
			s = lua.Sharded(s)
		}
		return redis.NewScript(s)
	}
	return &recurScripts{load: src(lua.RecurLoad), arm: src(lua.RecurArm), put: src(lua.RecurPut)}
}

var (
	classicRecurScripts = newRecurScripts(false)
	shardedRecurScripts = newRecurScripts(true)
)

// recurScripts returns the recurring scripts in the layout's pub/sub flavour.
func (l *layout) recurScripts() *recurScripts {
	if l.sharded {
		return shardedRecurScripts
	}
	return classicRecurScripts
}

// recurKeys returns the keys the recurring scripts take for shard k: the
// shard's timer keys, then its schedules hash and sched-due set
// (scripts/lua/recur_prelude.lua), all with the shard's hash tag. A
// schedule lives in the shard of its ID (keyspace.ScheduleShard) and its
// occurrences are routed there too (keyspace.ShardOf), so one script sees
// and writes a schedule and its occurrences in one Cluster slot.
func (l *layout) recurKeys(k int) []string {
	s := l.spaces[k]
	return append(s.Keys(), s.Schedules(), s.SchedDue())
}

// scheduleShard returns the shard the schedule id lives in.
func (l *layout) scheduleShard(id string) int { return keyspace.ScheduleShard(id, len(l.spaces)) }

// runRecur runs a recurring script on shard k, retrying while the shard's
// slot migrates, like the timer scripts.
func (q *Queue) runRecur(ctx context.Context, l *layout, s *redis.Script, k int, args ...any) (any, error) {
	return q.runKeys(ctx, l, s, k, l.recurKeys(k), migrationAttempts, args...)
}

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
