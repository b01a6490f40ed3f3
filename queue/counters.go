package queue

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// LatenessBuckets are the upper bounds of the lateness buckets the claim
// scripts count in Counters (late_field in scripts/lua/includes, which
// TestLatenessBucketsMatchScripts holds to these for every script).
var LatenessBuckets = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second,
	10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute,
}

// Counters are the namespace's totals as Redis recorded them: every claim
// adds to them in the same atomic script that fires its timers, so they
// count the timers of a claim whose reply never reached its caller (a
// client timeout while Redis ran it) too. They only grow, and are never
// purged.
type Counters struct {
	// Fired counts every timer fired in the namespace.
	Fired int64
	// LatenessSum is the summed lateness (fired time - due time, by the
	// server clock) of those timers.
	LatenessSum time.Duration
	// Lateness counts, for each bound of LatenessBuckets in order, the
	// timers fired at most that late: cumulative, as Prometheus histogram
	// buckets are. Those later than the last bound count only in Fired.
	Lateness []int64
	// OverlapSkipped counts the occurrences that consumer groups
	// acknowledged without handling because of their schedule's overlap
	// policy (OverlapSkip), over all groups.
	OverlapSkipped int64
	// Quarantined counts the records claims moved to the quarantine
	// (Quarantine.List), dropped ones included.
	Quarantined int64
	// DeadlineDeadLetters counts the fires dead-lettered because their
	// deadline (NewTimer.FireWithin, FireBy) had passed, or would have
	// before their next delivery, over all groups (ReasonDeadline): by
	// Lease, which does not hand them out, by Release, and by dispatchers,
	// which do not send them.
	DeadlineDeadLetters int64
}

// Counters reads the namespace's counters, summed over its shards, in one
// round trip (one pipeline).
func (in Inspector) Counters(ctx context.Context) (Counters, error) {
	q := in.q
	l, err := q.layout(ctx)
	if err != nil {
		return Counters{}, err
	}
	cmds := make([]*redis.MapStringStringCmd, len(l.spaces))
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, sp := range l.spaces {
			cmds[k] = p.HGetAll(ctx, sp.Counters())
		}
		return nil
	})
	if err != nil {
		return Counters{}, errorf("counters: %w", q.redisError(err))
	}
	num := func(field string) int64 {
		var sum int64
		for _, c := range cmds {
			n, _ := strconv.ParseInt(c.Val()[field], 10, 64)
			sum += n
		}
		return sum
	}
	c := Counters{
		Fired:       num("fired"),
		LatenessSum: time.Duration(num("late_sum_ms")) * time.Millisecond,
		Lateness:    make([]int64, len(LatenessBuckets)),

		OverlapSkipped:      num("overlap_skipped"),
		Quarantined:         num("quarantined"),
		DeadlineDeadLetters: num("dead_deadline"),
	}
	var sum int64
	for i, b := range LatenessBuckets {
		sum += num("late_le_" + strconv.FormatInt(b.Milliseconds(), 10))
		c.Lateness[i] = sum
	}
	return c, nil
}
