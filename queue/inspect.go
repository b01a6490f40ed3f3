package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/sleep"
)

// This file is the read side that dashboards and operators use: the fire
// streams read without joining a consumer group, and the groups' progress.
// The dead-letter streams, with their one write, Requeue, are in
// deadletters.go.
//
// A namespace of several shards has a fire stream and a dead-letter stream
// per shard, each with its own entry IDs. The readers here read every shard
// in one pipeline and merge the entries by time. A position in a
// namespace's streams is a cursor: with one shard it is the stream entry ID
// itself (so an Event's StreamID is a cursor), and with several it is one
// entry ID per shard, joined by commas in shard order.

// fireReadPoll is how often ReadFires looks again while it blocks on a
// sharded namespace over a Redis Cluster, where one XREAD cannot block on
// streams in different slots.
const fireReadPoll = 200 * time.Millisecond

// RecentFires returns up to count (1..MaxBatch) of the newest fire events
// of every shard, newest first, and the cursor just after the newest entry
// of each shard's fire stream, from which ReadFires follows the streams
// with nothing skipped or shown twice. It reads without a consumer group,
// so no consumer sees a difference. Attempt is 0 in the events it returns.
//
// A sharded namespace's shards are read as pageStreams reads them: about
// 1.5 count entries in one round trip when fires are spread over the
// shards, and about 2.5 count in two when one shard fired them all.
func (in Inspector) RecentFires(ctx context.Context, count int) (events []Event, cursor string, err error) {
	q := in.q
	if err := checkCount(count); err != nil {
		return nil, "", err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return nil, "", err
	}
	n := len(l.spaces)
	ends := make([]string, n)
	from := make([]string, n)
	for k := range from {
		from[k] = "+"
	}
	events, _, err = pageStreams(ctx, q, streamPage[Event]{
		stream:  func(k int) string { return l.spaces[k].Fires() },
		from:    from,
		reverse: true,
		decode: func(msgs []redis.XMessage, k int) []Event {
			if ends[k] == "" && len(msgs) > 0 {
				ends[k] = msgs[0].ID // the newest entry, from the first read
			}
			return viewEvents(msgs, k)
		},
		compare: func(a, b Event) int { return compareFires(b, a) }, // newest first
		limit:   count,
	})
	if err != nil {
		return nil, "", errorf("recent fires: %w", q.redisError(err))
	}
	for k := range ends {
		if ends[k] == "" {
			ends[k] = "0-0"
		}
	}
	return events, strings.Join(ends, ","), nil
}

// streamPage is what pageStreams reads: one stream per shard, each from a
// position, merged into one page.
type streamPage[T any] struct {
	stream func(k int) string // shard k's stream
	// from is where each shard's read starts, as XRANGE (or, if reverse,
	// XREVRANGE) takes it: "-", "+" or "(" and an entry ID.
	from    []string
	reverse bool
	decode  func(msgs []redis.XMessage, k int) []T
	// compare orders the page; it must agree with each stream's read order.
	compare func(a, b T) int
	limit   int
	// lookahead reads one entry more than limit in all, so that more tells
	// whether there is a next page.
	lookahead bool
}

