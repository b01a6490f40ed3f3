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

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/queue"
)

// The bands of layout 2's sched set (scripts/lua/includes/pending_end.lua):
// a score below bandFired is a due time, one in [bandFired, bandCancelled)
// is bandFired + a fire time, one from bandCancelled on is bandCancelled +
// a cancel time.
const (
	bandFired     = 1 << 50
	bandCancelled = 1 << 51
)

// Check reads the whole of shard 0 of q's namespace (so use it on
// test-sized data), in the layout the shard is at (read from Redis, not
// from q), and returns one line per broken invariant, or nil:
//   - every scheduled record has a due score, and no other entry;
//   - every fired record has exactly one fired entry (layout 1: in the
//     fired set, scored with its due time; layout 2: in the fired band of
//     the sched set, scored with the band plus its fire time), exactly
//     one fire stream entry (at most one if the stream was trimmed,
//     trimmed true), and no due score;
//   - every cancelled record has exactly one cancelled entry (the
//     cancelled set with its due time; the cancelled band with its cancel
//     time), and no due score and no stream entry;
//   - every member of the due, fired and cancelled sets (or bands) has a
//     record in that state;
//   - in layout 2, the legacy due key holds the marker, and layout 1's
//     sets hold only the settled timers an upgrade has still to drain,
//     each as layout 1 keeps it (the expire set goes with the last);
//   - while the stream is not trimmed (trimmed false), the counters' fired
//     total equals the stream's length;
//   - every entry of the timer meta hash has a record, every member of
//     the owner index is "<owner>\x00<id>" of a timer whose meta names
//     that owner, every owned timer has its index entry, and a fired
//     timer's stream entry carries its meta as stored.
func Check(ctx context.Context, rdb redis.UniversalClient, q *queue.Queue, trimmed bool) ([]string, error) {
	sp, err := shard0(ctx, rdb, q)
	if err != nil {
		return nil, err
	}
	k := sp.Keys()
	s, err := readShard(ctx, rdb, sp)
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
	metaBad, err := s.checkMeta(ctx, rdb, sp)
	if err != nil {
		return nil, err
	}
	bad = append(bad, metaBad...)
	if sp.Layout() == 2 {
		bad = append(bad, s.checkLegacy(ctx, rdb, sp)...)
	}
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

// shard0 returns shard 0 of q's namespace, naming its keys in the layout
// Redis holds it at: layout 2 when its legacy due key holds layout 2's
// marker (keyspace.LayoutMarker), else layout 1.
func shard0(ctx context.Context, rdb redis.UniversalClient, q *queue.Queue) (keyspace.Space, error) {
	n, err := q.Inspect().Shards(ctx)
	if err != nil {
		return keyspace.Space{}, err
	}
	sp := keyspace.Shard(q.Namespace(), 0, n)
	v, err := rdb.Get(ctx, sp.LegacyDue()).Result()
	if err == nil && v == keyspace.LayoutMarker(2) {
		return sp.AtLayout(2), nil
	}
	return sp.AtLayout(1), nil
}

// set is one place a shard keeps timers of one state: a sorted set, or a
// band of layout 2's sched set.
type set struct {
	name    string             // the key, and the band if it is one
	state   byte               // 's', 'f' or 'c'
	members map[string]float64 // member -> score
	// score returns the score a record of the state must have here, from
	// its due and settled times; nil for the due set, whose score is the
	// due time itself.
	score func(due, settled int64) float64
}

// shard is what Check reads of a shard's keys.
type shard struct {
	recs      map[string]string
	sets      []set
	events    map[string]int    // stream entries per timer ID
	eventMeta map[string]string // the meta field of each timer's stream entry
	entries   int               // the stream's length
}

// zset reads a sorted set's members and scores.
func zset(ctx context.Context, rdb redis.UniversalClient, key string) (map[string]float64, error) {
	zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, z := range zs {
		m[z.Member.(string)] = z.Score
	}
	return m, nil
}

// readShard reads the records, the state sets and the fire stream of the
// shard sp.
func readShard(ctx context.Context, rdb redis.UniversalClient, sp keyspace.Space) (*shard, error) {
	k := sp.Keys()
	recs, err := rdb.HGetAll(ctx, k[1]).Result()
	if err != nil {
		return nil, err
	}
	s := &shard{recs: recs, events: map[string]int{}, eventMeta: map[string]string{}}
	atDue := func(due, _ int64) float64 { return float64(due) }
	fired, err := zset(ctx, rdb, sp.Fired())
	if err != nil {
		return nil, err
	}
	cancelled, err := zset(ctx, rdb, sp.Cancelled())
	if err != nil {
		return nil, err
	}
	due, err := zset(ctx, rdb, sp.Due())
	if err != nil {
		return nil, err
	}
	if sp.Layout() == 1 {
		s.sets = []set{
			{name: sp.Due(), state: 's', members: due},
			{name: sp.Fired(), state: 'f', members: fired, score: atDue},
			{name: sp.Cancelled(), state: 'c', members: cancelled, score: atDue},
		}
	} else {
		bands := []set{
			{name: sp.Sched(), state: 's', members: map[string]float64{}},
			{name: sp.Sched() + "'s fired band", state: 'f', members: map[string]float64{},
				score: func(_, settled int64) float64 { return float64(bandFired + settled) }},
			{name: sp.Sched() + "'s cancelled band", state: 'c', members: map[string]float64{},
				score: func(_, settled int64) float64 { return float64(bandCancelled + settled) }},
		}
		for id, score := range due {
			switch {
			case score < bandFired:
				bands[0].members[id] = score
			case score < bandCancelled:
				bands[1].members[id] = score
			default:
				bands[2].members[id] = score
			}
		}
		// What an upgrade has still to drain sits in layout 1's sets, as
		// layout 1 keeps it.
		s.sets = append(bands,
			set{name: sp.Fired(), state: 'f', members: fired, score: atDue},
			set{name: sp.Cancelled(), state: 'c', members: cancelled, score: atDue})
	}
	entries, err := rdb.XRange(ctx, k[5], "-", "+").Result()
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		id, _ := e.Values["id"].(string)
		s.events[id]++
		s.eventMeta[id], _ = e.Values["meta"].(string)
	}
	s.entries = len(entries)
	return s, nil
}

