package queue

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	lua "github.com/timerq/timerq/scripts/lua"
)

// Owners, labels, fencing epochs and fire deadlines. A timer may name an
// owner (a workflow's ID, say) and carry a few labels; both are kept with
// the timer until it is purged, shown by Get and List, written by export,
// and select timers for CancelMatching. An owner has a fencing epoch
// (BumpEpoch): each timer records the epoch its owner had when it was
// scheduled, and its fire carries it (Event.Epoch, Timer.Epoch), so an
// executor that took an owner over can refuse a fire scheduled before.
//
// They live beside the record, in the shard's timer meta hash, only for
// the timers that have them (docs/redis-layout.md): a timer with none
// costs nothing more.

// Bounds of owners and labels.
const (
	// MaxOwnerBytes is the longest owner, in bytes.
	MaxOwnerBytes = 256
	// MaxLabels is the most labels a timer may carry.
	MaxLabels = 16
	// MaxLabelKeyBytes is the longest label key: 1 to 63 characters of
	// A-Z, a-z, 0-9, '_', '.', '-' and '/'.
	MaxLabelKeyBytes = 63
	// MaxLabelValueBytes is the longest label value, in bytes of UTF-8
	// without control characters (it may be empty).
	MaxLabelValueBytes = 128
)

// metaSep separates the fields of a stored meta value (and is a control
// character, which no owner or label may hold).
const metaSep = "\x1f"

// ValidateOwner reports whether owner can own timers: 1 to MaxOwnerBytes
// of UTF-8 without control characters. The error wraps ErrInvalidOptions.
func ValidateOwner(owner string) error {
	const want = "use 1-256 bytes of UTF-8 without control characters, such as a workflow ID"
	switch {
	case owner == "":
		return fmt.Errorf("%w: the owner is empty; %s", ErrInvalidOptions, want)
	case len(owner) > MaxOwnerBytes:
		return fmt.Errorf("%w: the owner is %d bytes long; %s", ErrInvalidOptions, len(owner), want)
	}
	return textField("owner", owner, want)
}

// ValidateLabels reports whether labels can be a timer's labels: at most
// MaxLabels, each key 1-63 characters of [A-Za-z0-9_./-], each value at
// most MaxLabelValueBytes of UTF-8 without control characters. The error
// wraps ErrInvalidOptions.
func ValidateLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%w: %d labels, over the limit of %d a timer; keep what you select timers by", ErrInvalidOptions, len(labels), MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if err := validateLabel(k, labels[k]); err != nil {
			return err
		}
	}
	return nil
}

func validateLabel(k, v string) error {
	const keyWant = "use 1-63 characters of A-Z, a-z, 0-9, '_', '.', '-' and '/'"
	if k == "" || len(k) > MaxLabelKeyBytes {
		return fmt.Errorf("%w: label key %q is %d characters long; %s", ErrInvalidOptions, k, len(k), keyWant)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-' || c == '/') {
			return fmt.Errorf("%w: label key %q has %q at position %d; %s", ErrInvalidOptions, k, c, i, keyWant)
		}
	}
	if len(v) > MaxLabelValueBytes {
		return fmt.Errorf("%w: the value of label %q is %d bytes long, over the limit of %d", ErrInvalidOptions, k, len(v), MaxLabelValueBytes)
	}
	return textField("value of label "+strconv.Quote(k), v, "use UTF-8 without control characters")
}

// textField refuses a string that is not UTF-8 or holds a control
// character: the stored meta separates its fields with one.
func textField(what, s, want string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: the %s is not valid UTF-8; %s", ErrInvalidOptions, what, want)
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: the %s has a control character at byte %d; %s", ErrInvalidOptions, what, i, want)
		}
	}
	return nil
}

