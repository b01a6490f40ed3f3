package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/scripts/lua"
)

// Overlap is a schedule's overlap policy: whether Consume hands a consumer
// group one of the schedule's occurrences while the group still has
// another one of them unacknowledged. It is per group: each group applies
// it to its own deliveries.
type Overlap string

// Overlap policies.
const (
	// OverlapAllow hands every occurrence over as it fires, like any fire
	// event (the default).
	OverlapAllow Overlap = "allow"
	// OverlapSkip does not hand an occurrence to the group's handler while
	// the group has another occurrence of the schedule pending (delivered
	// and not acknowledged: its handler still runs, it failed and waits
	// for its retry, or its consumer died and it waits to be reclaimed).
	// The skipped occurrence is acknowledged instead, counted in
	// Counters.OverlapSkipped and reported to ConsumeOptions.OnSkip; it is
	// not dead-lettered, since nothing failed. The next occurrence after the
	// pending one is acknowledged is handed over as usual.
	OverlapSkip Overlap = "skip"
)

func (o Overlap) normalize() (Overlap, error) {
	switch o {
	case "":
		return OverlapAllow, nil
	case OverlapAllow, OverlapSkip:
		return o, nil
	}
	return o, fmt.Errorf("overlap policy %q is not one of allow, skip", string(o))
}

// Skip is an occurrence that Consume acknowledged without handing it to the
// handler, because its schedule's Overlap is OverlapSkip and the group had
// another occurrence of the schedule pending.
type Skip struct {
	// Event is the skipped occurrence's fire event.
	Event Event
	// Schedule is its schedule's ID.
	Schedule string
	// Pending is the stream entry ID of the occurrence still pending in the
	// group, because of which this one was skipped.
	Pending string
}

// overlapCheck applies the overlap policies to entries about to be handled
// by this consumer: it returns, by stream ID, the entries skipped (already
// acknowledged by the script) with the pending entry they yield to. A batch
// without occurrences costs nothing: no round trip.
func (c *consumerLoop) overlapCheck(ctx context.Context, msgs []redis.XMessage) (map[string]Skip, error) {
	var args []any
	var idx []int
	for i, m := range msgs {
		if _, ok := m.Values["for_group"]; ok {
			// A dead letter requeued by an operator (Deliveries.Requeue), for
			// this group or another: a decision the policy does not undo.
			continue
		}
		id, _ := m.Values["id"].(string)
		sid, _, ok := ParseOccurrenceID(id)
		if !ok {
			continue
		}
		if args == nil {
			args = []any{c.group}
		}
		args = append(args, m.ID, sid)
		idx = append(idx, i)
	}
	if args == nil {
		return nil, nil
	}
	// The schedules hash of the stream's own shard: an occurrence lives in
	// its schedule's shard (lua.Overlap.Keys).
	v, err := classic(lua.Overlap).Run(ctx, c.q.rdb, c.overlapKeys, args...).StringSlice()
	if err != nil {
		return nil, err
	}
	if len(v) != len(idx) {
		return nil, errorf("overlap script: %d verdicts for %d entries", len(v), len(idx))
	}
	var skips map[string]Skip
	for k, i := range idx {
		if v[k] == "" {
			continue
		}
		m := msgs[i]
		ev, _ := parseEvent(m, 0)
		ev.Shard = c.shard
		sid, _, _ := ParseOccurrenceID(ev.ID)
		if skips == nil {
			skips = map[string]Skip{}
		}
		skips[m.ID] = Skip{Event: ev, Schedule: sid, Pending: v[k]}
	}
	return skips, nil
}

// overlapFailed leaves entries that the overlap check could not decide
// pending with this consumer, queued for a prompt retry: they were
// delivered, and a read with ">" will not return them again.
func (c *consumerLoop) overlapFailed(msgs []redis.XMessage) {
	now := time.Now()
	for _, m := range msgs {
		c.retries[m.ID] = retryState{at: now}
	}
}

// skipped reports a skip.
func (c *consumerLoop) skipped(s Skip) {
	delete(c.retries, s.Event.StreamID)
	if c.opts.OnSkip != nil {
		c.opts.OnSkip(s)
	}
}
