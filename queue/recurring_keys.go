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

// ScheduleShard returns the shard the recurring schedule id lives in, with
// its occurrences.
func (en Engine) ScheduleShard(ctx context.Context, id string) (int, error) {
	q := en.q
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