// checkRecord returns what is wrong with the record of id, or "".
func (s *shard) checkRecord(id, rec string, trimmed bool) string {
	state, recDue, settled, ok := parse(rec)
	if !ok {
		return fmt.Sprintf("%q: malformed record %q", id, rec)
	}
	// in counts id's entries in the sets of each state; at is its entry
	// in a set of its own state, and that set.
	in := map[byte]int{}
	var at *set
	for i := range s.sets {
		st := &s.sets[i]
		if _, ok := st.members[id]; ok {
			in[st.state]++
			if st.state == state {
				at = st
			}
		}
	}
	inDue, inFired, inCancelled := in['s'] > 0, in['f'] > 0, in['c'] > 0
	events := s.events[id]
	var score, want float64
	if at != nil && at.score != nil {
		score, want = at.members[id], at.score(recDue, settled)
	}
	switch state {
	case 's':
		if in['s'] != 1 || inFired || inCancelled || events != 0 {
			return fmt.Sprintf("%q: scheduled, but due=%v fired=%v cancelled=%v stream entries=%d", id, inDue, inFired, inCancelled, events)
		}
	case 'f':
		if inDue || in['f'] != 1 || inCancelled || events > 1 || events == 0 && !trimmed || score != want {
			return fmt.Sprintf("%q: fired, but due=%v fired=%v (score %.0f, want %.0f) cancelled=%v stream entries=%d",
				id, inDue, in['f'], score, want, inCancelled, events)
		}
	case 'c':
		if inDue || inFired || in['c'] != 1 || events != 0 || score != want {
			return fmt.Sprintf("%q: cancelled, but due=%v fired=%v cancelled=%v (score %.0f, want %.0f) stream entries=%d",
				id, inDue, inFired, in['c'], score, want, events)
		}
	}
	return ""
}

// checkMembers returns a line for each member of the due, fired and
// cancelled sets (or bands) without a record in that state.
func (s *shard) checkMembers() []string {
	var bad []string
	for _, set := range s.sets {
		for id := range set.members {
			rec, ok := s.recs[id]
			if !ok {
				bad = append(bad, fmt.Sprintf("%q: member of %s without a record", id, set.name))
			} else if rec == "" || rec[0] != set.state {
				bad = append(bad, fmt.Sprintf("%q: member of %s, but its record is %q", id, set.name, rec))
			}
		}
	}
	return bad
}