// validateMeta checks a new timer's owner, labels, epoch and deadline;
// refuse names the field.
func (t NewTimer) validateMeta(refuse func(string, error) error) error {
	if t.Owner != "" {
		if err := ValidateOwner(t.Owner); err != nil {
			return refuse("Owner", err)
		}
	} else if t.Epoch != 0 {
		return refuse("Epoch", fmt.Errorf("%w: an epoch is an owner's: set Owner too", ErrInvalidOptions))
	}
	if err := ValidateLabels(t.Labels); err != nil {
		return refuse("Labels", err)
	}
	switch {
	case t.FireWithin < 0:
		return refuse("FireWithin", fmt.Errorf("%w: FireWithin is negative (%s)", ErrInvalidOptions, t.FireWithin))
	case t.FireWithin > 0 && !t.FireBy.IsZero():
		return refuse("FireBy", fmt.Errorf("%w: both FireBy and FireWithin are set; set one of them", ErrInvalidOptions))
	case !t.FireBy.IsZero():
		if err := ValidateDue(t.FireBy); err != nil {
			return refuse("FireBy", err)
		}
		if !t.isRelative() && t.FireBy.Before(t.Due) {
			return refuse("FireBy", fmt.Errorf("%w: FireBy (%s) is before the due time (%s): the timer could never be delivered",
				ErrInvalidOptions, t.FireBy.UTC().Format(time.RFC3339Nano), t.Due.UTC().Format(time.RFC3339Nano)))
		}
	}
	return nil
}

// hasMeta reports whether t carries an owner, labels or a deadline.
func (t NewTimer) hasMeta() bool {
	return t.Owner != "" || len(t.Labels) > 0 || t.FireWithin > 0 || !t.FireBy.IsZero()
}

// metaArg is t's meta as schedule.lua takes it: ” for none, else
// "<expected epoch>\x1f<deadline>\x1f<owner>" and "\x1f<key>=<value>" per
// label, in key order; the deadline is "" (none), "<ms>" or "+<ms>" after
// the due millisecond.
func (t NewTimer) metaArg() string {
	if !t.hasMeta() {
		return ""
	}
	var b strings.Builder
	if t.Epoch != 0 {
		b.WriteString(strconv.FormatUint(t.Epoch, 10))
	}
	b.WriteString(metaSep)
	switch {
	case t.FireWithin > 0:
		b.WriteString("+" + strconv.FormatInt(ceilMilli(t.FireWithin).Milliseconds(), 10))
	case !t.FireBy.IsZero():
		b.WriteString(strconv.FormatInt(t.FireBy.UnixMilli(), 10))
	}
	b.WriteString(metaSep)
	b.WriteString(t.Owner)
	writeLabels(&b, t.Labels)
	return b.String()
}

func writeLabels(b *strings.Builder, labels map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		b.WriteString(metaSep + k + "=" + labels[k])
	}
}

// timerMeta is what a timer's stored meta holds.
type timerMeta struct {
	owner    string
	epoch    uint64
	deadline time.Time
	labels   map[string]string
}

// stored is m as the meta hash keeps it: "<epoch>\x1f<deadline ms>
// \x1f<owner>" and "\x1f<key>=<value>" per label ("" for nothing).
func (m timerMeta) stored() string {
	if m.owner == "" && len(m.labels) == 0 && m.deadline.IsZero() {
		return ""
	}
	var b strings.Builder
	b.WriteString(strconv.FormatUint(m.epoch, 10) + metaSep)
	if !m.deadline.IsZero() {
		b.WriteString(strconv.FormatInt(m.deadline.UnixMilli(), 10))
	}
	b.WriteString(metaSep + m.owner)
	writeLabels(&b, m.labels)
	return b.String()
}

// parseMeta parses a stored meta value ("" is none).
func parseMeta(id, s string) (timerMeta, error) {
	var m timerMeta
	if s == "" {
		return m, nil
	}
	f := strings.Split(s, metaSep)
	if len(f) < 3 {
		return m, malformedRecord(id, "meta")
	}
	epoch, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return m, malformedRecord(id, "meta epoch")
	}
	m.epoch, m.owner = epoch, f[2]
	if f[1] != "" {
		if !isMillis(f[1]) {
			return m, malformedRecord(id, "meta deadline")
		}
		m.deadline = fromMillis(atoi(f[1]))
	}
	for _, kv := range f[3:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return m, malformedRecord(id, "meta label")
		}
		if m.labels == nil {
			m.labels = make(map[string]string, len(f)-3)
		}
		m.labels[k] = v
	}
	return m, nil
}

// withMeta is t with the stored meta s filled in.
func (t Timer) withMeta(s string) (Timer, error) {
	m, err := parseMeta(t.ID, s)
	if err != nil {
		return t, err
	}
	t.Owner, t.Epoch, t.Deadline, t.Labels = m.owner, m.epoch, m.deadline, m.labels
	return t, nil
}

