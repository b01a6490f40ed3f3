package queue

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Target returns the name of the endpoint timer id delivers to
// (NewTimer.Endpoint), "" when none is known:
//
//   - a scheduled or cancelled timer's, as it was scheduled;
//   - a fired timer's, from the fire stream entry of the newest attempt in
//     its attempt log (Deliveries.Attempts), so "" while its fire has no
//     attempt yet, or once that entry was trimmed from the stream;
//   - "" for a timer that does not deliver.
//
// One round trip (HGET of the shard's deliveries and LRANGE of the last
// attempt), and one more (XRANGE of one entry) for a fired timer. An
// unknown timer is not an error: it has no target.
func (d Deliveries) Target(ctx context.Context, id string) (string, error) {
	q := d.q
	if err := ValidateID(id); err != nil {
		return "", err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return "", err
	}
	sp := l.spaces[l.shardOf(id)]
	var name *redis.StringCmd
	var last *redis.StringSliceCmd
	_, _ = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		name = p.HGet(ctx, sp.Deliveries(), id)
		last = p.LRange(ctx, sp.Attempts(id), -1, -1)
		return nil
	})
	for _, err := range []error{name.Err(), last.Err()} {
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", errorf("delivery target of %s: %w", id, q.redisError(err))
		}
	}
	if n := name.Val(); n != "" {
		// The name alone, without the timer's URL or flow key.
		ep, _ := splitDeliver(n)
		return ep, nil
	}
	if len(last.Val()) == 0 {
		return "", nil
	}
	a, err := decodeAttempt(id, last.Val()[0])
	if err != nil {
		return "", err
	}
	if _, _, ok := parseEntryID(a.StreamID); !ok {
		return "", nil // an attempt logged before attempts carried their entry
	}
	ms, err := q.rdb.XRangeN(ctx, sp.Fires(), a.StreamID, a.StreamID, 1).Result()
	if err != nil {
		return "", errorf("delivery target of %s: %w", id, q.redisError(err))
	}
	if len(ms) == 0 {
		return "", nil
	}
	ev, _ := parseEvent(ms[0], 0)
	return ev.Endpoint, nil
}
