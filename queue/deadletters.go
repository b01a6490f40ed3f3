package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/scripts/lua"
)

// DeadLetter is one entry of a dead-letter stream.
type DeadLetter struct {
	// Event is the fire event whose handler gave up; its StreamID is the
	// dead letter's own entry ID and its Shard the shard whose dead-letter
	// stream holds it, which Deliveries.Requeue takes. Its Owner, Epoch,
	// Labels and Deadline are the fire's, as Lease handed them out.
	Event Event
	// Error is the handler's last error.
	Error string
	// Attempts is how many deliveries the event had.
	Attempts int
	// Group and Consumer name who gave up: Consumer is the consumer that
	// held the delivery when it died (released it for the last time, or
	// let its last lease run out), never the one that found it expired.
	Group, Consumer string
	// FireStreamID is the event's entry ID in its shard's fire stream.
	FireStreamID string
}

// DeadLetterListOptions selects a page of dead letters. The zero value
// lists the oldest 100.
type DeadLetterListOptions struct {
	// Limit is the page size, 1..MaxBatch; 0 means DefaultListLimit (100).
	Limit int
	// Cursor continues from a previous page's NextCursor; empty starts at
	// the oldest dead letter, as "0" does.
	Cursor string
}

// DeadLetterPage is one page of Deliveries.DeadLetters.
type DeadLetterPage struct {
	// DeadLetters are ordered oldest first, over every shard.
	DeadLetters []DeadLetter
	// NextCursor fetches the next page; empty on the last page.
	NextCursor string
}

// DeadLetters returns one page of the dead letters of every shard, oldest
// first.
//
// In a namespace of several shards it reads as pageStreams does: about a
// page of entries in all, however the dead letters are spread, rather than
// a page from every shard.
func (d Deliveries) DeadLetters(ctx context.Context, o DeadLetterListOptions) (DeadLetterPage, error) {
	q := d.q
	l, pos, count, err := q.openStreams(ctx, o.Limit, o.Cursor, true)
	if err != nil {
		return DeadLetterPage{}, err
	}
	from := make([]string, len(pos))
	for k, id := range pos {
		from[k] = "(" + id
		if id == "0-0" {
			from[k] = "-"
		}
	}
	out, next, err := pageStreams(ctx, q, streamPage[DeadLetter]{
		stream:    func(k int) string { return l.spaces[k].DeadLetter() },
		from:      from,
		decode:    parseDeadLetters,
		compare:   func(a, b DeadLetter) int { return compareEntryIDs(a.Event, b.Event) },
		limit:     count,
		lookahead: true,
	})
	if err != nil {
		return DeadLetterPage{}, errorf("dead letters: %w", q.redisError(err))
	}
	if !next {
		return DeadLetterPage{DeadLetters: out}, nil
	}
	for _, d := range out {
		pos[d.Event.Shard] = d.Event.StreamID
	}
	return DeadLetterPage{DeadLetters: out, NextCursor: strings.Join(pos, ",")}, nil
}

// parseDeadLetters decodes shard k's dead-letter stream entries.
func parseDeadLetters(msgs []redis.XMessage, k int) []DeadLetter {
	out := make([]DeadLetter, 0, len(msgs))
	for _, m := range msgs {
		str := func(f string) string { s, _ := m.Values[f].(string); return s }
		ev, _ := parseEvent(m, 0)
		ev.Shard = k
		n, _ := strconv.Atoi(str("attempts"))
		out = append(out, DeadLetter{Event: ev, Error: str("error"), Attempts: n, Group: str("group"),
			Consumer: str("consumer"), FireStreamID: str("stream_id")})
	}
	return out
}

// DeadLetterCount returns how many dead letters the namespace holds, over
// every shard.
func (d Deliveries) DeadLetterCount(ctx context.Context) (int64, error) {
	q := d.q
	l, err := q.layout(ctx)
	if err != nil {
		return 0, err
	}
	cmds := make([]*redis.IntCmd, len(l.spaces))
	err = q.each(ctx, len(l.spaces), func(c redis.Cmdable, k int) redis.Cmder {
		cmds[k] = c.XLen(ctx, l.spaces[k].DeadLetter())
		return cmds[k]
	})
	if err != nil {
		return 0, errorf("dead letters: %w", q.redisError(err))
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

// Requeue moves the dead letter deadID of shard shard (a DeadLetter's
// Event.StreamID and Event.Shard; the shard is 0 in a namespace of one
// shard) back onto that shard's fire stream, in one atomic script, and
// returns the new fire stream entry's ID. Only the group that
// dead-lettered it handles it again, as a new delivery (Attempt 1); Consume
// in every other group acknowledges and skips it. An unknown deadID gives
// ErrDeadLetterNotFound, so requeueing twice is safe.
//
// The timer itself stays fired: Requeue repeats the delivery, not the fire.
func (d Deliveries) Requeue(ctx context.Context, shard int, deadID string) (string, error) {
	q := d.q
	if _, _, ok := parseEntryID(deadID); !ok {
		return "", fmt.Errorf("%w: dead letter ID %q is not a stream entry ID such as 1700000000000-0", ErrInvalidOptions, deadID)
	}
	l, err := q.layout(ctx)
	if err != nil {
		return "", err
	}
	if shard < 0 || shard >= len(l.spaces) {
		return "", fmt.Errorf("%w: shard %d is outside 0..%d of namespace %q", ErrInvalidOptions, shard, len(l.spaces)-1, q.opts.Namespace)
	}
	sp := l.spaces[shard]
	reply, err := q.runScript(ctx, q.rdb, classic(lua.Requeue), lua.Requeue.Keys(sp, ""), deadID).Result()
	if err != nil {
		if strings.Contains(err.Error(), "Invalid stream ID") {
			return "", fmt.Errorf("%w: %q is not a stream entry ID such as 1700000000000-0", ErrInvalidOptions, deadID)
		}
		return "", errorf("requeue %s: %w", deadID, q.redisError(err))
	}
	r, err := replyStrings(reply)
	if err != nil || len(r) != 2 {
		return "", errorf("requeue %s: unexpected reply %v", deadID, reply)
	}
	if r[0] == "notfound" {
		return "", fmt.Errorf("%w: %s is not in %s; it may have been requeued already", ErrDeadLetterNotFound, deadID, sp.DeadLetter())
	}
	return r[1], nil
}