// meta is t's owner, labels, epoch and deadline.
func (t Timer) meta() timerMeta {
	return timerMeta{owner: t.Owner, epoch: t.Epoch, deadline: t.Deadline, labels: t.Labels}
}

// staleEpoch is the error for schedule.lua's "TIMERQ_EPOCH <current>
// <owner>".
func staleEpoch(msg string) error {
	current, owner, _ := strings.Cut(msg, " ")
	return fmt.Errorf("%w: owner %q is at epoch %s, not the epoch the timer was scheduled under; this executor no longer owns it (another bumped the epoch): stop, or read the owner's state again and retry under epoch %s",
		ErrStaleEpoch, owner, current, current)
}

// timerFieldError is a script's refusal of one field of the new timer
// id; scheduleLayout turns it into the *FieldError naming the timer's
// item in its batch.
type timerFieldError struct {
	id, field string
	err       error
}

func (e *timerFieldError) Error() string { return e.err.Error() }
func (e *timerFieldError) Unwrap() error { return e.err }

// fireByRefused is the error for meta.lua's "TIMERQ_FIREBY <deadline ms>
// <due> <id>": a timer due in a while (NewTimerIn), whose due time only
// the server's clock resolves, with a FireBy before it. Its words are
// validateMeta's for a timer with an absolute due time.
func fireByRefused(msg string) error {
	deadline, rest, _ := strings.Cut(msg, " ")
	due, id, _ := strings.Cut(rest, " ")
	return &timerFieldError{id: id, field: "FireBy", err: errorf("timer %q: %w", id,
		fmt.Errorf("%w: FireBy (%s) is before the due time (%s, In after the server's clock): the timer could never be delivered",
			ErrInvalidOptions, fromMillis(atoi(deadline)).Format(time.RFC3339Nano), parseScore(due).Format(time.RFC3339Nano)))}
}

// metaFilter selects timers by owner and labels; its zero value selects
// every timer.
type metaFilter struct {
	owner  string
	labels map[string]string
}

