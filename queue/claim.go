package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/timerq/timerq/scripts/lua"
)

// Fired is a timer that a claim fired.
type Fired struct {
	ID      string
	Due     time.Time
	FiredAt time.Time
	Payload []byte
}

// Lateness is how long after its due time the timer fired, by the server
// clock. It is never negative: timers never fire early.
func (f Fired) Lateness() time.Duration { return f.FiredAt.Sub(f.Due) }

// ClaimResult is the outcome of one Claim.
type ClaimResult struct {
	// Shard is the shard ClaimShard claimed from; -1 when Claim covered
	// several shards.
	Shard int
	// Now is the Redis server's clock when the claim ran, to the
	// millisecond: the fired_at of every timer it fired.
	Now time.Time
	// Clock is Now to the microsecond (zero when the claim does not say),
	// so that a poller can sleep until the next due time without adding
	// up to a millisecond of truncation to each sleep.
	Clock time.Time
	// Fired lists the timers fired by this claim, in due order within each
	// shard.
	Fired []Fired
	// Quarantined lists the records this claim moved to the quarantine
	// instead of firing them, because they are not records timerq writes
	// (see Quarantine.List). Each is reported by the one claim that moved
	// it, so a caller logs it once.
	Quarantined []QuarantineNotice
	// NextDue is the earliest due time still pending, or zero when no timer
	// is scheduled. A poller sleeps until then. When Claim stopped at its
	// limit before visiting every shard, it is Now: claim again.
	NextDue time.Time
}

// Claim fires up to limit (1..MaxBatch) due timers: each leaves the due set,
// is marked fired, gets an entry in the fire stream and a wakeup on its
// channel, in one atomic script per shard. However many callers race, each
// timer is fired by exactly one Claim. On a sharded namespace it visits the
// shards in turn until limit timers fired; pollers use ClaimShard instead.
func (en Engine) Claim(ctx context.Context, limit int) (ClaimResult, error) {
	q := en.q
	if err := checkLimit("claim", limit); err != nil {
		return ClaimResult{}, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return ClaimResult{}, err
	}
	if len(l.spaces) == 1 {
		return q.claimShard(ctx, l, 0, limit)
	}
	total := ClaimResult{Shard: -1}
	for k := range l.spaces {
		res, err := q.claimShard(ctx, l, k, limit-len(total.Fired))
		if err != nil {
			return total, err
		}
		total.Now, total.Clock = res.Now, res.Clock
		total.Fired = append(total.Fired, res.Fired...)
		total.Quarantined = append(total.Quarantined, res.Quarantined...)
		if !res.NextDue.IsZero() && (total.NextDue.IsZero() || res.NextDue.Before(total.NextDue)) {
			total.NextDue = res.NextDue
		}
		if len(total.Fired) == limit {
			if k < len(l.spaces)-1 || len(res.Fired) == limit {
				total.NextDue = total.Now
			}
			break
		}
	}
	slices.SortStableFunc(total.Fired, func(a, b Fired) int { return a.Due.Compare(b.Due) })
	return total, nil
}

// ClaimShard is Claim on one shard (0..Shards-1), as a poller that owns
// the shard calls it. While the shard's Cluster slot migrates it fails at
// once (TRYAGAIN, ASK, MOVED or CLUSTERDOWN in the error), so the caller
// can back off on this shard alone. Other calls retry such refusals for a
// few seconds themselves.
func (en Engine) ClaimShard(ctx context.Context, shard, limit int) (ClaimResult, error) {
	q := en.q
	if err := checkLimit("claim", limit); err != nil {
		return ClaimResult{}, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return ClaimResult{}, err
	}
	if shard < 0 || shard >= len(l.spaces) {
		return ClaimResult{}, fmt.Errorf("%w: shard %d is outside 0..%d", ErrInvalidOptions, shard, len(l.spaces)-1)
	}
	return q.claimShard(ctx, l, shard, limit)
}

