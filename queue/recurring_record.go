package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/timerq/timerq/scripts/lua"
)

// record is a decoded schedule record.
type record struct {
	version int64
	state   recState
	count   int64
	last    string // nominal ms, or ""
	body    body
	r       Recurring
	pending []Occurrence
	err     error // set instead of the rest when the record cannot be read
}

func decodeSchedule(id, rec, pending string) (*record, error) {
	bad := func(why string) (*record, error) {
		return nil, errorf("schedule %q has a malformed record (%s): was it written by something other than timerq?", id, why)
	}
	// "<version>:<state>:<count>:<last_ms>:<armed>:<overlap>:<body>", or
	// without the overlap field for a record written before it, whose body,
	// a JSON object, follows armed (scripts/lua/includes/sdecode.lua).
	f := strings.SplitN(rec, ":", 6)
	if len(f) != 6 || len(f[1]) != 1 {
		return bad("field count")
	}
	overlap := Overlap("")
	if !strings.HasPrefix(f[5], "{") {
		ov, rest, ok := strings.Cut(f[5], ":")
		if !ok || (Overlap(ov) != OverlapAllow && Overlap(ov) != OverlapSkip) {
			return bad("overlap policy")
		}
		overlap, f[5] = Overlap(ov), rest
	}
	s := &record{state: recState(f[1][0]), last: f[3]}
	var err error
	if s.version, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return bad("version")
	}
	if s.count, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return bad("count")
	}
	if err := json.Unmarshal([]byte(f[5]), &s.body); err != nil {
		return bad("body")
	}
	if s.r, err = s.body.recurring(id); err != nil {
		return nil, err
	}
	if overlap != "" {
		s.r.Overlap = overlap
	}
	for _, p := range strings.Split(pending, ",") {
		n, d, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		nominal, due := fromMillis(atoi(n)), parseScore(d)
		s.pending = append(s.pending, Occurrence{ID: OccurrenceID(id, nominal), Nominal: nominal, Due: due})
	}
	return s, nil
}

func (s *record) info(now time.Time) RecurringInfo {
	in := RecurringInfo{Recurring: s.r, Version: s.version, Count: s.count, Pending: s.pending, Now: now,
		CreatedAt: fromMillis(s.body.CreatedMs), UpdatedAt: fromMillis(s.body.UpdatedMs)}
	switch s.state {
	case recActive:
		in.State = RecurringActive
	case recPaused:
		in.State = RecurringPaused
	default:
		in.State = RecurringEnded
	}
	if s.last != "" {
		in.Last = fromMillis(atoi(s.last))
	}
	if in.State == RecurringActive {
		if sch, err := s.r.Schedule(); err == nil {
			left := int64(-1)
			if s.r.MaxCount > 0 {
				left = s.r.MaxCount - s.count + int64(len(s.pending))
			}
			for t := now; len(in.Next) < 5 && left != 0; left-- {
				if t = sch.Next(t); t.IsZero() || (!s.r.End.IsZero() && t.After(s.r.End)) {
					break
				}
				in.Next = append(in.Next, t.UTC())
			}
		}
	}
	return in
}

// load reads schedules of shard k by ID with the server clock.
func (q *Queue) load(ctx context.Context, l *layout, k int, args ...any) (time.Time, []string, map[string]*record, error) {
	now, ids, recs, _, err := q.loadScanned(ctx, l, k, args...)
	if err != nil {
		return now, ids, recs, err
	}
	for id, s := range recs {
		if s.err != nil {
			if len(ids) == 1 {
				return now, ids, nil, s.err
			}
			delete(recs, id) // a listing shows the readable ones
		}
	}
	return now, ids, recs, nil
}

// loadScanned is load, also telling how many schedules the script looked
// at (in repair mode it returns only those that need arming).
func (q *Queue) loadScanned(ctx context.Context, l *layout, k int, args ...any) (time.Time, []string, map[string]*record, int, error) {
	v, err := q.run(ctx, l, lua.RecurLoad, k, args...)
	if err != nil {
		return time.Time{}, nil, nil, 0, err
	}
	r, err := replyStrings(v)
	if err != nil || len(r)%3 != 2 {
		return time.Time{}, nil, nil, 0, fmt.Errorf("unexpected reply %v", v)
	}
	now, scanned := fromMillis(atoi(r[0])), int(atoi(r[1]))
	ids := make([]string, 0, len(r)/3)
	recs := make(map[string]*record, len(r)/3)
	for i := 2; i < len(r); i += 3 {
		ids = append(ids, r[i])
		if r[i+1] == "" {
			continue
		}
		s, err := decodeSchedule(r[i], r[i+1], r[i+2])
		if err != nil {
			// One unreadable schedule (say, a time zone this host lacks)
			// must not stop the others from being armed.
			s = &record{err: err}
		}
		recs[r[i]] = s
	}
	return now, ids, recs, scanned, nil
}

// recState is a schedule's state as its record stores it and
// recur_put.lua takes it: one letter.
type recState byte

const (
	recActive recState = 'a'
	recPaused recState = 'p'
	recEnded  recState = 'e'
)

// arg is the state as a script argument (go-redis sends a byte as a
// number).
func (s recState) arg() string { return string(rune(s)) }

// loadOne reads the schedule id, from its shard, with the server clock.
func (q *Queue) loadOne(ctx context.Context, id string) (time.Time, *record, error) {
	l, err := q.layout(ctx)
	if err != nil {
		return time.Time{}, nil, err
	}
	now, _, recs, err := q.load(ctx, l, l.scheduleShard(id), "ids", id)
	if err != nil {
		return now, nil, err
	}
	return now, recs[id], nil
}

// Get returns the schedule id with its pending occurrences and the
// next 5 nominal occurrence times, or an error wrapping ErrRecurringNotFound.
func (rt RecurringTimers) Get(ctx context.Context, id string) (RecurringInfo, error) {
	q := rt.q
	if err := ValidateID(id); err != nil {
		return RecurringInfo{}, err
	}
	now, s, err := q.loadOne(ctx, id)
	if err != nil {
		return RecurringInfo{}, errorf("get schedule %q: %w", id, err)
	}
	if s == nil {
		return RecurringInfo{}, q.recurringNotFound(id)
	}
	return s.info(now), nil
}
