package queue

import (
	"cmp"
	"context"
	"fmt"
	"github.com/timerq/timerq/scripts/lua"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Fired is a timer that a claim fired.
type Fired struct {
	ID      string
	Due     time.Time
	FiredAt time.Time
	Payload []byte
}

// Lateness is how long after its due time the timer fired, by the server
// clock. It is never negative: timers never fire early.
func (f Fired) Lateness() time.Duration { return f.FiredAt.Sub(f.Due) }

// ClaimResult is the outcome of one Claim.
type ClaimResult struct {
	// Shard is the shard ClaimShard claimed from; -1 when Claim covered
	// several shards.
	Shard int
	// Now is the Redis server's clock when the claim ran, to the
	// millisecond: the fired_at of every timer it fired.
	Now time.Time
	// Clock is Now to the microsecond (zero when the claim does not say),
	// so that a poller can sleep until the next due time without adding
	// up to a millisecond of truncation to each sleep.
	Clock time.Time
	// Fired lists the timers fired by this claim, in due order within each
	// shard.
	Fired []Fired
	// Quarantined lists the records this claim moved to the quarantine
	// instead of firing them, because they are not records timerq writes
	// (see Quarantine.List). Each is reported by the one claim that moved
	// it, so a caller logs it once.
	Quarantined []QuarantineNotice
	// NextDue is the earliest due time still pending, or zero when no timer
	// is scheduled. A poller sleeps until then. When Claim stopped at its
	// limit before visiting every shard, it is Now: claim again.
	NextDue time.Time
}

// Claim fires up to limit (1..MaxBatch) due timers: each leaves the due set,
// is marked fired, gets an entry in the fire stream and a wakeup on its
// channel, in one atomic script per shard. However many callers race, each
// timer is fired by exactly one Claim. On a sharded namespace it visits the
// shards in turn until limit timers fired; pollers use ClaimShard instead.
func (en Engine) Claim(ctx context.Context, limit int) (ClaimResult, error) {
	q := en.q
	if err := checkLimit("claim", limit); err != nil {
		return ClaimResult{}, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return ClaimResult{}, err
	}
	if len(l.spaces) == 1 {
		return q.claimShard(ctx, l, 0, limit)
	}
	total := ClaimResult{Shard: -1}
	for k := range l.spaces {
		res, err := q.claimShard(ctx, l, k, limit-len(total.Fired))
		if err != nil {
			return total, err
		}
		total.Now, total.Clock = res.Now, res.Clock
		total.Fired = append(total.Fired, res.Fired...)
		total.Quarantined = append(total.Quarantined, res.Quarantined...)
		if !res.NextDue.IsZero() && (total.NextDue.IsZero() || res.NextDue.Before(total.NextDue)) {
			total.NextDue = res.NextDue
		}
		if len(total.Fired) == limit {
			if k < len(l.spaces)-1 || len(res.Fired) == limit {
				total.NextDue = total.Now
			}
			break
		}
	}
	slices.SortStableFunc(total.Fired, func(a, b Fired) int { return a.Due.Compare(b.Due) })
	return total, nil
}

// ClaimShard is Claim on one shard (0..Shards-1), as a poller that owns
// the shard calls it. While the shard's Cluster slot migrates it fails at
// once (TRYAGAIN, ASK, MOVED or CLUSTERDOWN in the error), so the caller
// can back off on this shard alone. Other calls retry such refusals for a
// few seconds themselves.
func (en Engine) ClaimShard(ctx context.Context, shard, limit int) (ClaimResult, error) {
	q := en.q
	if err := checkLimit("claim", limit); err != nil {
		return ClaimResult{}, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return ClaimResult{}, err
	}
	if shard < 0 || shard >= len(l.spaces) {
		return ClaimResult{}, fmt.Errorf("%w: shard %d is outside 0..%d", ErrInvalidOptions, shard, len(l.spaces)-1)
	}
	return q.claimShard(ctx, l, shard, limit)
}

func checkLimit(what string, limit int) error {
	if limit < 1 || limit > MaxBatch {
		return fmt.Errorf("%w: %s limit %d is outside 1..%d", ErrInvalidOptions, what, limit, MaxBatch)
	}
	return nil
}

func (q *Queue) claimShard(ctx context.Context, l *layout, k, limit int) (ClaimResult, error) {
	// One try: while the shard's slot migrates, the caller (a poller's
	// loop for this shard) backs off and counts the pause itself, and the
	// other shards go on.
	start := time.Now()
	res, tps, err := q.claimOnce(ctx, l, k, limit)
	q.traceClaim(ctx, k, limit, start, res, tps, err)
	return res, err
}

// claimOnce runs claim.lua once on shard k. It returns the traceparent of
// each fired timer too, in tps, or nil when none was traced.
func (q *Queue) claimOnce(ctx context.Context, l *layout, k, limit int) (res ClaimResult, tps []string, _ error) {
	if l.replicas > 0 {
		return q.claimHeld(ctx, l, k, limit)
	}
	reply, err := q.runTries(ctx, l, lua.Claim, k, 1, limit, q.opts.retentionMillis(), q.opts.streamMaxLen(),
		l.spaces[k].TimerChannelPrefix(), l.spaces[k].Notify())
	if err != nil {
		return ClaimResult{}, nil, errorf("claim: %w", err)
	}
	r, err := replyStrings(reply)
	if err != nil || len(r) < 3 {
		return ClaimResult{}, nil, errorf("claim: unexpected reply %v", reply)
	}
	nq := int(atoi(r[2]))
	if nq < 0 || len(r) < 3+2*nq || (len(r)-3-2*nq)%4 != 0 {
		return ClaimResult{}, nil, errorf("claim: unexpected reply %v", reply)
	}
	ms, us, _ := strings.Cut(r[0], ".")
	res = ClaimResult{Shard: k, Now: fromMillis(atoi(ms))}
	res.Clock = res.Now.Add(time.Duration(atoi(us)) * time.Microsecond)
	if r[1] != "" {
		res.NextDue = parseScore(r[1])
	}
	for i := range nq {
		res.Quarantined = append(res.Quarantined, QuarantineNotice{ID: r[3+2*i], Shard: k, Reason: r[4+2*i]})
	}
	r = r[3+2*nq:]
	if n := len(r) / 4; n > 0 {
		res.Fired = make([]Fired, n)
		for i := range res.Fired {
			f := r[4*i:]
			res.Fired[i] = Fired{ID: f[0], Due: fromMillis(atoi(f[1])), FiredAt: res.Now, Payload: []byte(f[2])}
			if f[3] != "" {
				if tps == nil {
					tps = make([]string, n)
				}
				tps[i] = f[3]
			}
		}
	}
	return res, tps, nil
}

// Purge removes up to limit (1..MaxBatch) fired and cancelled records whose
// retention has passed, over every shard, and reports how many it removed
// and whether more are waiting. Once purged, a timer's ID reads as not
// found and may be scheduled again. It is idempotent, so overlapping
// callers are safe.
func (en Engine) Purge(ctx context.Context, limit int) (removed int, more bool, err error) {
	q := en.q
	if err := checkLimit("purge", limit); err != nil {
		return 0, false, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return 0, false, err
	}
	for k := range l.spaces {
		if removed == limit {
			return removed, true, nil
		}
		reply, err := q.run(ctx, l, lua.Purge, k, limit-removed)
		if err != nil {
			return removed, false, errorf("purge: %w", err)
		}
		r, err := replyStrings(reply)
		if err != nil || len(r) != 2 {
			return removed, false, errorf("purge: unexpected reply %v", reply)
		}
		removed += int(atoi(r[0]))
		more = more || atoi(r[1]) > 0
	}
	return removed, more, nil
}

// Stats is a snapshot of a namespace, each shard's part taken atomically.
type Stats struct {
	// Now is the Redis server's clock when the snapshot was taken.
	Now       time.Time
	Scheduled int64
	// Fired and Cancelled count settled records not yet purged.
	Fired     int64
	Cancelled int64
	// EarliestDue is the earliest pending due time; zero if none.
	EarliestDue time.Time
	// Overdue counts scheduled timers whose due time has passed: the backlog
	// the workers have not fired yet.
	Overdue int64
	// OldestOverdueAge is how long ago the earliest overdue timer came due;
	// zero when nothing is overdue.
	OldestOverdueAge time.Duration
	// Shards holds each shard's own figures (Shards[k].Shards is nil); one
	// entry for an unsharded namespace.
	Shards []Stats
}

// Stats returns counts per state and the overdue backlog, summed over the
// shards, with each shard's figures in Stats.Shards. The shards are read in
// one pipeline; each shard's figures are atomic, their sum is not one
// snapshot.
//
// When some shards fail and others answer, Stats returns the figures of
// those that answered (the failed shards' entries in Stats.Shards are zero,
// and the totals leave them out) with a *ShardError naming the failed ones.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	l, err := q.layout(ctx)
	if err != nil {
		return Stats{}, err
	}
	calls := make([]call, len(l.spaces))
	for k := range calls {
		calls[k] = call{shard: k}
	}
	replies, errs, err := q.runEach(ctx, l, lua.Stats, calls)
	if err != nil {
		return Stats{}, errorf("stats: %w", err)
	}
	var total Stats
	var failed map[int]error
	for k, reply := range replies {
		if errs[k] != nil {
			if len(l.spaces) == 1 {
				return Stats{}, errorf("stats: %w", errs[k])
			}
			if failed == nil {
				failed = map[int]error{}
			}
			failed[k] = errs[k]
			total.Shards = append(total.Shards, Stats{})
			continue
		}
		r, err := replyStrings(reply)
		if err != nil || len(r) != 6 {
			return Stats{}, errorf("stats: unexpected reply %v", reply)
		}
		// The clock to the µs, for the age of a due time that has µs; Now
		// stays in ms, as the other server times.
		clock := parseScore(r[0])
		s := Stats{
			Now:       clock.Truncate(time.Millisecond),
			Scheduled: atoi(r[1]),
			Fired:     atoi(r[2]),
			Cancelled: atoi(r[3]),
			Overdue:   atoi(r[5]),
		}
		if r[4] != "" {
			s.EarliestDue = parseScore(r[4])
			if s.Overdue > 0 {
				s.OldestOverdueAge = clock.Sub(s.EarliestDue)
			}
		}
		total.Shards = append(total.Shards, s)
		if s.Now.After(total.Now) {
			total.Now = s.Now
		}
		total.Scheduled += s.Scheduled
		total.Fired += s.Fired
		total.Cancelled += s.Cancelled
		total.Overdue += s.Overdue
		if !s.EarliestDue.IsZero() && (total.EarliestDue.IsZero() || s.EarliestDue.Before(total.EarliestDue)) {
			total.EarliestDue = s.EarliestDue
		}
		total.OldestOverdueAge = max(total.OldestOverdueAge, s.OldestOverdueAge)
	}
	switch {
	case len(failed) == len(l.spaces):
		return Stats{}, errorf("stats: %w", errs[0])
	case failed != nil:
		return total, &ShardError{Failed: failed}
	}
	return total, nil
}