// pageStreams returns up to p.limit entries of every shard's stream, merged
// by p.compare, and, where p.lookahead, whether entries remain after them.
//
// With several shards it reads in rounds of one pipeline each: first each
// shard's share of the page and a margin, then the rest of the page only
// from a shard that ran out before the page was merged (one more read of it
// settles it). That is about 1.5 pages in one round trip when entries are
// spread over the shards, and about 2.5 in two when one shard holds them
// all, rather than a page from every shard.
func pageStreams[T any](ctx context.Context, q *Queue, p streamPage[T]) (out []T, more bool, err error) {
	n := len(p.from)
	type shard struct {
		buf  []T    // fetched, in read order, not yet merged
		from string // where the next read starts
		more bool   // the stream may hold entries not yet read
	}
	shards := make([]shard, n)
	for k := range shards {
		shards[k] = shard{from: p.from[k], more: true}
	}
	want := p.limit
	if p.lookahead {
		want++ // one more, to tell whether there is a next page
	}
	chunk := want
	if n > 1 {
		chunk = min(want, p.limit/n+p.limit/(2*n)+8)
	}
	for round := 0; ; round++ {
		full := len(out) == p.limit
		if full && !p.lookahead {
			break
		}
		var need []int
		for k, s := range shards {
			if len(s.buf) == 0 && s.more {
				need = append(need, k)
			}
		}
		if len(need) > 0 {
			if round > 0 {
				chunk = want - len(out)
			}
			cmds := make([]*redis.XMessageSliceCmd, len(need))
			err := q.each(ctx, len(need), func(c redis.Cmdable, i int) redis.Cmder {
				k := need[i]
				if p.reverse {
					cmds[i] = c.XRevRangeN(ctx, p.stream(k), shards[k].from, "-", int64(chunk))
				} else {
					cmds[i] = c.XRangeN(ctx, p.stream(k), shards[k].from, "+", int64(chunk))
				}
				return cmds[i]
			})
			if err != nil {
				return nil, false, err
			}
			for i, k := range need {
				msgs := cmds[i].Val()
				s := &shards[k]
				s.buf, s.more = p.decode(msgs, k), len(msgs) == chunk
				if len(msgs) > 0 {
					s.from = "(" + msgs[len(msgs)-1].ID
				}
			}
			continue
		}
		if full {
			break
		}
		best := -1
		for k, s := range shards {
			if len(s.buf) > 0 && (best < 0 || p.compare(s.buf[0], shards[best].buf[0]) < 0) {
				best = k
			}
		}
		if best < 0 {
			break
		}
		out = append(out, shards[best].buf[0])
		shards[best].buf = shards[best].buf[1:]
	}
	for _, s := range shards {
		more = more || len(s.buf) > 0
	}
	return out, more, nil
}

// ReadFiresOptions says where ReadFires reads from and how long it waits.
// Its zero value is refused: a tail has no first page, so Cursor must say
// where to start.
type ReadFiresOptions struct {
	// Limit is the most events to return, 1..MaxBatch; 0 means
	// DefaultListLimit (100).
	Limit int
	// Cursor is the position to read after: "0" for the start of the
	// streams, the cursor Inspector.RecentFires returns to follow them from now on,
	// or a previous page's NextCursor. Empty is refused (ErrInvalidOptions),
	// and so is "$", which would skip an entry added between two calls.
	Cursor string
	// Block is how long to wait for the first event when none is there yet;
	// 0 does not wait.
	Block time.Duration
}

// FirePage is what one ReadFires returns.
type FirePage struct {
	// Events are ordered oldest first, over every shard; none when Block
	// passed with nothing new.
	Events []Event
	// NextCursor is the position after the last of Events, or the one
	// Cursor named when there are none; never empty, since the streams have
	// no last page.
	NextCursor string
}

// ReadFires returns the fire events added after o.Cursor, oldest first.
// When none is there yet it waits up to o.Block for the first one, and
// returns an empty page, not an error, when that passes with nothing new.
// Like Inspector.RecentFires it joins no consumer group.
//
// On a Redis Cluster a sharded namespace's streams are in different slots,
// which one blocking XREAD cannot span, so ReadFires reads them all without
// blocking every 200 ms until something arrives or o.Block passes.
func (q *Queue) ReadFires(ctx context.Context, o ReadFiresOptions) (FirePage, error) {
	l, pos, count, err := q.openStreams(ctx, o.Limit, o.Cursor, false)
	if err != nil {
		return FirePage{}, err
	}
	block := o.Block
	_, cluster := q.rdb.(*redis.ClusterClient)
	var streams [][]redis.XMessage
	if len(l.spaces) == 1 || !cluster {
		// One XREAD over every stream, blocking if asked.
		streams, err = q.readStreams(ctx, l, pos, count, block)
	} else {
		deadline := time.Now().Add(block)
		for {
			streams, err = q.readShardStreams(ctx, l, pos, count)
			wait := time.Until(deadline)
			if err != nil || wait <= 0 || anyEntries(streams) {
				break
			}
			if !sleep.For(ctx, min(wait, fireReadPoll)) {
				err = ctx.Err()
				break
			}
		}
	}
	if err != nil {
		return FirePage{}, errorf("read fires: %w", q.redisError(err))
	}
	shards := make([][]Event, len(streams))
	for k, msgs := range streams {
		shards[k] = viewEvents(msgs, k)
	}
	events := mergeShards(shards, compareFires, count)
	for _, ev := range events {
		pos[ev.Shard] = ev.StreamID
	}
	return FirePage{Events: events, NextCursor: strings.Join(pos, ",")}, nil
}