func checkLimit(what string, limit int) error {
	if limit < 1 || limit > MaxBatch {
		return fmt.Errorf("%w: %s limit %d is outside 1..%d", ErrInvalidOptions, what, limit, MaxBatch)
	}
	return nil
}

func (q *Queue) claimShard(ctx context.Context, l *layout, k, limit int) (ClaimResult, error) {
	// One try: while the shard's slot migrates, the caller (a poller's
	// loop for this shard) backs off and counts the pause itself, and the
	// other shards go on.
	start := time.Now()
	res, tps, err := q.claimOnce(ctx, l, k, limit)
	q.traceClaim(ctx, k, limit, start, res, tps, err)
	return res, err
}

// claimOnce runs claim.lua once on shard k. It returns the traceparent of
// each fired timer too, in tps, or nil when none was traced.
func (q *Queue) claimOnce(ctx context.Context, l *layout, k, limit int) (res ClaimResult, tps []string, _ error) {
	if l.replicas > 0 {
		return q.claimHeld(ctx, l, k, limit)
	}
	reply, err := q.runTries(ctx, l, lua.Claim, k, 1, limit, q.opts.retentionMillis(), q.opts.streamMaxLen(),
		l.spaces[k].TimerChannelPrefix())
	if err != nil {
		return ClaimResult{}, nil, errorf("claim: %w", err)
	}
	r, err := replyStrings(reply)
	if err != nil || len(r) < 3 {
		return ClaimResult{}, nil, errorf("claim: unexpected reply %v", reply)
	}
	nq := int(atoi(r[2]))
	if nq < 0 || len(r) < 3+2*nq || (len(r)-3-2*nq)%4 != 0 {
		return ClaimResult{}, nil, errorf("claim: unexpected reply %v", reply)
	}
	ms, us, _ := strings.Cut(r[0], ".")
	res = ClaimResult{Shard: k, Now: fromMillis(atoi(ms))}
	res.Clock = res.Now.Add(time.Duration(atoi(us)) * time.Microsecond)
	if r[1] != "" {
		res.NextDue = parseScore(r[1])
	}
	for i := range nq {
		res.Quarantined = append(res.Quarantined, QuarantineNotice{ID: r[3+2*i], Shard: k, Reason: r[4+2*i]})
	}
	r = r[3+2*nq:]
	if n := len(r) / 4; n > 0 {
		res.Fired = make([]Fired, n)
		for i := range res.Fired {
			f := r[4*i:]
			res.Fired[i] = Fired{ID: f[0], Due: fromMillis(atoi(f[1])), FiredAt: res.Now, Payload: []byte(f[2])}
			if f[3] != "" {
				if tps == nil {
					tps = make([]string, n)
				}
				tps[i] = f[3]
			}
		}
	}
	return res, tps, nil
}

// Purge removes up to limit (1..MaxBatch) fired and cancelled records whose
// retention has passed, over every shard, and reports how many it removed
// and whether more are waiting. Once purged, a timer's ID reads as not
// found and may be scheduled again. It is idempotent, so overlapping
// callers are safe.
func (en Engine) Purge(ctx context.Context, limit int) (removed int, more bool, err error) {
	q := en.q
	if err := checkLimit("purge", limit); err != nil {
		return 0, false, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return 0, false, err
	}
	for k := range l.spaces {
		if removed == limit {
			return removed, true, nil
		}
		reply, err := q.run(ctx, l, lua.Purge, k, limit-removed, q.opts.retentionMillis())
		if err != nil {
			return removed, false, errorf("purge: %w", err)
		}
		r, err := replyStrings(reply)
		if err != nil || len(r) != 2 {
			return removed, false, errorf("purge: unexpected reply %v", reply)
		}
		removed += int(atoi(r[0]))
		more = more || atoi(r[1]) > 0
	}
	return removed, more, nil
}
