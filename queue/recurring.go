package queue

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/schedule"
	"github.com/timerq/timerq/scripts/lua"
)

// ErrRecurringNotFound means no recurring schedule with that ID exists in
// the namespace.
var ErrRecurringNotFound = errors.New("timerq: recurring schedule not found")

// Bounds and defaults of recurring schedules.
const (
	// MaxRecurringIDBytes is the longest schedule ID: an occurrence's ID
	// appends "@" and up to 15 digits and must stay within MaxIDBytes.
	MaxRecurringIDBytes = MaxIDBytes - 16
	// DefaultAhead is how many occurrences are kept armed when
	// Recurring.Ahead is 0.
	DefaultAhead = 2
	// MaxAhead bounds Recurring.Ahead.
	MaxAhead = 100
	// DefaultCatchUpLimit is Recurring.CatchUpLimit when it is 0.
	DefaultCatchUpLimit = 10
	// maxMissedScan bounds how many missed occurrences one arming examines;
	// older ones are skipped unexamined.
	maxMissedScan = 100_000
)

// CatchUp says what happens to the occurrences a schedule missed because
// no worker ran (or Redis was down) when they were due, beyond those
// already armed: armed occurrences are ordinary timers and fire late.
type CatchUp string

// Catch-up policies.
const (
	// CatchUpOnce fires one occurrence, the latest missed, for all of them
	// (the default).
	CatchUpOnce CatchUp = "once"
	// CatchUpSkip skips every missed occurrence and fires the next one.
	CatchUpSkip CatchUp = "skip"
	// CatchUpAll fires each missed occurrence, the latest CatchUpLimit.
	CatchUpAll CatchUp = "all"
)

// Recurring is a recurring schedule: a spec (cron) or an interval, a
// payload and its policies. Each occurrence is an ordinary timer with ID
// OccurrenceID(ID, nominal time), so it fires exactly once, through the
// fire stream, its own wakeup channel and a record that Get and List show.
type Recurring struct {
	// ID names the schedule: 1-240 bytes of UTF-8 without control characters.
	ID string
	// Spec is a cron spec (see schedule.Parse): 5 fields, 6 with seconds
	// first, or a descriptor such as @daily. Set Spec or Every, not both.
	Spec string
	// Location is the time zone Spec is read in; nil means UTC.
	Location *time.Location
	// Every is a fixed interval, at least 1 ms.
	Every time.Duration
	// Anchor places an interval's occurrences at Anchor + k*Every; zero
	// means the time of creation (by the Redis server's clock), so the first
	// occurrence is one interval after it.
	Anchor time.Time
	// Payload is each occurrence's payload.
	Payload []byte

	// CatchUp is the policy for missed occurrences; "" means CatchUpOnce.
	CatchUp CatchUp
	// CatchUpLimit caps CatchUpAll; 0 means DefaultCatchUpLimit.
	CatchUpLimit int
	// Jitter delays each occurrence by a spread in [0, Jitter), seeded by
	// the schedule ID and the occurrence's nominal time (Jitter of
	// JitterOf), so every worker computes the same delay. 0 means none.
	Jitter time.Duration
	// End, if set, is the last instant an occurrence may be nominally due.
	End time.Time
	// MaxCount, if above 0, is how many occurrences fire in all.
	MaxCount int64
	// Ahead is how many occurrences are kept armed ahead of time, 1..100;
	// 0 means DefaultAhead (2). With 2 or more, a worker dying between
	// firing one occurrence and arming the next leaves the next one armed.
	Ahead int
	// Overlap says whether Consume hands a consumer group an occurrence
	// while the group still has the schedule's previous occurrence
	// unacknowledged; "" means OverlapAllow (see Overlap).
	Overlap Overlap
	// Endpoint, when set, names the namespace's endpoint (Endpoints.Put)
	// that each occurrence's fire is delivered to, as NewTimer.Endpoint
	// does for a timer. Creating or updating a schedule that names an
	// endpoint the namespace lacks is refused with ErrEndpointNotFound.
	Endpoint string
	// FlowKey, when set, is each occurrence's flow key, as NewTimer.FlowKey
	// is a timer's: its delivery is held to the key's flow policy.
	FlowKey string
	// URL, with Endpoint, delivers each occurrence's fire to this URL
	// instead of the endpoint's, as NewTimer.URL does for a timer; the
	// namespace's delivery policy must allow timer URLs.
	URL string
}