// readStreams reads every shard's fire stream after its position in one
// XREAD, which a server that is not a Cluster takes over any keys.
func (q *Queue) readStreams(ctx context.Context, l *layout, pos []string, count int, block time.Duration) ([][]redis.XMessage, error) {
	args := &redis.XReadArgs{Count: int64(count), Block: -1}
	shardOf := make(map[string]int, len(l.spaces))
	for k, sp := range l.spaces {
		args.Streams = append(args.Streams, sp.Fires())
		shardOf[sp.Fires()] = k
	}
	args.Streams = append(args.Streams, pos...)
	if block > 0 {
		args.Block = block
	}
	res, err := q.rdb.XRead(ctx, args).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([][]redis.XMessage, len(l.spaces))
	for _, s := range res {
		out[shardOf[s.Stream]] = s.Messages
	}
	return out, nil
}

// readShardStreams reads every shard's fire stream after its position, one
// XREAD per shard without blocking, in one pipeline (which go-redis splits
// by node on a Cluster).
func (q *Queue) readShardStreams(ctx context.Context, l *layout, pos []string, count int) ([][]redis.XMessage, error) {
	cmds := make([]*redis.XStreamSliceCmd, len(l.spaces))
	err := q.each(ctx, len(l.spaces), func(c redis.Cmdable, k int) redis.Cmder {
		cmds[k] = c.XRead(ctx, &redis.XReadArgs{Streams: []string{l.spaces[k].Fires(), pos[k]}, Count: int64(count), Block: -1})
		return cmds[k]
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([][]redis.XMessage, len(l.spaces))
	for k, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		for _, s := range c.Val() {
			out[k] = append(out[k], s.Messages...)
		}
	}
	return out, nil
}

// each runs n commands, cmd(c, 0) … cmd(c, n-1), and returns the first
// one's error: in one pipeline when n > 1 (go-redis splits it by node on a
// Cluster), and directly when n is 1, because go-redis serves pipelines from
// a pool of connections of their own, which one command need not open.
func (q *Queue) each(ctx context.Context, n int, cmd func(c redis.Cmdable, i int) redis.Cmder) error {
	if n == 1 {
		return cmd(q.rdb, 0).Err()
	}
	_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			cmd(p, i)
		}
		return nil
	})
	return err
}

func anyEntries(streams [][]redis.XMessage) bool {
	for _, s := range streams {
		if len(s) > 0 {
			return true
		}
	}
	return false
}

func checkCount(count int) error {
	if count < 1 || count > MaxBatch {
		return fmt.Errorf("%w: count %d is outside 1..%d", ErrInvalidOptions, count, MaxBatch)
	}
	return nil
}

