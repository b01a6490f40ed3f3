package queue

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/timerq/timerq/scripts/lua"
)

// ListOptions selects a page of timers. The zero value lists the first 100
// timers of every state.
type ListOptions struct {
	// State limits the listing to one state; empty lists all.
	State State
	// DueFrom and DueTo bound the due times, inclusive; zero means
	// unbounded. On a shard of layout 2 they bound a settled timer's fire
	// or cancel time instead (docs/redis-layout.md, "Layout 2").
	DueFrom, DueTo time.Time
	// Limit is the page size, 1..MaxBatch; 0 means DefaultListLimit (100).
	Limit int
	// Cursor continues from a previous page's NextCursor; empty starts over.
	Cursor string
	// Owner, when set, lists only the owner's timers, and Labels only the
	// timers that carry every label given (key and value). A filtered
	// page may hold fewer than Limit timers, even none, and still have a
	// NextCursor: page on until it is empty. To list one owner's timers
	// quickly, read NextWake, or cancel them with CancelMatching, which
	// use the owner index.
	Owner  string
	Labels map[string]string
}

// ListPage is one page of a listing.
type ListPage struct {
	// Timers are ordered by due time, then ID. On a shard of layout 2 the
	// scheduled timers come first, by due time, then the fired ones and
	// then the cancelled ones, each by the time they settled.
	Timers []Timer
	// Malformed are the records of the page that are not records timerq
	// writes, skipped rather than failing the listing; nil when there are
	// none. One that is due is quarantined by the next claim.
	Malformed []MalformedRecord
	// NextCursor fetches the next page; empty on the last page.
	NextCursor string
	// order is each of Timers' place in the listing's order, in µs: the
	// score the list script orders it by (listOrder).
	order []int64
}

// Where layout 2 keeps settled timers in the set of due times, in ms
// (scripts/lua/includes/pending_end.lua).
const (
	bandFired     = int64(1) << 50
	bandCancelled = int64(1) << 51
)

// listOrder is t's place in the order of a listing of a shard of layout
// layout, in µs: its due time, or on layout 2 a settled timer's band plus
// the time it settled, as the list script orders them.
func listOrder(t Timer, layout int) int64 {
	switch {
	case layout == 2 && t.State == StateFired:
		return (bandFired + t.FiredAt.UnixMilli()) * 1000
	case layout == 2 && t.State == StateCancelled:
		return (bandCancelled + t.CancelledAt.UnixMilli()) * 1000
	}
	return t.Due.UnixMicro()
}

// List returns one page of timers ordered by due time. Paging is stable
// under concurrent changes: a page starts strictly after the previous one
// ended, so a timer is never listed twice in one state.
func (q *Queue) List(ctx context.Context, o ListOptions) (ListPage, error) {
	args, err := listArgs(&o)
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
		calls[k] = call{shard: k, args: args}
	}
	replies, err := q.runMany(ctx, l, lua.List, calls)
	if err != nil {
		return ListPage{}, errorf("list: %w", err)
	}
	page := ListPage{}
	more := false
	for k, reply := range replies {
		shardMore, err := page.addReply(k, l.layoutOf(k), reply)
		if err != nil {
			return ListPage{}, err
		}
		more = more || shardMore
	}
	out := page.first(o.Limit, more)
	if o.Owner != "" || len(o.Labels) > 0 {
		f := metaFilter{owner: o.Owner, labels: o.Labels}
		out.Timers = slices.DeleteFunc(out.Timers, func(t Timer) bool { return !f.selects(t.meta()) })
	}
	return out, nil
}

// listArgs checks o, filling in its default Limit, and returns the list
// script's arguments: state code, due range, limit and cursor.
func listArgs(o *ListOptions) ([]any, error) {
	if o.Limit == 0 {
		o.Limit = DefaultListLimit
	}
	if o.Limit < 1 || o.Limit > MaxBatch {
		return nil, fmt.Errorf("%w: list limit %d is outside 1..%d", ErrInvalidOptions, o.Limit, MaxBatch)
	}
	state := ""
	if o.State != "" {
		st, err := ParseState(string(o.State))
		if err != nil {
			return nil, err
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
	if o.Owner != "" {
		if err := ValidateOwner(o.Owner); err != nil {
			return nil, err
		}
	}
	if err := ValidateLabels(o.Labels); err != nil {
		return nil, err
	}
	curDue, curID, err := parseCursor(o.Cursor)
	if err != nil {
		return nil, err
	}
	return []any{state, from, to, o.Limit, curDue, curID}, nil
}

// addReply adds shard k's list reply to page, the shard being of layout
// layout, and says whether that shard has more.
func (page *ListPage) addReply(k, layout int, reply any) (bool, error) {
	r, err := replyStrings(reply)
	if err != nil || len(r) < 3 {
		return false, errorf("list: unexpected reply %v", reply)
	}
	nb := int(atoi(r[2]))
	if nb < 0 || len(r) < 3+4*nb || (len(r)-3-4*nb)%3 != 0 {
		return false, errorf("list: unexpected reply %v", reply)
	}
	for i := range nb {
		b := r[3+4*i:]
		page.Malformed = append(page.Malformed, MalformedRecord{ID: b[0], Shard: k, Raw: []byte(b[1]), Reason: b[2], pos: parseScore(b[3]).UnixMicro()})
	}
	more := r[1] != ""
	r = r[4*nb+1:] // the good triples start at r[2]
	for i := 2; i < len(r); i += 3 {
		t, err := decodeRecord(r[i], r[i+1])
		if err == nil {
			t, err = t.withMeta(r[i+2])
		}
		if err != nil {
			return false, err
		}
		page.Timers = append(page.Timers, t)
		page.order = append(page.order, listOrder(t, layout))
	}
	return more, nil
}

// first returns the first limit timers and malformed records of page,
// the shards' pages merged, with the cursor after them if there are more.
func (page *ListPage) first(limit int, more bool) ListPage {
	// Malformed records take their place in the (due, id) order like
	// timers: they count towards Limit, and the cursor may stop at one.
	type entry struct {
		due int64 // µs
		id  string
		bad int // index in page.Malformed + 1; 0 for a timer
		t   Timer
	}
	all := make([]entry, 0, len(page.Timers)+len(page.Malformed))
	for i, t := range page.Timers {
		all = append(all, entry{due: page.order[i], id: t.ID, t: t})
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
	if len(all) > limit {
		all, more = all[:limit], true
	}
	out := ListPage{}
	for _, e := range all {
		if e.bad > 0 {
			out.Malformed = append(out.Malformed, page.Malformed[e.bad-1])
		} else {
			out.Timers = append(out.Timers, e.t)
		}
	}
	if !more {
		return out
	}
	// The cursor must parse again: skip back over a malformed record
	// whose ID is no timer ID.
	for i := len(all) - 1; i >= 0; i-- {
		if ValidateID(all[i].id) == nil {
			out.NextCursor = formatMicros(all[i].due) + ":" + all[i].id
			break
		}
	}
	return out
}

// isBandScore reports whether s is the score of a settled timer of
// layout 2 as List's cursor carries it: whole or fractional ms in the
// fired or cancelled band.
func isBandScore(s string) bool {
	ms, frac, ok := strings.Cut(s, ".")
	if ok && (len(frac) != 3 || !isDigits(frac)) || len(ms) != 16 || !isDigits(ms) {
		return false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	return err == nil && n >= bandFired && n < 2*bandCancelled
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
			if !isDueScore(due) && !isBandScore(due) || ValidateID(id) != nil {
				return "", "", false
			}
			return due, id, true
		}
	}
	return "", "", false
}