// RecurringState is where a schedule is in its life.
type RecurringState string

// The states of a schedule.
const (
	RecurringActive RecurringState = "active"
	RecurringPaused RecurringState = "paused"
	// RecurringEnded means nothing more will be armed: its End passed, its
	// MaxCount was reached, or its spec has no further occurrence. Armed
	// occurrences still fire.
	RecurringEnded RecurringState = "ended"
)

// Occurrence is one armed occurrence of a schedule.
type Occurrence struct {
	// ID is the occurrence's timer ID, OccurrenceID(schedule, Nominal).
	ID string
	// Nominal is when the spec says it occurs; Due adds the jitter.
	Nominal time.Time
	Due     time.Time
}

// RecurringInfo is a schedule as stored, with its state.
type RecurringInfo struct {
	Recurring
	State RecurringState
	// Version counts creations, updates, pauses and resumes that changed
	// the schedule: pausing a paused one leaves it.
	Version int64
	// Count is how many occurrences were armed and not cancelled: those
	// fired plus those pending.
	Count int64
	// Last is the nominal time of the last occurrence armed or skipped.
	Last time.Time
	// Pending are the armed occurrences not yet fired, in due order.
	Pending []Occurrence
	// Next are the next occurrences' nominal times after Now (up to 5;
	// none unless active).
	Next []time.Time
	// Now is the Redis server's clock when the schedule was read.
	Now                  time.Time
	CreatedAt, UpdatedAt time.Time
}

// OccurrenceID returns the timer ID of the occurrence of schedule
// scheduleID nominally due at nominal: "<scheduleID>@<Unix ms>", e.g.
// "report@1767258000000". The form is fixed, so a consumer sees the schedule
// in a fire event's ID and a waiter can Wait for the 09:00 occurrence. The
// nominal time is the one the spec gives, before jitter.
func OccurrenceID(scheduleID string, nominal time.Time) string {
	return scheduleID + "@" + strconv.FormatInt(nominal.UnixMilli(), 10)
}

// ParseOccurrenceID splits an occurrence's timer ID into its schedule ID
// and nominal time. ok is false when id does not have the form
// "<scheduleID>@<Unix ms>" (1 to 15 ASCII digits). That form is reserved
// for occurrences: Schedule refuses it for a plain timer (ErrOccurrenceID).
func ParseOccurrenceID(id string) (scheduleID string, nominal time.Time, ok bool) {
	sid, digits, ok := keyspace.SplitOccurrence(id)
	if !ok {
		return "", time.Time{}, false
	}
	ms, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	return sid, fromMillis(ms), true
}

// JitterOf returns the delay of the occurrence of scheduleID nominally due
// at nominal under a jitter of j: the first 8 bytes of
// SHA-256("timerq.jitter.v1\x00" + scheduleID + "\x00" + decimal nominal
// Unix ms), big-endian, modulo j in milliseconds. It is fixed across
// releases, so every worker arms the same due time.
func JitterOf(scheduleID string, nominal time.Time, j time.Duration) time.Duration {
	if j < 2*time.Millisecond {
		return 0
	}
	h := sha256.Sum256([]byte("timerq.jitter.v1\x00" + scheduleID + "\x00" + strconv.FormatInt(nominal.UnixMilli(), 10)))
	return time.Duration(binary.BigEndian.Uint64(h[:8])%uint64(j.Milliseconds())) * time.Millisecond
}

// body is the JSON part of a schedule record, which no script reads
// (records written before the overlap field excepted: see Overlap).
type body struct {
	Spec         string `json:"spec,omitempty"`
	TZ           string `json:"tz,omitempty"`
	EveryMs      int64  `json:"every_ms,omitempty"`
	AnchorMs     int64  `json:"anchor_ms,omitempty"`
	Payload      []byte `json:"payload,omitempty"`
	CatchUp      string `json:"catch_up"`
	CatchUpLimit int    `json:"catch_up_limit"`
	JitterMs     int64  `json:"jitter_ms,omitempty"`
	EndMs        int64  `json:"end_ms,omitempty"`
	MaxCount     int64  `json:"max_count,omitempty"`
	Ahead        int    `json:"ahead"`
	// Overlap is read, never written: a record written before the
	// overlap field of the record (decodeSchedule) kept the skip policy
	// here, where prelude.lua's sdecode still finds it.
	Overlap   string `json:"overlap,omitempty"`
	Endpoint  string `json:"endpoint,omitempty"`
	FlowKey   string `json:"flow_key,omitempty"`
	URL       string `json:"url,omitempty"`
	CreatedMs int64  `json:"created_ms"`
	UpdatedMs int64  `json:"updated_ms"`
}

