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
	s, err := readShard(ctx, rdb, k)
	if err != nil {
		return nil, err
	}
	var bad []string
	for id, rec := range s.recs {
		if line := s.checkRecord(id, rec, trimmed); line != "" {
			bad = append(bad, line)
		}
	}
	bad = append(bad, s.checkMembers()...)
	if !trimmed {
		n, err := rdb.HGet(ctx, k[6], "fired").Int64()
		if err != nil && err != redis.Nil {
			return nil, err
		}
		if n != int64(s.entries) {
			bad = append(bad, fmt.Sprintf("counters say %d fired, the stream holds %d entries", n, s.entries))
		}
	}
	sort.Strings(bad)
	return bad, nil
}

// shard is what Check reads of a shard's keys.
type shard struct {
	recs    map[string]string
	setKeys []string             // the due, fired and cancelled sets
	sets    []map[string]float64 // their members and scores, in setKeys' order
	events  map[string]int       // stream entries per timer ID
	entries int                  // the stream's length
}

// readShard reads the records, the three state sets and the fire stream
// of the shard whose keys are k.
func readShard(ctx context.Context, rdb redis.UniversalClient, k []string) (*shard, error) {
	recs, err := rdb.HGetAll(ctx, k[1]).Result()
	if err != nil {
		return nil, err
	}
	s := &shard{recs: recs, setKeys: []string{k[0], k[2], k[3]}, sets: make([]map[string]float64, 3), events: map[string]int{}}
	for i, key := range s.setKeys {
		zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			return nil, err
		}
		s.sets[i] = map[string]float64{}
		for _, z := range zs {
			s.sets[i][z.Member.(string)] = z.Score
		}
	}
	entries, err := rdb.XRange(ctx, k[5], "-", "+").Result()
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		id, _ := e.Values["id"].(string)
		s.events[id]++
	}
	s.entries = len(entries)
	return s, nil
}

// checkRecord returns what is wrong with the record of id, or "".
func (s *shard) checkRecord(id, rec string, trimmed bool) string {
	state, recDue, ok := parse(rec)
	if !ok {
		return fmt.Sprintf("%q: malformed record %q", id, rec)
	}
	due, fired, cancelled := s.sets[0], s.sets[1], s.sets[2]
	_, inDue := due[id]
	_, inFired := fired[id]
	_, inCancelled := cancelled[id]
	events := s.events[id]
	switch state {
	case 's':
		if !inDue || inFired || inCancelled || events != 0 {
			return fmt.Sprintf("%q: scheduled, but due=%v fired=%v cancelled=%v stream entries=%d", id, inDue, inFired, inCancelled, events)
		}
	case 'f':
		if inDue || !inFired || inCancelled || events > 1 || events == 0 && !trimmed || fired[id] != recDue {
			return fmt.Sprintf("%q: fired, but due=%v fired=%v (score %v, record due %v) cancelled=%v stream entries=%d",
				id, inDue, inFired, fired[id], recDue, inCancelled, events)
		}
	case 'c':
		if inDue || inFired || !inCancelled || events != 0 || cancelled[id] != recDue {
			return fmt.Sprintf("%q: cancelled, but due=%v fired=%v cancelled=%v stream entries=%d", id, inDue, inFired, inCancelled, events)
		}
	}
	return ""
}

// checkMembers returns a line for each member of the due, fired and
// cancelled sets without a record in that state.
func (s *shard) checkMembers() []string {
	var bad []string
	for i, set := range s.sets {
		want := "sfc"[i]
		for id := range set {
			rec, ok := s.recs[id]
			if !ok {
				bad = append(bad, fmt.Sprintf("%q: member of %s without a record", id, s.setKeys[i]))
			} else if rec[0] != want {
				bad = append(bad, fmt.Sprintf("%q: member of %s, but its record is %q", id, s.setKeys[i], rec))
			}
		}
	}
	return bad
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
