package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// RecurringListOptions selects a page of schedules. The zero value lists
// the first 100.
type RecurringListOptions struct {
	// Limit is about the page size, 1..MaxBatch: HSCAN takes it as a hint,
	// so a page may hold a few more; 0 means DefaultListLimit (100).
	Limit int
	// Cursor continues from a previous page's NextCursor; empty starts over.
	Cursor string
}

// RecurringPage is one page of RecurringTimers.List.
type RecurringPage struct {
	Schedules []RecurringInfo
	// NextCursor fetches the next page; empty on the last page.
	NextCursor string
}

// List returns a page of schedules, in no particular order. Like HSCAN,
// which it uses, a schedule present for the whole listing is listed at
// least once. A sharded namespace is listed shard after shard, each page
// filled from as many shards as it takes; the cursor names the shard
// ("<shard>:<HSCAN cursor>"; with one shard, the HSCAN cursor alone).
func (rt RecurringTimers) List(ctx context.Context, o RecurringListOptions) (RecurringPage, error) {
	q := rt.q
	limit := o.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > MaxBatch {
		return RecurringPage{}, fmt.Errorf("%w: list limit %d is outside 1..%d", ErrInvalidOptions, limit, MaxBatch)
	}
	l, err := q.layout(ctx)
	if err != nil {
		return RecurringPage{}, errorf("list schedules: %w", err)
	}
	k, cur, err := parseRecurringCursor(o.Cursor, len(l.spaces))
	if err != nil {
		return RecurringPage{}, err
	}
	page := RecurringPage{}
	for k < len(l.spaces) && len(page.Schedules) < limit {
		kv, next, err := q.rdb.HScan(ctx, l.spaces[k].Schedules(), cur, "", int64(limit-len(page.Schedules))).Result()
		if err != nil {
			return RecurringPage{}, errorf("list schedules: %w", shardErr(l, k, q.redisError(err)))
		}
		if len(kv) > 0 {
			ids := make([]any, 0, 1+len(kv)/2)
			ids = append(ids, "ids")
			for i := 0; i < len(kv); i += 2 {
				ids = append(ids, kv[i])
			}
			now, order, recs, err := q.load(ctx, l, k, ids...)
			if err != nil {
				return RecurringPage{}, errorf("list schedules: %w", err)
			}
			for _, id := range order {
				if s := recs[id]; s != nil {
					page.Schedules = append(page.Schedules, s.info(now))
				}
			}
		}
		if cur = next; cur == 0 {
			k++
		}
	}
	switch {
	case k >= len(l.spaces):
	case len(l.spaces) == 1:
		page.NextCursor = strconv.FormatUint(cur, 10)
	default:
		page.NextCursor = strconv.Itoa(k) + ":" + strconv.FormatUint(cur, 10)
	}
	return page, nil
}

// parseRecurringCursor reads a RecurringTimers.List cursor of a namespace of
// shards shards.
func parseRecurringCursor(cursor string, shards int) (int, uint64, error) {
	if cursor == "" {
		return 0, 0, nil
	}
	shard, hscan, sharded := strings.Cut(cursor, ":")
	if !sharded {
		shard, hscan = "0", cursor
	}
	k, err1 := strconv.Atoi(shard)
	cur, err2 := strconv.ParseUint(hscan, 10, 64)
	if err1 != nil || err2 != nil || k < 0 || k >= shards || sharded != (shards > 1) {
		return 0, 0, fmt.Errorf("%w: cursor %q is not one that Recurring().List returned for this namespace; start with an empty cursor", ErrInvalidOptions, cursor)
	}
	return k, cur, nil
}