// validateRecurring checks r and fills in its defaults.
func (q *Queue) validateRecurring(r Recurring) (Recurring, error) {
	if err := ValidateID(r.ID); err != nil {
		return r, err
	}
	if len(r.ID) > MaxRecurringIDBytes {
		return r, fmt.Errorf("%w: schedule ID is %d bytes long; use at most %d, so that its occurrences' IDs fit", ErrInvalidID, len(r.ID), MaxRecurringIDBytes)
	}
	bad := func(format string, args ...any) (Recurring, error) {
		return r, fmt.Errorf("%w: schedule %q: "+format, append([]any{schedule.ErrInvalidSchedule, r.ID}, args...)...)
	}
	switch {
	case r.Spec == "" && r.Every == 0:
		return bad("set a cron Spec or an Every interval")
	case r.Spec != "" && r.Every != 0:
		return bad("set a cron Spec or an Every interval, not both")
	case r.Every != 0 && r.Location != nil:
		return bad("a Location applies to a cron Spec only; an interval is elapsed time")
	case r.Every != 0 && r.Every < time.Millisecond:
		return bad("interval %v is below 1ms", r.Every)
	case r.Spec == "" && !r.Anchor.IsZero() && ValidateDue(r.Anchor) != nil:
		return bad("Anchor %v is outside 1970-9999", r.Anchor)
	case r.Spec != "" && !r.Anchor.IsZero():
		return bad("Anchor applies to an Every interval only")
	}
	if r.Spec != "" {
		if _, err := schedule.Parse(r.Spec, r.Location); err != nil {
			return r, err
		}
	}
	switch r.CatchUp {
	case "":
		r.CatchUp = CatchUpOnce
	case CatchUpOnce, CatchUpSkip, CatchUpAll:
	default:
		return bad("catch-up policy %q is not one of once, skip, all", r.CatchUp)
	}
	switch {
	case r.CatchUpLimit < 0:
		return bad("CatchUpLimit %d is negative; use 0 for the default %d", r.CatchUpLimit, DefaultCatchUpLimit)
	case r.CatchUpLimit == 0:
		r.CatchUpLimit = DefaultCatchUpLimit
	}
	switch {
	case r.Ahead < 0 || r.Ahead > MaxAhead:
		return bad("Ahead %d is outside 1..%d; use 0 for the default %d", r.Ahead, MaxAhead, DefaultAhead)
	case r.Ahead == 0:
		r.Ahead = DefaultAhead
	}
	if r.Endpoint != "" {
		if err := ValidateEndpointName(r.Endpoint); err != nil {
			return r, fmt.Errorf("schedule %q: %w", r.ID, err)
		}
	}
	if r.FlowKey != "" {
		if err := ValidateFlowKey(r.FlowKey); err != nil {
			return r, fmt.Errorf("schedule %q: %w", r.ID, err)
		}
	}
	if r.URL != "" {
		if r.Endpoint == "" {
			return r, fmt.Errorf("schedule %q: %w: a delivery URL needs an endpoint to take its secrets and policy from; set Endpoint", r.ID, ErrInvalidOptions)
		}
		if err := ValidateTimerURL(r.URL, q.opts.TimerURLAllow); err != nil {
			return r, fmt.Errorf("schedule %q: %w", r.ID, err)
		}
	}
	ov, err := r.Overlap.normalize()
	if err != nil {
		return bad("%v", err)
	}
	r.Overlap = ov
	if r.Jitter < 0 || r.MaxCount < 0 {
		return bad("Jitter and MaxCount must not be negative")
	}
	if !r.End.IsZero() && ValidateDue(r.End) != nil {
		return bad("End %v is outside 1970-9999", r.End)
	}
	if len(r.Payload) > q.opts.MaxPayloadBytes {
		return r, fmt.Errorf("%w: schedule %q has %d bytes of payload, over the limit of %d; store large data elsewhere and keep a reference",
			ErrPayloadTooLarge, r.ID, len(r.Payload), q.opts.MaxPayloadBytes)
	}
	return r, nil
}