// selects reports whether a timer with meta m has f's owner (if f names
// one) and every label of f.
func (f metaFilter) selects(m timerMeta) bool {
	if f.owner != "" && m.owner != f.owner {
		return false
	}
	for k, v := range f.labels {
		if got, ok := m.labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Epoch returns owner's current fencing epoch: 0 until BumpEpoch first
// raises it.
func (q *Queue) Epoch(ctx context.Context, owner string) (uint64, error) {
	if err := ValidateOwner(owner); err != nil {
		return 0, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return 0, err
	}
	// The first shard's epoch of an owner is the highest (BumpEpoch).
	reply, err := q.run(ctx, l, lua.Epoch, 0, owner, "")
	if err != nil {
		return 0, errorf("epoch of owner %q: %w", owner, err)
	}
	return parseEpoch(reply)
}

// BumpOptions configures BumpEpoch.
type BumpOptions struct {
	// CancelOlder, when set, also cancels every scheduled timer of the
	// owner scheduled under an older epoch, as CancelMatching does (a
	// large set as a job the workers finish; see Bumped.Cancel).
	CancelOlder bool
}

// Bumped is what BumpEpoch did.
type Bumped struct {
	// Epoch is the owner's new epoch: the caller's to act under
	// (NewTimer.Epoch) and to compare fires with (Event.Epoch).
	Epoch uint64
	// Cancel is the bulk cancel of the owner's older timers, when
	// BumpOptions.CancelOlder asked for one.
	Cancel *CancelJob
}

// BumpEpoch raises owner's fencing epoch by one and returns it: the
// executor that takes an owner (a workflow) over bumps its epoch, schedules
// under it (NewTimer.Epoch, which refuses a stale epoch with
// ErrStaleEpoch), and refuses a fire whose Event.Epoch is lower, scheduled
// by an executor before it. Two executors bumping at once get different
// epochs.
//
// On a namespace of one shard the bump is one atomic script. With several
// shards the first shard's epoch is raised atomically (that decides the
// new epoch), then every other shard's is raised to it; a timer scheduled
// on a shard meanwhile may record the old epoch, which fences it as the
// old executor's. If BumpEpoch fails part way, call it again: the owner's
// epoch only grows.
func (q *Queue) BumpEpoch(ctx context.Context, owner string, o BumpOptions) (Bumped, error) {
	if err := ValidateOwner(owner); err != nil {
		return Bumped{}, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return Bumped{}, err
	}
	reply, err := q.run(ctx, l, lua.Epoch, 0, owner, "+")
	if err != nil {
		return Bumped{}, errorf("bump the epoch of owner %q: %w", owner, err)
	}
	epoch, err := parseEpoch(reply)
	if err != nil {
		return Bumped{}, err
	}
	if len(l.spaces) > 1 {
		calls := make([]call, 0, len(l.spaces)-1)
		for k := 1; k < len(l.spaces); k++ {
			calls = append(calls, call{shard: k, args: []any{owner, strconv.FormatUint(epoch, 10)}})
		}
		if _, err := q.runMany(ctx, l, lua.Epoch, calls); err != nil {
			return Bumped{Epoch: epoch}, errorf("bump the epoch of owner %q to %d on every shard (call BumpEpoch again): %w", owner, epoch, err)
		}
	}
	out := Bumped{Epoch: epoch}
	if o.CancelOlder {
		job, err := q.CancelMatching(ctx, CancelFilter{Owner: owner, EpochBelow: epoch})
		out.Cancel = &job
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// raiseEpochs raises, on a sharded namespace, the epoch of each owner of
// timers (restored ones) to the highest among its timers, on every shard:
// restore.lua raised it on the timer's own shard only, while Epoch reads
// the first shard, BumpEpoch bumps from it, and a timer scheduled under an
// epoch is checked on its own shard. An epoch only grows, so a restore
// that failed here may be repeated. Owners at epoch 0 need nothing.
func (q *Queue) raiseEpochs(ctx context.Context, l *layout, timers []Timer) error {
	if len(l.spaces) == 1 {
		return nil
	}
	top := map[string]uint64{}
	for _, t := range timers {
		if t.Owner != "" && t.Epoch > top[t.Owner] {
			top[t.Owner] = t.Epoch
		}
	}
	if len(top) == 0 {
		return nil
	}
	calls := make([]call, 0, len(top)*len(l.spaces))
	for _, owner := range slices.Sorted(maps.Keys(top)) {
		for k := range l.spaces {
			calls = append(calls, call{shard: k, args: []any{owner, strconv.FormatUint(top[owner], 10)}})
		}
	}
	if _, err := q.runMany(ctx, l, lua.Epoch, calls); err != nil {
		return errorf("restore: raise the owners' epochs to their timers' on every shard (restore again: it is idempotent): %w", err)
	}
	return nil
}

func parseEpoch(reply any) (uint64, error) {
	s, _ := reply.(string)
	e, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errorf("epoch: unexpected reply %v", reply)
	}
	return e, nil
}

// OwnerWake is where an owner's scheduled timers stand.
type OwnerWake struct {
	// Scheduled is how many of the owner's timers are scheduled.
	Scheduled int64
	// Next is the earliest due time among them; zero when there is none.
	Next time.Time
}

// NextWake returns how many of owner's timers are scheduled and the
// earliest due time among them: when the owner next wakes. It reads the
// owner index, one script per shard in one round trip, in O(m log N) for
// an owner with m timers (settled ones awaiting purge included).
func (q *Queue) NextWake(ctx context.Context, owner string) (OwnerWake, error) {
	if err := ValidateOwner(owner); err != nil {
		return OwnerWake{}, err
	}
	l, err := q.layout(ctx)
	if err != nil {
		return OwnerWake{}, err
	}
	calls := make([]call, len(l.spaces))
	for k := range calls {
		calls[k] = call{shard: k, args: []any{owner}}
	}
	replies, err := q.runMany(ctx, l, lua.OwnerWake, calls)
	if err != nil {
		return OwnerWake{}, errorf("next wake of owner %q: %w", owner, err)
	}
	var w OwnerWake
	for _, reply := range replies {
		r, err := replyStrings(reply)
		if err != nil || len(r) != 2 {
			return OwnerWake{}, errorf("next wake: unexpected reply %v", reply)
		}
		w.Scheduled += atoi(r[0])
		if r[1] == "" {
			continue
		}
		if !isDueScore(r[1]) {
			return OwnerWake{}, errorf("next wake: unexpected reply %v", reply)
		}
		if due := parseScore(r[1]); w.Next.IsZero() || due.Before(w.Next) {
			w.Next = due
		}
	}
	return w, nil
}
