// Package consistency checks a timerq namespace in Redis against the
// invariants every script keeps (scripts/lua/includes/probe.lua): each timer is
// wholly in one state, never half-way between two. Tests use it after
// refused commands, crashes and kills.
package consistency

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/queue"
)

// Check reads the whole namespace of q (so use it on test-sized data) and
// returns one line per broken invariant, or nil:
//   - every scheduled record has a score in the due set, and no other entry;
//   - every fired record has an entry in the fired set with its due time,
//     exactly one fire stream entry (at most one if the stream was trimmed,
//     trimmed true), and no due score;
//   - every cancelled record has an entry in the cancelled set, and no due
//     score and no stream entry;
//   - every member of the due, fired and cancelled sets has a record in
//     that state;
//   - while the stream is not trimmed (trimmed false), the counters' fired
//     total equals the stream's length.
func Check(ctx context.Context, rdb redis.UniversalClient, q *queue.Queue, trimmed bool) ([]string, error) {
	k := q.Keys().Shard(0)
	recs, err := rdb.HGetAll(ctx, k[1]).Result()
	if err != nil {
		return nil, err
	}
	sets := make([]map[string]float64, 3)
	for i, key := range []string{k[0], k[2], k[3]} {
		zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			return nil, err
		}
		sets[i] = map[string]float64{}
		for _, z := range zs {
			sets[i][z.Member.(string)] = z.Score
		}
	}
	due, fired, cancelled := sets[0], sets[1], sets[2]
	entries, err := rdb.XRange(ctx, k[5], "-", "+").Result()
	if err != nil {
		return nil, err
	}
	events := map[string]int{}
	for _, e := range entries {
		id, _ := e.Values["id"].(string)
		events[id]++
	}

	var bad []string
	badf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	for id, rec := range recs {
		state, recDue, ok := parse(rec)
		if !ok {
			badf("%q: malformed record %q", id, rec)
			continue
		}
		_, inDue := due[id]
		_, inFired := fired[id]
		_, inCancelled := cancelled[id]
		switch state {
		case 's':
			if !inDue || inFired || inCancelled || events[id] != 0 {
				badf("%q: scheduled, but due=%v fired=%v cancelled=%v stream entries=%d", id, inDue, inFired, inCancelled, events[id])
			}
		case 'f':
			if inDue || !inFired || inCancelled || events[id] > 1 || events[id] == 0 && !trimmed || fired[id] != recDue {
				badf("%q: fired, but due=%v fired=%v (score %v, record due %v) cancelled=%v stream entries=%d",
					id, inDue, inFired, fired[id], recDue, inCancelled, events[id])
			}
		case 'c':
			if inDue || inFired || !inCancelled || events[id] != 0 || cancelled[id] != recDue {
				badf("%q: cancelled, but due=%v fired=%v cancelled=%v stream entries=%d", id, inDue, inFired, inCancelled, events[id])
			}
		}
	}
	for i, set := range sets {
		want := "sfc"[i]
		for id := range set {
			rec, ok := recs[id]
			if !ok {
				badf("%q: member of %s without a record", id, []string{k[0], k[2], k[3]}[i])
			} else if rec[0] != want {
				badf("%q: member of %s, but its record is %q", id, []string{k[0], k[2], k[3]}[i], rec)
			}
		}
	}
	if !trimmed {
		n, err := rdb.HGet(ctx, k[6], "fired").Int64()
		if err != nil && err != redis.Nil {
			return nil, err
		}
		if n != int64(len(entries)) {
			badf("counters say %d fired, the stream holds %d entries", n, len(entries))
		}
	}
	sort.Strings(bad)
	return bad, nil
}

// parse splits "<state>:<due>:<created>:<settled>:<payload>"; a scheduled
// record's due time is in the due set, so it reads as 0.
func parse(rec string) (state byte, due float64, ok bool) {
	f := strings.SplitN(rec, ":", 5)
	if len(f) != 5 || len(f[0]) != 1 || !strings.Contains("sfc", f[0]) {
		return 0, 0, false
	}
	if f[0] == "s" {
		return 's', 0, f[1] == "" && f[3] == ""
	}
	d, err := strconv.ParseInt(f[1], 10, 64)
	return f[0][0], float64(d), err == nil && f[3] != ""
}

// Snapshot renders every key of q's namespace as text, so that a test can
// tell that an operation changed nothing.
func Snapshot(ctx context.Context, rdb redis.UniversalClient, q *queue.Queue) (string, error) {
	var b strings.Builder
	for _, key := range q.Keys().Shard(0) {
		typ, err := rdb.Type(ctx, key).Result()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s (%s):", key, typ)
		switch typ {
		case "hash":
			m, err := rdb.HGetAll(ctx, key).Result()
			if err != nil {
				return "", err
			}
			fields := make([]string, 0, len(m))
			for f := range m {
				fields = append(fields, f)
			}
			sort.Strings(fields)
			for _, f := range fields {
				fmt.Fprintf(&b, " %q=%q", f, m[f])
			}
		case "zset":
			zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
			if err != nil {
				return "", err
			}
			for _, z := range zs {
				fmt.Fprintf(&b, " %q=%v", z.Member, z.Score)
			}
		case "stream":
			es, err := rdb.XRange(ctx, key, "-", "+").Result()
			if err != nil {
				return "", err
			}
			for _, e := range es {
				fmt.Fprintf(&b, " %s:%v", e.ID, e.Values)
			}
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}
