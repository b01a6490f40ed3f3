package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/timerq/timerq/scripts/lua"
)

// DueHorizonBounds are the offsets of the due horizon that timerq's tools
// report: timerworker's gauge timerq_namespace_due_timers (its label
// within is HorizonName of each), timerctl stats and the API's namespace
// stats. 0 counts the overdue timers.
var DueHorizonBounds = []time.Duration{0, time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

// maxHorizonBounds bounds the ZCOUNTs of one DueHorizon read, per shard.
const maxHorizonBounds = 16

// DueHorizon is how many scheduled timers come due within each of a few
// offsets from the Redis server's clock.
type DueHorizon struct {
	// Now is the Redis server's clock at the read, to the millisecond; with
	// several shards, the latest of theirs.
	Now time.Time
	// Within are the offsets asked for, in the order given.
	Within []time.Duration
	// Due[i] counts the scheduled timers due at or before Now+Within[i]:
	// cumulative, as Prometheus's le buckets, so the overdue timers are in
	// every count and Within 0 counts what Stats calls Overdue.
	Due []int64
	// Shards holds each shard's own counts (Shards[k].Shards is nil), each
	// by its own server's clock; one entry for an unsharded namespace.
	Shards []DueHorizon
}

// HorizonName is within as timerq's tools label it: "overdue" for 0, else
// the largest whole unit of w(eek), d(ay), h, m, s or ms: "1m", "36h", "1w".
func HorizonName(within time.Duration) string {
	if within == 0 {
		return "overdue"
	}
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{7 * 24 * time.Hour, "w"}, {24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if within%u.d == 0 {
			return strconv.FormatInt(int64(within/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(within.Milliseconds(), 10) + "ms"
}

// DueHorizon counts, for each offset w of within, the scheduled timers due
// at or before the server's now + w (DueHorizonBounds are timerq's). The
// offsets are whole milliseconds, at least 0, increasing, at most 16.
//
// It reads each shard once: one script (horizon.lua) that takes the
// server's TIME and runs one ZCOUNT per offset, O(len(within) * log N), the
// shards in one pipeline. Each shard's counts are of one instant by its
// server's clock; their sum is not one snapshot. When some shards fail, it
// returns the others' counts with a *ShardError, as Stats does.
func (in Inspector) DueHorizon(ctx context.Context, within []time.Duration) (DueHorizon, error) {
	q := in.q
	if len(within) == 0 || len(within) > maxHorizonBounds {
		return DueHorizon{}, fmt.Errorf("%w: due horizon: give 1 to %d offsets, got %d", ErrInvalidOptions, maxHorizonBounds, len(within))
	}
	args := make([]any, len(within))
	for i, w := range within {
		if w < 0 || w%time.Millisecond != 0 || i > 0 && w <= within[i-1] {
			return DueHorizon{}, fmt.Errorf("%w: due horizon offsets must be whole milliseconds, at least 0 and increasing, got %v", ErrInvalidOptions, within)
		}
		args[i] = w.Milliseconds()
	}
	l, err := q.layout(ctx)
	if err != nil {
		return DueHorizon{}, err
	}
	calls := make([]call, len(l.spaces))
	for k := range calls {
		calls[k] = call{shard: k, args: args}
	}
	replies, errs, err := q.runEach(ctx, l, lua.Horizon, calls)
	if err != nil {
		return DueHorizon{}, errorf("due horizon: %w", err)
	}
	total := DueHorizon{Within: within, Due: make([]int64, len(within))}
	var failed map[int]error
	for k, reply := range replies {
		if errs[k] != nil {
			if failed == nil {
				failed = map[int]error{}
			}
			failed[k] = errs[k]
			total.Shards = append(total.Shards, DueHorizon{Within: within, Due: make([]int64, len(within))})
			continue
		}
		r, err := replyStrings(reply)
		if err != nil || len(r) != len(within)+1 {
			return DueHorizon{}, errorf("due horizon: unexpected reply %v", reply)
		}
		s := DueHorizon{Now: parseScore(r[0]).Truncate(time.Millisecond), Within: within, Due: make([]int64, len(within))}
		for i := range within {
			s.Due[i] = atoi(r[i+1])
			total.Due[i] += s.Due[i]
		}
		if s.Now.After(total.Now) {
			total.Now = s.Now
		}
		total.Shards = append(total.Shards, s)
	}
	switch {
	case len(failed) == len(l.spaces):
		return DueHorizon{}, errorf("due horizon: %w", errs[0])
	case failed != nil:
		return total, &ShardError{Failed: failed}
	}
	return total, nil
}