func (r Recurring) body(created, updated int64) body {
	b := body{Spec: r.Spec, EveryMs: r.Every.Milliseconds(), Payload: r.Payload,
		CatchUp: string(r.CatchUp), CatchUpLimit: r.CatchUpLimit, JitterMs: r.Jitter.Milliseconds(),
		MaxCount: r.MaxCount, Ahead: r.Ahead, Endpoint: r.Endpoint, URL: r.URL, FlowKey: r.FlowKey, CreatedMs: created, UpdatedMs: updated}
	if r.Every%time.Millisecond != 0 {
		b.EveryMs = 0 // refused by validate; keep ms resolution honest
	}
	if r.Location != nil {
		b.TZ = r.Location.String()
	}
	if !r.Anchor.IsZero() {
		b.AnchorMs = r.Anchor.UnixMilli()
	}
	if !r.End.IsZero() {
		b.EndMs = r.End.UnixMilli()
	}
	return b
}

func (b body) recurring(id string) (Recurring, error) {
	r := Recurring{ID: id, Spec: b.Spec, Every: time.Duration(b.EveryMs) * time.Millisecond, Payload: b.Payload,
		CatchUp: CatchUp(b.CatchUp), CatchUpLimit: b.CatchUpLimit, Jitter: time.Duration(b.JitterMs) * time.Millisecond,
		MaxCount: b.MaxCount, Ahead: b.Ahead, Overlap: OverlapAllow, Endpoint: b.Endpoint, URL: b.URL, FlowKey: b.FlowKey}
	if b.Overlap != "" {
		r.Overlap = Overlap(b.Overlap)
	}
	if b.TZ != "" {
		loc, err := time.LoadLocation(b.TZ)
		if err != nil {
			return r, errorf("schedule %q: time zone %q: %w; install the tz database (tzdata) on this host", id, b.TZ, err)
		}
		r.Location = loc
	}
	if b.AnchorMs != 0 {
		r.Anchor = fromMillis(b.AnchorMs)
	}
	if b.EndMs != 0 {
		r.End = fromMillis(b.EndMs)
	}
	return r, nil
}

// Schedule returns the schedule r describes.
func (r Recurring) Schedule() (schedule.Schedule, error) {
	if r.Every > 0 {
		return schedule.Every(r.Every, r.Anchor)
	}
	return schedule.Parse(r.Spec, r.Location)
}

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
	// a JSON object, follows armed (scripts/lua/prelude.lua, sdecode).
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

// plan is what to arm for one schedule.
type plan struct {
	arms  []Occurrence
	last  time.Time // the last nominal time armed or skipped; zero if none
	ended bool
}

// planFrom computes the occurrences to arm after base so that want of them
// are pending in the future, given count already armed, applying the
// catch-up policy to those due at or before now.
func planFrom(r Recurring, base, now time.Time, count int64, want int) (plan, error) {
	sch, err := r.Schedule()
	if err != nil {
		return plan{}, err
	}
	var p plan
	var missed []time.Time
	keepMissed := 1
	switch r.CatchUp {
	case CatchUpSkip:
		keepMissed = 0
	case CatchUpAll:
		keepMissed = r.CatchUpLimit
	}
	future := 0
	t := base
	for scanned := 0; future < want; {
		n := sch.Next(t)
		if n.IsZero() || (!r.End.IsZero() && n.After(r.End)) || ValidateDue(n) != nil {
			p.ended = true
			break
		}
		t = n
		if !n.After(now) {
			p.last = n
			if keepMissed > 0 {
				missed = append(missed, n)
				if len(missed) > keepMissed {
					missed = missed[1:]
				}
			}
			if scanned++; scanned >= maxMissedScan {
				t = now // skip the rest unexamined
			}
			continue
		}
		// Missed ones are armed before future ones, oldest first.
		if len(missed) > 0 {
			p.arms, missed = append(p.arms, occurrences(r, missed)...), nil
		}
		p.arms = append(p.arms, occurrence(r, n))
		p.last = n
		future++
	}
	if len(missed) > 0 {
		p.arms = append(p.arms, occurrences(r, missed)...)
	}
	if r.MaxCount > 0 && count+int64(len(p.arms)) >= r.MaxCount {
		p.arms = p.arms[:max(r.MaxCount-count, 0)]
		if len(p.arms) > 0 {
			p.last = p.arms[len(p.arms)-1].Nominal
		}
		p.ended = true
	}
	return p, nil
}