// ListOptions selects a page of timers. The zero value lists the first 100
// timers of every state.
type ListOptions struct {
	// State limits the listing to one state; empty lists all.
	State State
	// DueFrom and DueTo bound the due times, inclusive; zero means unbounded.
	DueFrom, DueTo time.Time
	// Limit is the page size, 1..MaxBatch; 0 means DefaultListLimit (100).
	Limit int
	// Cursor continues from a previous page's NextCursor; empty starts over.
	Cursor string
}

// ListPage is one page of a listing.
type ListPage struct {
	// Timers are ordered by due time, then ID.
	Timers []Timer
	// Malformed are the records of the page that are not records timerq
	// writes, skipped rather than failing the listing; nil when there are
	// none. One that is due is quarantined by the next claim.
	Malformed []MalformedRecord
	// NextCursor fetches the next page; empty on the last page.
	NextCursor string
}

// List returns one page of timers ordered by due time. Paging is stable
// under concurrent changes: a page starts strictly after the previous one
// ended, so a timer is never listed twice in one state.
func (q *Queue) List(ctx context.Context, o ListOptions) (ListPage, error) {
	if o.Limit == 0 {
		o.Limit = DefaultListLimit
	}
	if o.Limit < 1 || o.Limit > MaxBatch {
		return ListPage{}, fmt.Errorf("%w: list limit %d is outside 1..%d", ErrInvalidOptions, o.Limit, MaxBatch)
	}
	state := ""
	if o.State != "" {
		st, err := ParseState(string(o.State))
		if err != nil {
			return ListPage{}, err
		}
		state = st.code()
	}
	from, to := "0", strconv.FormatInt(millis(maxDue), 10)
	if !o.DueFrom.IsZero() {
		// Due scores are microseconds, rounded up: the first one at or
		// after DueFrom is DueFrom rounded up to the µs (dueScore).
		from = dueScore(o.DueFrom)
	}
	if !o.DueTo.IsZero() {
		to = formatMicros(o.DueTo.UnixMicro())
	}
	curDue, curID, err := parseCursor(o.Cursor)
	if err != nil {
		return ListPage{}, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return ListPage{}, err
	}
	// Every shard lists its first Limit timers after the cursor; the merge
	// keeps the first Limit of all. (due, id) orders timers across shards as
	// within one, so the cursor is the same single position either way and
	// stays stable however timers move between shards' states.
	calls := make([]call, len(l.spaces))
	for k := range calls {
		calls[k] = call{shard: k, args: []any{state, from, to, o.Limit, curDue, curID}}
	}
	replies, err := q.runMany(ctx, l, lua.List, calls)
	if err != nil {
		return ListPage{}, errorf("list: %w", err)
	}
	page := ListPage{}
	more := false
	for k, reply := range replies {
		r, err := replyStrings(reply)
		if err != nil || len(r) < 3 {
			return ListPage{}, errorf("list: unexpected reply %v", reply)
		}
		nb := int(atoi(r[2]))
		if nb < 0 || len(r) < 3+4*nb || (len(r)-3-4*nb)%2 != 0 {
			return ListPage{}, errorf("list: unexpected reply %v", reply)
		}
		more = more || r[1] != ""
		for i := range nb {
			b := r[3+4*i:]
			page.Malformed = append(page.Malformed, MalformedRecord{ID: b[0], Shard: k, Raw: []byte(b[1]), Reason: b[2], pos: parseScore(b[3]).UnixMicro()})
		}
		r = r[4*nb+1:] // the good pairs start at r[2]
		for i := 2; i < len(r); i += 2 {
			t, err := decodeRecord(r[i], r[i+1])
			if err != nil {
				return ListPage{}, err
			}
			page.Timers = append(page.Timers, t)
		}
	}
	// Malformed records take their place in the (due, id) order like
	// timers: they count towards Limit, and the cursor may stop at one.
	type entry struct {
		due int64 // µs
		id  string
		bad int // index in page.Malformed + 1; 0 for a timer
		t   Timer
	}
	all := make([]entry, 0, len(page.Timers)+len(page.Malformed))
	for _, t := range page.Timers {
		all = append(all, entry{due: t.Due.UnixMicro(), id: t.ID, t: t})
	}
	for i, b := range page.Malformed {
		all = append(all, entry{due: b.pos, id: b.ID, bad: i + 1})
	}
	slices.SortFunc(all, func(a, b entry) int {
		if a.due != b.due {
			return cmp.Compare(a.due, b.due)
		}
		return strings.Compare(a.id, b.id)
	})
	if len(all) > o.Limit {
		all, more = all[:o.Limit], true
	}
	out := ListPage{}
	for _, e := range all {
		if e.bad > 0 {
			out.Malformed = append(out.Malformed, page.Malformed[e.bad-1])
		} else {
			out.Timers = append(out.Timers, e.t)
		}
	}
	if more {
		// The cursor must parse again: skip back over a malformed record
		// whose ID is no timer ID.
		for i := len(all) - 1; i >= 0; i-- {
			if ValidateID(all[i].id) == nil {
				out.NextCursor = formatMicros(all[i].due) + ":" + all[i].id
				break
			}
		}
	}
	return out, nil
}

// parseCursor splits "<due>:<id>", the form List hands out, due a due
// score string ("<ms>" or "<ms>.<us>").
func parseCursor(c string) (string, string, error) {
	if c == "" {
		return "", "", nil
	}
	due, id, ok := cutCursor(c)
	if !ok {
		return "", "", fmt.Errorf("%w: cursor %q is not one that List returned; start with an empty cursor", ErrInvalidOptions, c)
	}
	return due, id, nil
}

func cutCursor(c string) (string, string, bool) {
	for i := 0; i < len(c); i++ {
		if c[i] == ':' {
			due, id := c[:i], c[i+1:]
			if !isDueScore(due) || ValidateID(id) != nil {
				return "", "", false
			}
			return due, id, true
		}
	}
	return "", "", false
}
