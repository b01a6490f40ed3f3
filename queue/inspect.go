package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/scripts/lua"
)

// This file is the read side that dashboards and operators use: the fire
// stream read without joining a consumer group, the groups' progress, and
// the dead-letter stream with its one write, Requeue.

var requeueScript = redis.NewScript(lua.Requeue)

// RecentFires returns up to count (1..MaxBatch) of the newest fire events,
// newest first. It reads the fire stream without a consumer group, so no
// consumer sees a difference. Attempt is 0 in the events it returns.
func (q *Queue) RecentFires(ctx context.Context, count int) ([]Event, error) {
	if count < 1 || count > MaxBatch {
		return nil, fmt.Errorf("%w: count %d is outside 1..%d", ErrInvalidOptions, count, MaxBatch)
	}
	msgs, err := q.rdb.XRevRangeN(ctx, q.StreamKey(), "+", "-", int64(count)).Result()
	if err != nil {
		return nil, errorf("recent fires: %w", q.redisError(err))
	}
	return viewEvents(msgs), nil
}

// ReadFires returns up to count (1..MaxBatch) fire events added after the
// stream entry ID after, oldest first, waiting up to block for the first
// one when there is none yet (0 does not wait). Pass the StreamID of the
// last event seen to follow the stream; "0" reads from the start, and the
// newest StreamID from RecentFires follows it from now on. Like RecentFires
// it joins no consumer group. It returns an empty slice, not an error, when
// block passes with nothing new.
func (q *Queue) ReadFires(ctx context.Context, after string, count int, block time.Duration) ([]Event, error) {
	if count < 1 || count > MaxBatch {
		return nil, fmt.Errorf("%w: count %d is outside 1..%d", ErrInvalidOptions, count, MaxBatch)
	}
	if after == "" || after == "$" {
		// "$" would skip an entry added between two calls; callers must
		// resolve it once (RecentFires) and pass IDs from then on.
		return nil, fmt.Errorf("%w: ReadFires needs a stream entry ID; use \"0\" or an event's StreamID", ErrInvalidOptions)
	}
	args := &redis.XReadArgs{Streams: []string{q.StreamKey(), after}, Count: int64(count), Block: -1}
	if block > 0 {
		args.Block = block
	}
	res, err := q.rdb.XRead(ctx, args).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, errorf("read fires: %w", q.redisError(err))
	}
	var out []Event
	for _, s := range res {
		out = append(out, viewEvents(s.Messages)...)
	}
	return out, nil
}

// viewEvents decodes fire stream entries for display: a malformed entry is
// shown with the fields it has rather than dropped.
func viewEvents(msgs []redis.XMessage) []Event {
	out := make([]Event, 0, len(msgs))
	for _, m := range msgs {
		ev, _ := parseEvent(m, 0)
		out = append(out, ev)
	}
	return out
}

// GroupInfo is the progress of one consumer group of the fire stream.
type GroupInfo struct {
	Name string
	// Consumers is how many consumers the group has seen.
	Consumers int64
	// Pending counts entries delivered to a consumer and not yet
	// acknowledged (being handled, waiting for a retry, or held by a dead
	// consumer until ClaimIdle passes).
	Pending int64
	// LastDeliveredID is the newest fire stream entry delivered to the group.
	LastDeliveredID string
	// Lag counts the entries in the stream not yet delivered to the group;
	// -1 when Redis cannot tell (after trimming or an XDEL, see XINFO GROUPS).
	Lag int64
}

// Groups lists the consumer groups of the fire stream, by name; none when
// the stream does not exist.
func (q *Queue) Groups(ctx context.Context) ([]GroupInfo, error) {
	gs, err := q.rdb.XInfoGroups(ctx, q.StreamKey()).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return nil, nil
		}
		return nil, errorf("groups: %w", q.redisError(err))
	}
	out := make([]GroupInfo, len(gs))
	for i, g := range gs {
		out[i] = GroupInfo{Name: g.Name, Consumers: g.Consumers, Pending: g.Pending, LastDeliveredID: g.LastDeliveredID, Lag: g.Lag}
	}
	// Redis lists groups by name; miniredis in creation order.
	slices.SortFunc(out, func(a, b GroupInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeadLetter is one entry of the dead-letter stream.
type DeadLetter struct {
	// Event is the fire event whose handler gave up; StreamID is the
	// dead letter's own entry ID, which Requeue takes.
	Event Event
	// Error is the handler's last error.
	Error string
	// Attempts is how many deliveries the event had.
	Attempts int
	// Group and Consumer name who gave up.
	Group, Consumer string
	// FireStreamID is the event's entry ID in the fire stream.
	FireStreamID string
}

// DeadLetters returns up to count (1..MaxBatch) dead letters after the
// entry ID after ("" starts at the oldest), oldest first, and the cursor of
// the next page ("" on the last page).
func (q *Queue) DeadLetters(ctx context.Context, after string, count int) ([]DeadLetter, string, error) {
	if count < 1 || count > MaxBatch {
		return nil, "", fmt.Errorf("%w: count %d is outside 1..%d", ErrInvalidOptions, count, MaxBatch)
	}
	start := "-"
	if after != "" {
		start = "(" + after
	}
	msgs, err := q.rdb.XRangeN(ctx, q.DeadLetterKey(), start, "+", int64(count)+1).Result()
	if err != nil {
		return nil, "", errorf("dead letters: %w", q.redisError(err))
	}
	next := ""
	if len(msgs) > count {
		msgs = msgs[:count]
		next = msgs[count-1].ID
	}
	out := make([]DeadLetter, len(msgs))
	for i, m := range msgs {
		str := func(k string) string { s, _ := m.Values[k].(string); return s }
		ev, _ := parseEvent(m, 0)
		n, _ := strconv.Atoi(str("attempts"))
		out[i] = DeadLetter{Event: ev, Error: str("error"), Attempts: n, Group: str("group"),
			Consumer: str("consumer"), FireStreamID: str("stream_id")}
	}
	return out, next, nil
}

// DeadLetterCount returns the length of the dead-letter stream.
func (q *Queue) DeadLetterCount(ctx context.Context) (int64, error) {
	n, err := q.rdb.XLen(ctx, q.DeadLetterKey()).Result()
	if err != nil {
		return 0, errorf("dead letters: %w", q.redisError(err))
	}
	return n, nil
}

// Requeue moves the dead letter deadID back onto the fire stream, in one
// atomic script, and returns the new fire stream entry's ID. Only the group
// that dead-lettered it handles it again, as a new delivery (Attempt 1);
// Consume in every other group acknowledges and skips it. An unknown deadID
// gives ErrDeadLetterNotFound, so requeueing twice is safe.
//
// The timer itself stays fired: Requeue repeats the delivery, not the fire.
func (q *Queue) Requeue(ctx context.Context, deadID string) (string, error) {
	if deadID == "" {
		return "", fmt.Errorf("%w: empty dead letter ID", ErrInvalidOptions)
	}
	reply, err := requeueScript.Run(ctx, q.rdb, []string{q.StreamKey(), q.DeadLetterKey()}, deadID).Result()
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
		return "", fmt.Errorf("%w: %s is not in %s; it may have been requeued already", ErrDeadLetterNotFound, deadID, q.DeadLetterKey())
	}
	return r[1], nil
}