func occurrences(r Recurring, ts []time.Time) []Occurrence {
	out := make([]Occurrence, len(ts))
	for i, t := range ts {
		out[i] = occurrence(r, t)
	}
	return out
}

func occurrence(r Recurring, nominal time.Time) Occurrence {
	nominal = nominal.Truncate(time.Millisecond).UTC()
	return Occurrence{ID: OccurrenceID(r.ID, nominal), Nominal: nominal, Due: nominal.Add(JitterOf(r.ID, nominal, r.Jitter))}
}

func lastArg(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
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

// keepLast, as putArgs.last, leaves the schedule's last armed time as it is.
const keepLast = "-"

// putArgs is one call of recur_put.lua, field by field in its ARGV order
// (the script's header says what each means).
type putArgs struct {
	op string // create, update, pause, resume or delete
	id string
	// expected is the version the schedule must have, "" for any; for
	// create, the count to start from ("" for 0).
	expected string
	body     string // the record's JSON, "" to keep it
	state    recState
	last     string // the last armed nominal time in Unix ms, "" for none, or keepLast
	payload  []byte
	overlap  Overlap // the policy after the op, "" to keep it
	// endpoint is what the occurrences it arms deliver to, "" for none
	// (deliveryOf).
	endpoint string
	arms     []Occurrence
}

// put runs recur_put.lua on the shard of the schedule a.id.
func (q *Queue) put(ctx context.Context, a putArgs) (string, time.Time, string, error) {
	l, err := q.layout(ctx)
	if err != nil {
		return "", time.Time{}, "", err
	}
	if _, url := splitDeliver(a.endpoint); url != "" && (a.op == "create" || a.op == "update") {
		if err := q.checkTimerURLs(ctx, fmt.Sprintf("schedule %q", a.id)); err != nil {
			return "", time.Time{}, "", err
		}
	}
	state := ""
	if a.state != 0 {
		state = a.state.arg()
	}
	k := l.scheduleShard(a.id)
	args := []any{a.op, a.id, a.expected, a.body, state, a.last, a.payload, l.spaces[k].Wake(), l.spaces[k].TimerChannelPrefix(),
		q.opts.retentionMillis(), string(a.overlap), a.endpoint}
	for _, o := range a.arms {
		args = append(args, o.Nominal.UnixMilli(), o.Due.UnixMilli())
	}
	v, err := q.runKeysTries(ctx, l, lua.RecurPut, k, lua.RecurPut.Keys(l.spaces[k], a.id), migrationAttempts, args...)
	if err != nil {
		return "", time.Time{}, "", err
	}
	r, err := replyStrings(v)
	if err != nil || len(r) != 3 {
		return "", time.Time{}, "", fmt.Errorf("unexpected reply %v", v)
	}
	if r[0] == "debounce" {
		return "", time.Time{}, "", fmt.Errorf("%w: %q is a debounce key with an open window in namespace %q (Debounce); use another schedule ID",
			ErrScheduleIDIsDebounceKey, a.id, q.opts.Namespace)
	}
	return r[0], fromMillis(atoi(r[1])), r[2], nil
}

// stateCode is the state a plan leaves an active schedule in.
func stateCode(ended bool) recState {
	if ended {
		return recEnded
	}
	return recActive
}

// Put creates the schedule r and arms its first occurrences,
// unless a schedule with that ID exists, in which case it returns the
// existing one with created false and changes nothing (use RecurringTimers.Update
// to change it). Occurrence times are computed from the Redis server's clock.
func (rt RecurringTimers) Put(ctx context.Context, r Recurring) (info RecurringInfo, created bool, err error) {
	q := rt.q
	if r, err = q.validateRecurring(r); err != nil {
		return RecurringInfo{}, false, err
	}
	now, s, err := q.loadOne(ctx, r.ID)
	if err != nil {
		return RecurringInfo{}, false, errorf("put schedule %q: %w", r.ID, err)
	}
	if s != nil {
		return s.info(now), false, nil
	}
	if r.Every > 0 && r.Anchor.IsZero() {
		r.Anchor = now
	}
	p, err := planFrom(r, now, now, 0, r.Ahead)
	if err != nil {
		return RecurringInfo{}, false, err
	}
	b, _ := json.Marshal(r.body(now.UnixMilli(), now.UnixMilli()))
	status, now, rec, err := q.put(ctx, putArgs{op: "create", id: r.ID, body: string(b), state: stateCode(p.ended), last: lastArg(p.last),
		payload: r.Payload, overlap: r.Overlap, endpoint: deliveryOf(r.Endpoint, r.URL, r.FlowKey), arms: p.arms})
	if err != nil {
		return RecurringInfo{}, false, errorf("put schedule %q: %w", r.ID, err)
	}
	info, err = q.afterPut(ctx, r.ID, now, rec)
	return info, status == "created", err
}

// afterPut reads a schedule back for the reply, with its pending occurrences.
func (q *Queue) afterPut(ctx context.Context, id string, now time.Time, rec string) (RecurringInfo, error) {
	info, err := q.Recurring().Get(ctx, id)
	if err != nil && rec != "" {
		s, derr := decodeSchedule(id, rec, "")
		if derr == nil {
			return s.info(now), err
		}
	}
	return info, err
}

// Update replaces the spec, payload and policies of the existing
// schedule r.ID, atomically: its pending occurrences are cancelled, except
// those the new spec also has, which are rewritten with the new payload and
// jitter, and the next occurrences after the server's now are armed. A
// paused schedule stays paused; an ended one becomes active again if the
// new spec has occurrences left. Missed occurrences are not caught up.
func (rt RecurringTimers) Update(ctx context.Context, r Recurring) (RecurringInfo, error) {
	q := rt.q
	var err error
	if r, err = q.validateRecurring(r); err != nil {
		return RecurringInfo{}, err
	}
	return q.modify(ctx, "update", r.ID, r.Overlap, func(s *record, now time.Time) (putArgs, error) {
		if r.Every > 0 && r.Anchor.IsZero() {
			r.Anchor = now
			if s.r.Every > 0 && !s.r.Anchor.IsZero() {
				r.Anchor = s.r.Anchor
			}
		}
		b, _ := json.Marshal(r.body(s.body.CreatedMs, now.UnixMilli()))
		if s.state == recPaused {
			return putArgs{body: string(b), state: recPaused, last: keepLast, payload: r.Payload}, nil
		}
		p, err := planFrom(r, now, now, s.count-int64(len(s.pending)), r.Ahead)
		if err != nil {
			return putArgs{}, err
		}
		return putArgs{body: string(b), state: stateCode(p.ended), last: lastArg(p.last), payload: r.Payload, arms: p.arms}, nil
	})
}

// Pause pauses the schedule id: its pending occurrences are
// cancelled and nothing is armed until RecurringTimers.Resume. Pausing a paused
// schedule changes nothing, its version included.
func (rt RecurringTimers) Pause(ctx context.Context, id string) (RecurringInfo, error) {
	q := rt.q
	return q.modify(ctx, "pause", id, "", func(s *record, now time.Time) (putArgs, error) {
		if s.state == recPaused {
			// Already paused: nothing to cancel, and the version (which
			// counts changes) stays.
			return putArgs{}, errNoChange
		}
		if s.state == recEnded {
			return putArgs{state: recEnded, last: keepLast}, nil
		}
		return putArgs{state: recPaused, last: keepLast}, nil
	})
}

// Resume resumes a paused schedule from the server's now: the
// occurrences that fell in the pause are skipped, whatever the catch-up
// policy (a pause is not downtime), and the next ones are armed. Resuming
// an active or ended schedule changes nothing.
func (rt RecurringTimers) Resume(ctx context.Context, id string) (RecurringInfo, error) {
	q := rt.q
	return q.modify(ctx, "resume", id, "", func(s *record, now time.Time) (putArgs, error) {
		if s.state != recPaused {
			return putArgs{}, errNoChange
		}
		r := s.r
		r.CatchUp = CatchUpSkip
		p, err := planFrom(r, now, now, s.count, r.Ahead)
		if err != nil {
			return putArgs{}, err
		}
		return putArgs{state: stateCode(p.ended), last: lastArg(p.last), payload: s.r.Payload, arms: p.arms}, nil
	})
}

var errNoChange = errors.New("no change")

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

// Delete deletes the schedule id and cancels its pending
// occurrences. Fired occurrences stay until their retention passes.
func (rt RecurringTimers) Delete(ctx context.Context, id string) error {
	q := rt.q
	if err := ValidateID(id); err != nil {
		return err
	}
	status, _, _, err := q.put(ctx, putArgs{op: "delete", id: id, last: keepLast})
	if err != nil {
		return errorf("delete schedule %q: %w", id, err)
	}
	if status == "notfound" {
		return fmt.Errorf("%w: %q in namespace %q", ErrRecurringNotFound, id, q.opts.Namespace)
	}
	return nil
}

// modify reads a schedule, lets fn plan the change from it, and writes it
// if the schedule has not changed meanwhile, retrying a few times if it has.
// overlap is the schedule's overlap policy after the change, "" to keep it.
// fn plans the body, state, last time, payload and arms of the call; modify
// fills in the rest.
func (q *Queue) modify(ctx context.Context, op, id string, overlap Overlap, fn func(s *record, now time.Time) (putArgs, error)) (RecurringInfo, error) {
	if err := ValidateID(id); err != nil {
		return RecurringInfo{}, err
	}
	for range 5 {
		now, s, err := q.loadOne(ctx, id)
		if err != nil {
			return RecurringInfo{}, errorf("%s schedule %q: %w", op, id, err)
		}
		if s == nil {
			return RecurringInfo{}, fmt.Errorf("%w: %q in namespace %q; 'timerctl schedules list' shows them", ErrRecurringNotFound, id, q.opts.Namespace)
		}
		a, err := fn(s, now)
		if errors.Is(err, errNoChange) {
			return s.info(now), nil
		}
		if err != nil {
			return RecurringInfo{}, err
		}
		// The endpoint after the change: the new body's, or the kept one's.
		a.endpoint = deliveryOf(s.r.Endpoint, s.r.URL, s.r.FlowKey)
		if a.body != "" {
			var nb body
			if err := json.Unmarshal([]byte(a.body), &nb); err != nil {
				return RecurringInfo{}, errorf("%s schedule %q: %w", op, id, err)
			}
			a.endpoint = deliveryOf(nb.Endpoint, nb.URL, nb.FlowKey)
		}
		a.op, a.id, a.expected, a.overlap = op, id, strconv.FormatInt(s.version, 10), overlap
		status, now, rec, err := q.put(ctx, a)
		if err != nil {
			return RecurringInfo{}, errorf("%s schedule %q: %w", op, id, err)
		}
		switch status {
		case "ok":
			return q.afterPut(ctx, id, now, rec)
		case "notfound":
			return RecurringInfo{}, fmt.Errorf("%w: %q in namespace %q", ErrRecurringNotFound, id, q.opts.Namespace)
		}
	}
	return RecurringInfo{}, errorf("%s schedule %q: it kept changing under concurrent updates; retry", op, id)
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
		return RecurringInfo{}, fmt.Errorf("%w: %q in namespace %q; 'timerctl schedules list' shows them", ErrRecurringNotFound, id, q.opts.Namespace)
	}
	return s.info(now), nil
}

