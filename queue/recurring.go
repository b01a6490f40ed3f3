package queue

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/schedule"
)

// ErrRecurringNotFound means no recurring schedule with that ID exists in
// the namespace.
var ErrRecurringNotFound = errors.New("timerq: recurring schedule not found")

// recurringNotFound is the error for the schedule id the namespace lacks.
func (q *Queue) recurringNotFound(id string) error {
	return fmt.Errorf("%w: %q in namespace %q; check the ID, or list the schedules with Recurring().List",
		ErrRecurringNotFound, id, q.opts.Namespace)
}

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
	// Owner and Labels are each occurrence's, as NewTimer.Owner and
	// Labels are a timer's: an occurrence records its owner's epoch when
	// it is armed, and a bulk cancel by owner or labels selects it (the
	// schedule goes on arming new ones: pause or delete it to stop them).
	Owner  string
	Labels map[string]string
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
	// here, where the scripts' sdecode still finds it.
	Overlap   string            `json:"overlap,omitempty"`
	Endpoint  string            `json:"endpoint,omitempty"`
	FlowKey   string            `json:"flow_key,omitempty"`
	URL       string            `json:"url,omitempty"`
	Owner     string            `json:"owner,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	CreatedMs int64             `json:"created_ms"`
	UpdatedMs int64             `json:"updated_ms"`
}

// validateRecurring checks r and fills in its defaults. Each refusal is
// a *FieldError naming the field of Recurring, so that a caller can name
// the field of its own input.
func (q *Queue) validateRecurring(r Recurring) (Recurring, error) {
	if err := ValidateID(r.ID); err != nil {
		return r, &FieldError{Field: "ID", Err: err}
	}
	if len(r.ID) > MaxRecurringIDBytes {
		return r, &FieldError{Field: "ID", Err: fmt.Errorf("%w: schedule ID is %d bytes long; use at most %d, so that its occurrences' IDs fit", ErrInvalidID, len(r.ID), MaxRecurringIDBytes)}
	}
	if err := r.checkTiming(); err != nil {
		return r, err
	}
	if err := r.fillCatchUp(); err != nil {
		return r, err
	}
	if err := q.checkDelivery(r); err != nil {
		return r, err
	}
	if err := r.fillLimits(); err != nil {
		return r, err
	}
	if len(r.Payload) > q.opts.MaxPayloadBytes {
		return r, &FieldError{Field: "Payload", Err: fmt.Errorf("%w: schedule %q has %d bytes of payload, over the limit of %d; store large data elsewhere and keep a reference",
			ErrPayloadTooLarge, r.ID, len(r.Payload), q.opts.MaxPayloadBytes)}
	}
	return r, nil
}

// invalid is an ErrInvalidSchedule naming r, refusing its field.
func (r *Recurring) invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf("%w: schedule %q: "+format, append([]any{schedule.ErrInvalidSchedule, r.ID}, args...)...)}
}

// checkTiming checks that r has one of a cron Spec or an Every interval,
// with only the fields that apply to it.
func (r *Recurring) checkTiming() error {
	switch {
	case r.Spec == "" && r.Every == 0:
		return r.invalid("Spec", "set a cron Spec or an Every interval")
	case r.Spec != "" && r.Every != 0:
		return r.invalid("Every", "set a cron Spec or an Every interval, not both")
	case r.Every != 0 && r.Location != nil:
		return r.invalid("Location", "a Location applies to a cron Spec only; an interval is elapsed time")
	case r.Every != 0 && r.Every < time.Millisecond:
		return r.invalid("Every", "interval %v is below 1ms", r.Every)
	case r.Spec == "" && !r.Anchor.IsZero() && ValidateDue(r.Anchor) != nil:
		return r.invalid("Anchor", "Anchor %v is outside 1970-9999", r.Anchor)
	case r.Spec != "" && !r.Anchor.IsZero():
		return r.invalid("Anchor", "Anchor applies to an Every interval only")
	}
	if r.Spec != "" {
		if _, err := schedule.Parse(r.Spec, r.Location); err != nil {
			return &FieldError{Field: "Spec", Err: err}
		}
	}
	return nil
}

// fillCatchUp checks the catch-up policy, its limit and Ahead, and fills
// in their defaults.
func (r *Recurring) fillCatchUp() error {
	switch r.CatchUp {
	case "":
		r.CatchUp = CatchUpOnce
	case CatchUpOnce, CatchUpSkip, CatchUpAll:
	default:
		return r.invalid("CatchUp", "catch-up policy %q is not one of once, skip, all", r.CatchUp)
	}
	switch {
	case r.CatchUpLimit < 0:
		return r.invalid("CatchUpLimit", "CatchUpLimit %d is negative; use 0 for the default %d", r.CatchUpLimit, DefaultCatchUpLimit)
	case r.CatchUpLimit == 0:
		r.CatchUpLimit = DefaultCatchUpLimit
	}
	switch {
	case r.Ahead < 0 || r.Ahead > MaxAhead:
		return r.invalid("Ahead", "Ahead %d is outside 1..%d; use 0 for the default %d", r.Ahead, MaxAhead, DefaultAhead)
	case r.Ahead == 0:
		r.Ahead = DefaultAhead
	}
	return nil
}

// checkDelivery checks r's endpoint, flow key and delivery URL.
func (q *Queue) checkDelivery(r Recurring) error {
	refuse := func(field string, err error) error {
		return &FieldError{Field: field, Err: errorf("schedule %q: %w", r.ID, err)}
	}
	if err := (NewTimer{Owner: r.Owner, Labels: r.Labels}).validateMeta(refuse); err != nil {
		return err
	}
	if r.Endpoint != "" {
		if err := ValidateEndpointName(r.Endpoint); err != nil {
			return refuse("Endpoint", err)
		}
	}
	if r.FlowKey != "" {
		if err := ValidateFlowKey(r.FlowKey); err != nil {
			return refuse("FlowKey", err)
		}
	}
	if r.URL == "" {
		return nil
	}
	if r.Endpoint == "" {
		return refuse("Endpoint", fmt.Errorf("%w: a delivery URL needs an endpoint to take its secrets and policy from; set Endpoint", ErrInvalidOptions))
	}
	if err := ValidateTimerURL(r.URL, q.opts.TimerURLAllow); err != nil {
		return refuse("URL", err)
	}
	return nil
}

// fillLimits checks the overlap policy (filling in its default), Jitter,
// MaxCount and End.
func (r *Recurring) fillLimits() error {
	ov, err := r.Overlap.normalize()
	if err != nil {
		return r.invalid("Overlap", "%v", err)
	}
	r.Overlap = ov
	switch {
	case r.Jitter < 0:
		return r.invalid("Jitter", "Jitter %v is negative; use 0 for none", r.Jitter)
	case r.MaxCount < 0:
		return r.invalid("MaxCount", "MaxCount %d is negative; use 0 for no limit", r.MaxCount)
	}
	if !r.End.IsZero() && ValidateDue(r.End) != nil {
		return r.invalid("End", "End %v is outside 1970-9999", r.End)
	}
	return nil
}

func (r Recurring) body(created, updated int64) body {
	b := body{Spec: r.Spec, EveryMs: r.Every.Milliseconds(), Payload: r.Payload,
		CatchUp: string(r.CatchUp), CatchUpLimit: r.CatchUpLimit, JitterMs: r.Jitter.Milliseconds(),
		MaxCount: r.MaxCount, Ahead: r.Ahead, Endpoint: r.Endpoint, URL: r.URL, FlowKey: r.FlowKey, Owner: r.Owner, Labels: r.Labels,
		CreatedMs: created, UpdatedMs: updated}
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
		MaxCount: b.MaxCount, Ahead: b.Ahead, Overlap: OverlapAllow, Endpoint: b.Endpoint, URL: b.URL, FlowKey: b.FlowKey,
		Owner: b.Owner, Labels: b.Labels}
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

// occurrenceMeta is the meta argument of r's occurrences (NewTimer.metaArg).
func (r Recurring) occurrenceMeta() string {
	return NewTimer{Owner: r.Owner, Labels: r.Labels}.metaArg()
}

// occurrenceMeta is the meta argument of the occurrences of a schedule
// whose record holds b.
func (b body) occurrenceMeta() string { return NewTimer{Owner: b.Owner, Labels: b.Labels}.metaArg() }