// checkLegacy returns a line for each key of layout 1 that a shard of
// layout 2 keeps wrongly: the due key holds the marker (else Check would
// have read the shard as layout 1), and the expire set goes with the last
// settled timer the upgrade drains from the fired and cancelled sets.
func (s *shard) checkLegacy(ctx context.Context, rdb redis.UniversalClient, sp keyspace.Space) []string {
	if len(s.sets[3].members)+len(s.sets[4].members) > 0 {
		return nil
	}
	if n, err := rdb.Exists(ctx, sp.Expire()).Result(); err != nil || n != 0 {
		return []string{fmt.Sprintf("%s: a shard of layout 2 with nothing left to drain keeps it (%v)", sp.Expire(), err)}
	}
	return nil
}

// parse splits "<state>:<due>:<created>:<settled>:<payload>"; a scheduled
// record's due time is in the due set, so it reads as 0, and so does its
// settled time.
func parse(rec string) (state byte, due, settled int64, ok bool) {
	f := strings.SplitN(rec, ":", 5)
	if len(f) != 5 || len(f[0]) != 1 || !strings.Contains("sfc", f[0]) {
		return 0, 0, 0, false
	}
	if f[0] == "s" {
		return 's', 0, 0, f[1] == "" && f[3] == ""
	}
	d, err := strconv.ParseInt(f[1], 10, 64)
	at, err2 := strconv.ParseInt(f[3], 10, 64)
	return f[0][0], d, at, err == nil && err2 == nil
}

// Snapshot renders every key of shard 0 of q's namespace, in both layouts
// (so layout 1's sets and layout 2's sched set and the marker in due), as
// text, so that a test can tell that an operation changed nothing.
func Snapshot(ctx context.Context, rdb redis.UniversalClient, q *queue.Queue) (string, error) {
	sp, err := shard0(ctx, rdb, q)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, key := range []string{sp.LegacyDue(), sp.Sched(), sp.Timers(), sp.Fired(), sp.Cancelled(), sp.Expire(), sp.Fires(), sp.Counters()} {
		typ, err := rdb.Type(ctx, key).Result()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s (%s):", key, typ)
		switch typ {
		case "string":
			v, err := rdb.Get(ctx, key).Result()
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, " %q", v)
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

// checkMeta returns a line for each broken invariant of the timer meta
// hash and the owner index (keyspace TimerMeta, Owners).
func (s *shard) checkMeta(ctx context.Context, rdb redis.UniversalClient, sp keyspace.Space) ([]string, error) {
	metas, err := rdb.HGetAll(ctx, sp.TimerMeta()).Result()
	if err != nil {
		return nil, err
	}
	index, err := rdb.ZRange(ctx, sp.Owners(), 0, -1).Result()
	if err != nil {
		return nil, err
	}
	var bad []string
	owners := map[string]string{} // id -> owner, from the meta
	for id, m := range metas {
		rec, ok := s.recs[id]
		if !ok {
			bad = append(bad, fmt.Sprintf("%q: meta %q without a record", id, m))
			continue
		}
		if f := strings.Split(m, "\x1f"); len(f) >= 3 && f[2] != "" {
			owners[id] = f[2]
		}
		if rec != "" && rec[0] == 'f' && s.events[id] > 0 && s.eventMeta[id] != m {
			bad = append(bad, fmt.Sprintf("%q: fired with meta %q in its stream entry, %q stored", id, s.eventMeta[id], m))
		}
	}
	indexed := map[string]bool{}
	for _, member := range index {
		owner, id, ok := strings.Cut(member, "\x00")
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("owner index member %q is not <owner>\\0<id>", member))
		case owners[id] != owner:
			bad = append(bad, fmt.Sprintf("%q: in the owner index under %q, but its meta names %q", id, owner, owners[id]))
		default:
			indexed[id] = true
		}
	}
	for id, owner := range owners {
		if !indexed[id] {
			bad = append(bad, fmt.Sprintf("%q: owned by %q, but not in the owner index", id, owner))
		}
	}
	return bad, nil
}