// RecurringPage is one page of RecurringTimers.List.
type RecurringPage struct {
	Schedules []RecurringInfo
	// NextCursor fetches the next page; empty on the last page.
	NextCursor string
}

// List returns a page of schedules, in no particular order, about
// limit (1..MaxBatch, 0 means 100) at a time. Start with an empty cursor.
// Like HSCAN, which it uses, a schedule present for the whole listing is
// listed at least once. A sharded namespace is listed shard after shard,
// each page filled from as many shards as it takes; the cursor names the
// shard ("<shard>:<HSCAN cursor>"; with one shard, the HSCAN cursor alone).
func (rt RecurringTimers) List(ctx context.Context, cursor string, limit int) (RecurringPage, error) {
	q := rt.q
	if limit == 0 {
		limit = 100
	}
	if limit < 1 || limit > MaxBatch {
		return RecurringPage{}, fmt.Errorf("%w: list limit %d is outside 1..%d", ErrInvalidOptions, limit, MaxBatch)
	}
	l, err := q.layout(ctx)
	if err != nil {
		return RecurringPage{}, errorf("list schedules: %w", err)
	}
	k, cur, err := parseRecurringCursor(cursor, len(l.spaces))
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
		return 0, 0, fmt.Errorf("%w: cursor %q is not one that ListRecurring returned for this namespace; start with an empty cursor", ErrInvalidOptions, cursor)
	}
	return k, cur, nil
}