// openStreams starts a page of the streams (ReadFires, DeadLetters): it
// checks the page size limit (0 means DefaultListLimit), reads the layout
// and the position in each shard's stream that cursor names, as
// parseStreamCursor does, and returns them with the page size.
func (q *Queue) openStreams(ctx context.Context, limit int, cursor string, emptyIsStart bool) (*layout, []string, int, error) {
	if limit == 0 {
		limit = DefaultListLimit
	}
	if err := checkCount(limit); err != nil {
		return nil, nil, 0, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	pos, err := parseStreamCursor(cursor, len(l.spaces), emptyIsStart)
	if err != nil {
		return nil, nil, 0, err
	}
	return l, pos, limit, nil
}

// parseStreamCursor splits a cursor into one stream entry ID per shard. "0"
// stands for the start of every shard; "" does too where emptyIsStart
// (DeadLetters' first page) and is refused elsewhere.
func parseStreamCursor(c string, shards int, emptyIsStart bool) ([]string, error) {
	if c == "0" || (c == "" && emptyIsStart) {
		pos := make([]string, shards)
		for k := range pos {
			pos[k] = "0-0"
		}
		return pos, nil
	}
	pos := strings.Split(c, ",")
	if len(pos) != shards {
		what := fmt.Sprintf("one stream entry ID per shard (%d), joined by commas", shards)
		if shards == 1 {
			what = "a stream entry ID such as 1700000000000-0"
		}
		if c == "" || c == "$" {
			// "$" would skip an entry added between two calls.
			return nil, fmt.Errorf("%w: empty or \"$\" cursor; pass \"0\" to start at the oldest entry, or the cursor Inspect().RecentFires returns", ErrInvalidOptions)
		}
		return nil, fmt.Errorf("%w: cursor %q is not %s; pass \"0\" or a cursor this namespace returned", ErrInvalidOptions, c, what)
	}
	for _, id := range pos {
		if _, _, ok := parseEntryID(id); !ok {
			return nil, fmt.Errorf("%w: cursor %q holds %q, which is not a stream entry ID such as 1700000000000-0", ErrInvalidOptions, c, id)
		}
	}
	return pos, nil
}

// parseEntryID splits a stream entry ID "ms-seq" (or "ms") into its parts.
func parseEntryID(id string) (ms, seq uint64, ok bool) {
	a, b, hasSeq := strings.Cut(id, "-")
	ms, err := strconv.ParseUint(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if hasSeq {
		if seq, err = strconv.ParseUint(b, 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return ms, seq, true
}

// mergeShards merges the shards' entries, each shard's in stream order,
// into up to limit entries ordered by compare. It takes the best of the
// shards' heads each time, so what it returns holds a prefix of every
// shard's entries, and a cursor built from it skips nothing even where
// compare and a stream's order disagree (a requeued fire keeps its old
// FiredAt).
func mergeShards[T any](shards [][]T, compare func(a, b T) int, limit int) []T {
	var out []T
	heads := make([]int, len(shards))
	for len(out) < limit {
		best := -1
		for k, s := range shards {
			if heads[k] < len(s) && (best < 0 || compare(s[heads[k]], shards[best][heads[best]]) < 0) {
				best = k
			}
		}
		if best < 0 {
			break
		}
		out = append(out, shards[best][heads[best]])
		heads[best]++
	}
	return out
}

// compareFires orders fire events of several shards by fire time (by the
// Redis clock, as the claim read it), then as compareEntryIDs does. Entry
// IDs alone would not do: two shards' claims in one millisecond give
// sequence numbers that say nothing about which fired first.
func compareFires(a, b Event) int {
	return cmp.Or(a.FiredAt.Compare(b.FiredAt), compareEntryIDs(a, b))
}

// compareEntryIDs orders entries of several shards' streams by their IDs:
// the millisecond the server added them, then the sequence within that
// millisecond, then the shard. Across shards the sequence only interleaves
// entries of one millisecond, rather than take one shard's all first
// (which would cost RecentFires a round per shard).
func compareEntryIDs(a, b Event) int {
	ams, aseq, _ := parseEntryID(a.StreamID)
	bms, bseq, _ := parseEntryID(b.StreamID)
	return cmp.Or(cmp.Compare(ams, bms), cmp.Compare(aseq, bseq), cmp.Compare(a.Shard, b.Shard))
}

// viewEvents decodes shard k's fire stream entries for display: a
// malformed entry is shown with the fields it has rather than dropped.
func viewEvents(msgs []redis.XMessage, k int) []Event {
	out := make([]Event, 0, len(msgs))
	for _, m := range msgs {
		ev, _ := parseEvent(m, 0)
		ev.Shard = k
		out = append(out, ev)
	}
	return out
}

// GroupInfo is the progress of one consumer group of the fire streams.
type GroupInfo struct {
	Name string
	// Consumers is how many consumers the group has seen (on a sharded
	// namespace, on the shard where it has seen most).
	Consumers int64
	// Pending counts entries delivered to a consumer and not yet
	// acknowledged (being handled, waiting for a retry, or held by a dead
	// consumer until ClaimIdle passes), summed over the shards.
	Pending int64
	// LastDeliveredID is the newest fire stream entry delivered to the
	// group (on a sharded namespace, the newest of the shards').
	LastDeliveredID string
	// Lag counts the entries in the streams not yet delivered to the group,
	// summed over the shards; -1 when the server cannot tell for some
	// shard: Redis after an XDEL (see XINFO GROUPS), or a server that does
	// not track how far a group read (miniredis, as timerworker --dev
	// embeds it; Redis before 7.0).
	Lag int64
}

// Groups lists the consumer groups of the namespace's fire streams, by
// name, each summed over the shards; none when no stream exists.
func (in Inspector) Groups(ctx context.Context) ([]GroupInfo, error) {
	q := in.q
	l, err := q.layout(ctx)
	if err != nil {
		return nil, err
	}
	// XINFO GROUPS by hand: go-redis's XInfoGroups reads a missing or
	// null entries-read as 0, and a missing lag as 0.
	cmds := make([]*redis.Cmd, len(l.spaces))
	_ = q.each(ctx, len(l.spaces), func(c redis.Cmdable, k int) redis.Cmder {
		cmds[k] = c.(interface {
			Do(context.Context, ...any) *redis.Cmd
		}).Do(ctx, "XINFO", "GROUPS", l.spaces[k].Fires()) // a client or a pipeline
		return cmds[k]
	}) // each command's error is looked at below
	byName := map[string]*GroupInfo{}
	for _, c := range cmds {
		v, err := c.Result()
		if err != nil {
			if strings.Contains(err.Error(), "no such key") {
				continue // this shard has had no fire yet
			}
			return nil, errorf("groups: %w", q.redisError(err))
		}
		gs, err := parseXInfoGroups(v)
		if err != nil {
			return nil, errorf("groups: %w", err)
		}
		for _, g := range gs {
			if strings.HasPrefix(g.Name, keyspace.WakeGroupPrefix) {
				continue // where blocked Lease calls wait (awaitFires), not a group of the user's
			}
			sum, ok := byName[g.Name]
			if !ok {
				byName[g.Name] = &GroupInfo{Name: g.Name, Consumers: g.Consumers, Pending: g.Pending, LastDeliveredID: g.LastDeliveredID, Lag: g.Lag}
				continue
			}
			sum.Consumers = max(sum.Consumers, g.Consumers)
			sum.Pending += g.Pending
			if compareEntryIDs(Event{StreamID: g.LastDeliveredID}, Event{StreamID: sum.LastDeliveredID}) > 0 {
				sum.LastDeliveredID = g.LastDeliveredID
			}
			if sum.Lag < 0 || g.Lag < 0 {
				sum.Lag = -1
			} else {
				sum.Lag += g.Lag
			}
		}
	}
	out := make([]GroupInfo, 0, len(byName))
	for _, g := range byName {
		out = append(out, *g)
	}
	// Redis lists groups by name; miniredis in creation order.
	slices.SortFunc(out, func(a, b GroupInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// parseXInfoGroups reads XINFO GROUPS's reply, a list of groups, each a
// map (RESP3) or a flat list of fields and values (RESP2). A group's Lag
// is -1 when the server does not tell it: a null or missing lag (Redis
// after an XDEL it cannot see past; Redis before 7.0 has neither field),
// or a null entries-read of a group that has read something, which is how
// a server that does not track what a group read answers (miniredis, which
// then gives the stream's whole length as the lag). Redis 7 reports a
// null entries-read only before a group's first read, with a lag that is
// right; after it, a number or a null lag.
func parseXInfoGroups(v any) ([]redis.XInfoGroup, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("XINFO GROUPS replied %T, not a list", v)
	}
	out := make([]redis.XInfoGroup, 0, len(list))
	for _, item := range list {
		fields := map[string]any{}
		switch g := item.(type) {
		case map[any]any:
			for k, v := range g {
				name, _ := k.(string)
				fields[name] = v
			}
		case []any:
			for i := 0; i+1 < len(g); i += 2 {
				name, _ := g[i].(string)
				fields[name] = g[i+1]
			}
		default:
			return nil, fmt.Errorf("XINFO GROUPS replied a group as %T", item)
		}
		num := func(name string) (int64, bool) {
			n, ok := fields[name].(int64)
			return n, ok
		}
		g := redis.XInfoGroup{Lag: -1}
		g.Name, _ = fields["name"].(string)
		g.LastDeliveredID, _ = fields["last-delivered-id"].(string)
		g.Consumers, _ = num("consumers")
		g.Pending, _ = num("pending")
		read, tracked := num("entries-read")
		_, reported := fields["entries-read"]
		switch lag, ok := num("lag"); {
		case !ok, !reported:
			// Redis cannot tell (null), or the server predates lag.
		case !tracked && strings.Trim(g.LastDeliveredID, "0-") != "": // not 0-0 (miniredis: 0)
			// The group has read, yet its entries-read is null: Redis 7
			// counts it from the first read on (or also answers a null
			// lag), so this server does not track it.
		default:
			g.EntriesRead, g.Lag = read, lag
		}
		out = append(out, g)
	}
	return out, nil
}

// ConsumerInfo is one consumer of a group, as XINFO CONSUMERS reports it,
// over the shards.
type ConsumerInfo struct {
	Name string
	// Pending counts the entries delivered to it and not yet acknowledged,
	// summed over the shards.
	Pending int64
	// Idle is XINFO CONSUMERS' idle, on the shard where it is least. On
	// Redis 7.2 and later it is how long ago the consumer last tried to
	// read or claim; Consume tries at least every ConsumeOptions.Block,
	// so an Idle of minutes there means the consumer stopped or died. On
	// Redis 7.0 a read or claim that gets nothing does not reset it, so it
	// is how long ago the consumer last got an entry, and a live consumer
	// of a quiet stream looks as idle as a dead one. A consumer's name
	// stays until XGROUP DELCONSUMER.
	Idle time.Duration
	// Inactive is how long ago it last got an entry (read or claimed one),
	// on the shard where it is least; -1 when it never has. Only Redis 7.2
	// and later report it: InactiveKnown says whether this one did.
	Inactive      time.Duration
	InactiveKnown bool
}

// Consumers lists the consumers of group on the namespace's fire streams,
// by name, each summed over the shards; none when no shard has the group.
func (in Inspector) Consumers(ctx context.Context, group string) ([]ConsumerInfo, error) {
	q := in.q
	l, err := q.layout(ctx)
	if err != nil {
		return nil, err
	}
	cmds := make([]*redis.Cmd, len(l.spaces))
	_ = q.each(ctx, len(l.spaces), func(c redis.Cmdable, k int) redis.Cmder {
		// Cmdable lacks Do; every client and pipeline has it.
		cmds[k] = c.(interface {
			Do(context.Context, ...any) *redis.Cmd
		}).Do(ctx, "XINFO", "CONSUMERS", l.spaces[k].Fires(), group)
		return cmds[k]
	}) // each command's error is looked at below
	byName := map[string]*ConsumerInfo{}
	for _, c := range cmds {
		reply, err := c.Slice()
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "no such key") || strings.HasPrefix(msg, "NOGROUP") {
				continue // no fire yet on this shard, or the group does not read it
			}
			return nil, errorf("consumers of group %q: %w", group, q.redisError(err))
		}
		for _, entry := range reply {
			ci, err := parseConsumer(entry)
			if err != nil {
				return nil, errorf("consumers of group %q: %w", group, err)
			}
			sum, ok := byName[ci.Name]
			if !ok {
				byName[ci.Name] = &ci
				continue
			}
			sum.Pending += ci.Pending
			sum.Idle = min(sum.Idle, ci.Idle)
			switch {
			case sum.Inactive < 0:
				sum.Inactive = ci.Inactive
			case ci.Inactive >= 0:
				sum.Inactive = min(sum.Inactive, ci.Inactive)
			}
		}
	}
	out := make([]ConsumerInfo, 0, len(byName))
	for _, c := range byName {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b ConsumerInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// parseConsumer reads one consumer of an XINFO CONSUMERS reply, a map in
// RESP3 and a flat field, value list in RESP2. go-redis's XInfoConsumers
// cannot tell an absent "inactive" (Redis 7.0) from 0, so the reply is
// read here.
func parseConsumer(entry any) (ConsumerInfo, error) {
	fields := map[string]any{}
	switch e := entry.(type) {
	case map[any]any:
		for k, v := range e {
			if name, ok := k.(string); ok {
				fields[name] = v
			}
		}
	case []any:
		for i := 0; i+1 < len(e); i += 2 {
			if name, ok := e[i].(string); ok {
				fields[name] = e[i+1]
			}
		}
	default:
		return ConsumerInfo{}, fmt.Errorf("unexpected XINFO CONSUMERS entry %T", entry)
	}
	var ci ConsumerInfo
	ci.Name, _ = fields["name"].(string)
	ci.Pending, _ = fields["pending"].(int64)
	idle, _ := fields["idle"].(int64)
	ci.Idle = time.Duration(idle) * time.Millisecond
	if v, ok := fields["inactive"].(int64); ok {
		ci.InactiveKnown = true
		ci.Inactive = time.Duration(v) * time.Millisecond
		if v < 0 {
			ci.Inactive = -1
		}
	}
	if ci.Name == "" {
		return ConsumerInfo{}, fmt.Errorf("XINFO CONSUMERS entry without a name: %v", entry)
	}
	return ci, nil
}
