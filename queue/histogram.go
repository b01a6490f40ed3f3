package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// DueHistogram counts the scheduled timers in consecutive due-time buckets
// around now. With edges e1 < e2 < … < en (offsets from now), it returns
// n+2 counts: due at or before now (overdue, as Stats counts it), then due
// in (now, now+e1], (now+e1, now+e2], …, and last due after now+en.
//
// The counts come from one pipelined round trip of ZCOUNTs (per shard, summed); they are read
// only, O(log N) each, but not one atomic snapshot, so a claim running
// meanwhile may shift a timer between buckets. Pass Stats().Now as now to
// count by the server clock. When some shards fail, it returns the others'
// counts with a *ShardError, as Stats does.
func (in Inspector) DueHistogram(ctx context.Context, now time.Time, edges []time.Duration) ([]int64, error) {
	q := in.q
	for i, e := range edges {
		if e <= 0 || i > 0 && e <= edges[i-1] {
			return nil, fmt.Errorf("%w: histogram edges must be positive and increasing, got %v", ErrInvalidOptions, edges)
		}
	}
	l, err := q.layout(ctx)
	if err != nil {
		return nil, err
	}
	n := millis(now)
	per := len(edges) + 2
	cmds := make([]*redis.IntCmd, 0, per*len(l.spaces))
	q.learnLayouts(ctx, l)
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k := range l.spaces {
			due := l.space(k).Due()
			lo := "-inf"
			hi := fmt.Sprint(n)
			cmds = append(cmds, p.ZCount(ctx, due, lo, hi))
			for _, e := range edges {
				lo, hi = "("+hi, fmt.Sprint(n+e.Milliseconds())
				cmds = append(cmds, p.ZCount(ctx, due, lo, hi))
			}
			cmds = append(cmds, p.ZCount(ctx, due, "("+hi, PendingEnd))
		}
		return nil
	})
	if err != nil && len(l.spaces) == 1 {
		return nil, errorf("due histogram: %w", q.redisError(err))
	}
	out := make([]int64, per)
	var failed map[int]error
	for i, c := range cmds {
		if err := c.Err(); err != nil && failed[i/per] == nil {
			if failed == nil {
				failed = map[int]error{}
			}
			failed[i/per] = shardErr(l, i/per, q.redisError(err))
		}
	}
	for i, c := range cmds {
		if failed[i/per] == nil { // a shard counts whole or not at all
			out[i%per] += c.Val()
		}
	}
	switch {
	case len(failed) == len(l.spaces):
		return nil, errorf("due histogram: %w", failed[0])
	case failed != nil:
		// The counts of the shards that answered, as Stats does.
		return out, &ShardError{Failed: failed}
	}
	return out, nil
}