// Restore recreates a schedule from a RecurringInfo that
// RecurringTimers.Get or RecurringTimers.List returned (timerctl's `schedules export`
// writes them, `schedules import` restores them): its spec, policies, payload, state, count,
// last armed time and creation time, and arms its pending occurrences under
// their IDs (an occurrence that already exists, say restored by a timer
// import, is kept). Then workers top it up as usual; occurrences missed
// since the export are caught up by its policy. Like RecurringTimers.Put it
// changes nothing when the ID exists, and reports created false.
func (rt RecurringTimers) Restore(ctx context.Context, in RecurringInfo) (created bool, err error) {
	q := rt.q
	created, _, err = q.Recurring().RestoreWith(ctx, in, nil)
	return created, err
}

// RestoreWith is RecurringTimers.Restore that first restores the
// schedule's exported occurrence timers, as Restore would, with their
// states and times; results has one entry per occurrence, in order.
// Restore alone refuses them while the schedule does not exist
// (ErrOccurrenceID), since a later schedule of that ID would adopt them.
// Each occurrence's ID must be OccurrenceID(in.ID, nominal) for some
// nominal time. Everything is validated before any write; the occurrences
// and the schedule are then two steps, so a failure between them (Redis
// gone) leaves the occurrences without their schedule until the same call
// is made again, which is idempotent.
func (rt RecurringTimers) RestoreWith(ctx context.Context, in RecurringInfo, occurrences []Timer) (created bool, results []ScheduleResult, err error) {
	q := rt.q
	r, err := q.validateRecurring(in.Recurring)
	if err != nil {
		return false, nil, err
	}
	state := map[RecurringState]recState{RecurringActive: recActive, RecurringPaused: recPaused, RecurringEnded: recEnded}[in.State]
	if state == 0 {
		return false, nil, fmt.Errorf("%w: schedule %q: state %q is not one of active, paused, ended", schedule.ErrInvalidSchedule, r.ID, in.State)
	}
	if r.Every > 0 && r.Anchor.IsZero() {
		return false, nil, fmt.Errorf("%w: schedule %q: an exported interval schedule needs its anchor", schedule.ErrInvalidSchedule, r.ID)
	}
	arms := in.Pending
	if state == recPaused {
		arms = nil
	}
	for _, o := range arms {
		if ValidateDue(o.Nominal) != nil || ValidateDue(o.Due) != nil || o.Due.Before(o.Nominal) {
			return false, nil, fmt.Errorf("%w: schedule %q: pending occurrence %v is out of range", schedule.ErrInvalidSchedule, r.ID, o.Nominal)
		}
	}
	for i, t := range occurrences {
		if err := q.validateRestored(t); err != nil {
			return false, nil, errorf("schedule %q: occurrence %d: %w", r.ID, i, err)
		}
		if sid, _, ok := ParseOccurrenceID(t.ID); !ok || sid != r.ID {
			return false, nil, fmt.Errorf("%w: schedule %q: timer %q is not one of its occurrences, which are %q",
				ErrInvalidID, r.ID, t.ID, r.ID+"@<Unix ms>")
		}
	}
	for start := 0; start < len(occurrences); start += MaxBatch {
		out, err := q.restore(ctx, occurrences[start:min(start+MaxBatch, len(occurrences))], r.ID)
		if err != nil {
			return false, results, errorf("restore schedule %q: its occurrences: %w", r.ID, err)
		}
		results = append(results, out...)
	}
	base := max(in.Count-int64(len(arms)), 0)
	created0, updated0 := in.CreatedAt.UnixMilli(), in.UpdatedAt.UnixMilli()
	b, _ := json.Marshal(r.body(created0, updated0))
	status, _, _, err := q.put(ctx, putArgs{op: "create", id: r.ID, expected: strconv.FormatInt(base, 10), body: string(b), state: state,
		last: lastArg(in.Last), payload: r.Payload, overlap: r.Overlap, endpoint: deliveryOf(r.Endpoint, r.URL, r.FlowKey), arms: arms})
	if err != nil {
		return false, results, errorf("restore schedule %q: %w", r.ID, err)
	}
	return status == "created", results, nil
}
