package queue

import (
	"context"
	"fmt"
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
	// Now is the Redis server's clock when the claim ran.
	Now time.Time
	// Fired lists the timers fired by this claim, in due order.
	Fired []Fired
	// NextDue is the earliest due time still pending, or zero when no timer
	// is scheduled. A poller sleeps until then.
	NextDue time.Time
}

// Claim fires up to limit (1..MaxBatch) due timers in one atomic script:
// each leaves the due set, is marked fired, gets an entry in the fire
// stream and a wakeup on its channel. However many callers race, each timer
// is fired by exactly one Claim. Pollers call it; applications rarely need
// to.
func (q *Queue) Claim(ctx context.Context, limit int) (ClaimResult, error) {
	if limit < 1 || limit > MaxBatch {
		return ClaimResult{}, fmt.Errorf("%w: claim limit %d is outside 1..%d", ErrInvalidOptions, limit, MaxBatch)
	}
	reply, err := q.run(ctx, claimScript, limit, q.opts.retentionMillis(), q.opts.streamMaxLen(), q.timerChannels)
	if err != nil {
		return ClaimResult{}, fmt.Errorf("timerq: claim: %w", err)
	}
	r, err := replyStrings(reply)
	if err != nil || len(r) < 2 || (len(r)-2)%3 != 0 {
		return ClaimResult{}, fmt.Errorf("timerq: claim: unexpected reply %v", reply)
	}
	res := ClaimResult{Now: fromMillis(atoi(r[0]))}
	if r[1] != "" {
		res.NextDue = fromMillis(atoi(r[1]))
	}
	if n := (len(r) - 2) / 3; n > 0 {
		res.Fired = make([]Fired, n)
		for i := range res.Fired {
			f := r[2+3*i:]
			res.Fired[i] = Fired{ID: f[0], Due: fromMillis(atoi(f[1])), FiredAt: res.Now, Payload: []byte(f[2])}
		}
	}
	return res, nil
}

// Purge removes up to limit (1..MaxBatch) fired and cancelled records whose
// retention has passed, and reports how many it removed and whether more
// are waiting. Once purged, a timer's ID reads as not found and may be
// scheduled again. It is idempotent, so overlapping callers are safe.
func (q *Queue) Purge(ctx context.Context, limit int) (removed int, more bool, err error) {
	if limit < 1 || limit > MaxBatch {
		return 0, false, fmt.Errorf("%w: purge limit %d is outside 1..%d", ErrInvalidOptions, limit, MaxBatch)
	}
	reply, err := q.run(ctx, purgeScript, limit)
	if err != nil {
		return 0, false, fmt.Errorf("timerq: purge: %w", err)
	}
	r, err := replyStrings(reply)
	if err != nil || len(r) != 2 {
		return 0, false, fmt.Errorf("timerq: purge: unexpected reply %v", reply)
	}
	return int(atoi(r[0])), atoi(r[1]) > 0, nil
}

// Stats is a snapshot of a namespace, taken atomically.
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
}

// Stats returns counts per state and the overdue backlog.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	reply, err := q.run(ctx, statsScript)
	if err != nil {
		return Stats{}, fmt.Errorf("timerq: stats: %w", err)
	}
	r, err := replyStrings(reply)
	if err != nil || len(r) != 6 {
		return Stats{}, fmt.Errorf("timerq: stats: unexpected reply %v", reply)
	}
	s := Stats{
		Now:       fromMillis(atoi(r[0])),
		Scheduled: atoi(r[1]),
		Fired:     atoi(r[2]),
		Cancelled: atoi(r[3]),
		Overdue:   atoi(r[5]),
	}
	if r[4] != "" {
		s.EarliestDue = fromMillis(atoi(r[4]))
		if s.Overdue > 0 {
			s.OldestOverdueAge = s.Now.Sub(s.EarliestDue)
		}
	}
	return s, nil
}

// ListOptions selects a page of timers. The zero value lists the first 100
// timers of every state.
type ListOptions struct {
	// State limits the listing to one state; empty lists all.
	State State
	// DueFrom and DueTo bound the due times, inclusive; zero means unbounded.
	DueFrom, DueTo time.Time
	// Limit is the page size, 1..MaxBatch; 0 means 100.
	Limit int
	// Cursor continues from a previous page's NextCursor; empty starts over.
	Cursor string
}

// ListPage is one page of a listing.
type ListPage struct {
	// Timers are ordered by due time, then ID.
	Timers []Timer
	// NextCursor fetches the next page; empty on the last page.
	NextCursor string
}

// List returns one page of timers ordered by due time. Paging is stable
// under concurrent changes: a page starts strictly after the previous one
// ended, so a timer is never listed twice in one state.
func (q *Queue) List(ctx context.Context, o ListOptions) (ListPage, error) {
	if o.Limit == 0 {
		o.Limit = 100
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
	from, to := int64(0), millis(maxDue)
	if !o.DueFrom.IsZero() {
		// Stored due times are whole milliseconds, rounded up: the first
		// one at or after DueFrom is DueFrom rounded up.
		from = dueMillis(o.DueFrom)
	}
	if !o.DueTo.IsZero() {
		to = millis(o.DueTo)
	}
	curDue, curID, err := parseCursor(o.Cursor)
	if err != nil {
		return ListPage{}, err
	}
	reply, err := q.run(ctx, listScript, state, from, to, o.Limit, curDue, curID)
	if err != nil {
		return ListPage{}, fmt.Errorf("timerq: list: %w", err)
	}
	r, err := replyStrings(reply)
	if err != nil || len(r)%2 != 0 {
		return ListPage{}, fmt.Errorf("timerq: list: unexpected reply %v", reply)
	}
	page := ListPage{}
	if r[1] != "" {
		page.NextCursor = r[0] + ":" + r[1]
	}
	for i := 2; i < len(r); i += 2 {
		t, err := decodeRecord(r[i], r[i+1])
		if err != nil {
			return ListPage{}, err
		}
		page.Timers = append(page.Timers, t)
	}
	return page, nil
}

// parseCursor splits "<due_ms>:<id>", the form List hands out.
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
			if due == "" || ValidateID(id) != nil {
				return "", "", false
			}
			for _, d := range due {
				if d < '0' || d > '9' {
					return "", "", false
				}
			}
			return due, id, true
		}
	}
	return "", "", false
}
