package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/timerq/timerq/internal/strictjson"
	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// The wire types have the field names of `timerctl -o json` and of the
// export lines (docs/timerctl.md), so that a client reads both alike.

// TimerJSON is a timer as the API returns it.
type TimerJSON struct {
	ID          string  `json:"id"`
	State       string  `json:"state"`
	DueAt       string  `json:"due_at"`
	CreatedAt   *string `json:"created_at"`
	FiredAt     *string `json:"fired_at"`
	CancelledAt *string `json:"cancelled_at"`
	// Payload is the payload's bytes, base64 in JSON.
	Payload []byte `json:"payload"`
	// Created is set only in answers to creates: whether the request
	// created the timer.
	Created *bool `json:"created,omitempty"`
	// Delivery is set only in answers to GET of a timer whose fires were
	// delivered to an endpoint: its attempt log.
	Delivery *DeliveryLogJSON `json:"delivery,omitempty"`
	MetaJSON
}

// MetaJSON is a timer's owner, the fencing epoch it was scheduled under,
// its labels and its fire deadline (queue.Timer, queue.Event), as timers,
// fire events and deliveries carry them. Each is left out when the timer
// has none; the epoch is there whenever the owner is, 0 included.
type MetaJSON struct {
	Owner    string            `json:"owner,omitempty"`
	Epoch    *uint64           `json:"epoch,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Deadline *string           `json:"deadline,omitempty"`
}

// ToMetaJSON is a timer's or a fire's owner, epoch, labels and deadline
// as the API shows them.
func ToMetaJSON(owner string, epoch uint64, labels map[string]string, deadline time.Time) MetaJSON {
	m := MetaJSON{Owner: owner, Deadline: optTime(deadline)}
	if owner != "" {
		m.Epoch = &epoch
	}
	if len(labels) > 0 {
		m.Labels = labels
	}
	return m
}

// DeliveryLogJSON is a delivering timer's attempt log
// (queue.Deliveries.Attempts): its last attempts, oldest first.
type DeliveryLogJSON struct {
	Attempts []AttemptJSON `json:"attempts"`
}

// AttemptJSON is one delivery attempt (queue.DeliveryAttempt).
type AttemptJSON struct {
	Attempt   int     `json:"attempt"`
	DueAt     string  `json:"due_at"`
	At        string  `json:"at"`
	LatencyMS float64 `json:"latency_ms"`
	Status    int     `json:"status"`
	Outcome   string  `json:"outcome"`
	Reason    string  `json:"reason,omitempty"`
	Error     string  `json:"error,omitempty"`
	RetryIn   string  `json:"retry_in,omitempty"`
}

// ToDeliveryLogJSON is log as the API and `timerctl get -o json` show it:
// nil, hence no delivery field, for a timer without attempts.
func ToDeliveryLogJSON(log []queue.DeliveryAttempt) *DeliveryLogJSON {
	if len(log) == 0 {
		return nil
	}
	out := &DeliveryLogJSON{Attempts: make([]AttemptJSON, len(log))}
	for i, a := range log {
		j := AttemptJSON{Attempt: a.Attempt, DueAt: timefmt.Format(a.Due), At: timefmt.Format(a.At),
			LatencyMS: float64(a.Latency.Microseconds()) / 1000, Status: a.Status, Outcome: a.Outcome, Reason: a.Reason, Error: a.Error}
		if a.RetryIn > 0 {
			j.RetryIn = a.RetryIn.String()
		}
		out.Attempts[i] = j
	}
	return out
}

// mapList converts each of in; the result is never nil, so that a list
// answers [] when empty, not null.
func mapList[T, J any](in []T, to func(T) J) []J {
	out := make([]J, len(in))
	for i, v := range in {
		out[i] = to(v)
	}
	return out
}

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := timefmt.Format(t)
	return &s
}

// ToTimerJSON is t as the API, `timerctl -o json` and debounce answers
// show it, without the fields that only some answers set (Created,
// Delivery).
func ToTimerJSON(t queue.Timer) TimerJSON {
	return TimerJSON{
		ID: t.ID, State: string(t.State), DueAt: timefmt.Format(t.Due),
		CreatedAt: optTime(t.CreatedAt), FiredAt: optTime(t.FiredAt), CancelledAt: optTime(t.CancelledAt),
		Payload:  WireBytes(t.Payload),
		MetaJSON: ToMetaJSON(t.Owner, t.Epoch, t.Labels, t.Deadline),
	}
}

// WireBytes is p as a JSON field that is always present: an empty
// payload or record reads "", never null.
func WireBytes(p []byte) []byte {
	if p == nil {
		return []byte{}
	}
	return p
}

func created(r queue.ScheduleResult) TimerJSON {
	j := ToTimerJSON(r.Timer)
	c := r.Created
	j.Created = &c
	return j
}

// newTimerJSON is a timer to create: a line of `timerctl import` without
// a state.
type newTimerJSON struct {
	ID          *string         `json:"id"`
	DueAt       json.RawMessage `json:"due_at"`
	In          *string         `json:"in"`
	Payload     json.RawMessage `json:"payload"`
	PayloadText *string         `json:"payload_text"`
	Deliver     *DeliverJSON    `json:"deliver"`
	FlowKey     *string         `json:"flow_key"`
	newMetaJSON
}

// newMetaJSON is the owner, labels, expected epoch and fire deadline of a
// timer to create (queue.NewTimer's), which the queue checks.
type newMetaJSON struct {
	Owner  *string           `json:"owner"`
	Labels map[string]string `json:"labels"`
	// Epoch is the owner epoch the caller acts under: the create fails
	// with 409 stale-epoch unless it is the owner's current one.
	Epoch        *uint64         `json:"epoch"`
	FireWithinMS *int64          `json:"fire_within_ms"`
	FireBy       json.RawMessage `json:"fire_by"`
}

// read sets t's owner, labels, epoch and deadline from j; prefix is the
// JSON pointer of j's timer. The queue checks the values (timerError
// names the field it refuses); what it would take for none (an empty
// owner, a deadline of 0 ms) is refused here.
func (j newMetaJSON) read(t *queue.NewTimer, prefix string) error {
	var err error
	if t.Owner, err = readOwner(j.Owner, prefix); err != nil {
		return err
	}
	t.Labels = j.Labels
	if j.Epoch != nil {
		t.Epoch = *j.Epoch
	}
	fireBy := len(j.FireBy) > 0 && string(j.FireBy) != "null"
	switch {
	case j.FireWithinMS != nil && fireBy:
		return badRequest(prefix+"/fire_by", "both fire_within_ms and fire_by are given; give one")
	case j.FireWithinMS != nil:
		const most = int64(math.MaxInt64 / int64(time.Millisecond))
		if ms := *j.FireWithinMS; ms <= 0 || ms > most {
			return invalid(SlugInvalidArgument, prefix+"/fire_within_ms", "fire_within_ms %d is outside 1..%d; give how many milliseconds after its due time the fire may still be delivered, or leave it out for no deadline", ms, most)
		}
		t.FireWithin = time.Duration(*j.FireWithinMS) * time.Millisecond
	case fireBy:
		var err error
		t.FireBy, err = readTime(j.FireBy, prefix+"/fire_by")
		return err
	}
	return nil
}

// readNewTimer reads j into a queue.NewTimer, which the queue checks
// (timerError names the field it refuses); prefix is the JSON pointer of
// j in the request ("" or "/timers/3").
func readNewTimer(j newTimerJSON, prefix string) (queue.NewTimer, error) {
	if j.ID == nil {
		return queue.NewTimer{}, badRequest(prefix+"/id", "the timer has no id; give one, 1-256 bytes of UTF-8")
	}
	id := *j.ID
	payload, err := readPayload(j.Payload, j.PayloadText, prefix)
	if err != nil {
		return queue.NewTimer{}, err
	}
	due, rel, err := readDue(j.DueAt, j.In, prefix)
	if err != nil {
		return queue.NewTimer{}, err
	}
	endpoint, url, err := readDeliver(j.Deliver, prefix)
	if err != nil {
		return queue.NewTimer{}, err
	}
	flowKey, err := readFlowKey(j.FlowKey, prefix)
	if err != nil {
		return queue.NewTimer{}, err
	}
	t := queue.NewTimer{ID: id, Due: due, Payload: payload}
	if rel != nil {
		t = queue.NewTimerIn(id, *rel, payload)
	}
	t.Endpoint, t.URL, t.FlowKey = endpoint, url, flowKey
	return t, j.newMetaJSON.read(&t, prefix)
}

// readOwner reads an owner, which the queue checks; given empty, which the
// queue would take for none (and a bulk cancel for every owner's timers),
// it is refused.
func readOwner(owner *string, prefix string) (string, error) {
	switch {
	case owner == nil:
		return "", nil
	case *owner == "":
		return "", invalid(SlugInvalidArgument, prefix+"/owner", "owner is empty; give 1-%d bytes of UTF-8 without control characters, or leave owner out", queue.MaxOwnerBytes)
	}
	return *owner, nil
}

// readFlowKey reads a flow key, which the queue checks; given empty, which
// the queue would take for none, it is refused.
func readFlowKey(key *string, prefix string) (string, error) {
	switch {
	case key == nil:
		return "", nil
	case *key == "":
		return "", invalid(SlugInvalidArgument, prefix+"/flow_key", "flow_key is empty; give 1-%d bytes of UTF-8 without control characters, or leave flow_key out for none", queue.MaxFlowKeyBytes)
	}
	return *key, nil
}

// readPayload reads payload (base64) or payload_text.
func readPayload(raw json.RawMessage, text *string, prefix string) ([]byte, error) {
	given := len(raw) > 0 && string(raw) != "null"
	if given && text != nil {
		return nil, badRequest(prefix+"/payload", "both payload and payload_text are given; give one: payload takes bytes in base64, payload_text takes text as it is")
	}
	if text != nil {
		return []byte(*text), nil
	}
	if !given {
		return []byte{}, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, badRequest(prefix+"/payload", "payload is not a string; it takes the bytes in base64, and payload_text takes text as it is")
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, badRequest(prefix+"/payload", "payload is not base64 (%v): payload takes the bytes in standard base64, as timerctl export writes them, and payload_text takes text as it is", err)
	}
	return b, nil
}

// readDue reads due_at or in. rel is set for in.
func readDue(dueAt json.RawMessage, in *string, prefix string) (due time.Time, rel *time.Duration, err error) {
	given := len(dueAt) > 0 && string(dueAt) != "null"
	switch {
	case given && in != nil:
		return due, nil, badRequest(prefix+"/due_at", "both due_at and in are given; give one")
	case given:
		due, err = readTime(dueAt, prefix+"/due_at")
		return due, nil, err
	case in != nil:
		d, err := readDelay(*in, prefix+"/in")
		return due, &d, err
	}
	return due, nil, badRequest(prefix+"/due_at", "no due time: give due_at (a time) or in (a delay)")
}

// readTime reads a time as timerctl does (internal/timefmt): RFC 3339, or
// Unix time as a string with its unit; a bare number, string or not, is
// refused rather than guessed.
func readTime(raw json.RawMessage, field string) (time.Time, error) {
	name := field[strings.LastIndexByte(field, '/')+1:]
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		n := strings.TrimSpace(string(raw))
		if timefmt.IsBareNumber(n) {
			e := timefmt.BareNumber(n, `"%ss"`, `"%sms"`)
			return time.Time{}, badRequest(field, "%s %s %s: %s", name, n, e.Problem, e.Fix)
		}
		return time.Time{}, badRequest(field, "%s is not a string: %s", name, timefmt.Fix)
	}
	t, err := timefmt.Parse(s)
	if err != nil {
		e := err.(*timefmt.Error)
		if timefmt.IsBareNumber(s) {
			e = timefmt.BareNumber(s, `"%ss"`, `"%sms"`)
		}
		return time.Time{}, invalid(SlugInvalidDue, field, "%s %q %s: %s", name, s, e.Problem, e.Fix)
	}
	return t, nil
}

// readDelay reads a delay in Go's syntax, 0 or more.
func readDelay(s, field string) (time.Duration, error) {
	name := field[strings.LastIndexByte(field, '/')+1:]
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalid(SlugInvalidArgument, field, "%s %q is not a duration: use Go's syntax, e.g. 90s, 5m or 1h30m", name, s)
	}
	if d < 0 {
		return 0, invalid(SlugInvalidArgument, field, "%s %q is negative: use a duration of 0 or more, or due_at for a time in the past", name, s)
	}
	return d, nil
}

// decode reads r's JSON body into v, strictly: one object, no unknown
// fields, at most Options.MaxBodyBytes. An empty body is allowed when
// optional; decode then leaves v as it is.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := h.readBody(w, r, optional)
	if err != nil || body == nil {
		return err
	}
	return decodeStrict(body, v, "")
}

// readBody reads r's body, at most Options.MaxBodyBytes of UTF-8 JSON. It
// returns nil for an empty body when optional.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, optional bool) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, &inputError{http.StatusUnsupportedMediaType, SlugUnsupportedMediaType,
				fmt.Sprintf("the body is %s; send JSON, with Content-Type: application/json", ct), ""}
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &inputError{http.StatusRequestEntityTooLarge, SlugBodyTooLarge,
				fmt.Sprintf("the body is over the limit of %d bytes; send less, such as a smaller batch", mbe.Limit), ""}
		}
		return nil, badRequest("", "reading the body failed: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil, nil
		}
		return nil, badRequest("", "the body is empty; send a JSON object")
	}
	// encoding/json would turn invalid UTF-8 and a lone surrogate escape
	// into U+FFFD, so an ID would be stored changed: the check timerctl
	// import makes of its lines.
	var te *strictjson.TextError
	if err := strictjson.CheckText(body); errors.As(err, &te) {
		return nil, badRequest("", "the body %s; send JSON in UTF-8, and binary payloads in base64 as payload", te.Problem)
	}
	return body, nil
}

// decodeStrict decodes one JSON value from data into v, refusing unknown
// fields, a key given twice and a key that names a field in another case
// (encoding/json would keep the last and match "ID" to "id"); prefix is
// the JSON pointer of data in the request, for errors.
func decodeStrict(data []byte, v any, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, prefix)
	}
	if dec.More() {
		return badRequest(prefix, "more than one JSON value; send one object")
	}
	// After the decode, which proved the text valid JSON: the key check
	// walks it without parsing errors of its own.
	var ke *strictjson.KeyError
	if err := strictjson.CheckKeys(data, v); errors.As(err, &ke) {
		field := prefix + ke.Pointer + "/" + strings.ReplaceAll(strings.ReplaceAll(ke.Key, "~", "~0"), "/", "~1")
		if ke.Field != "" {
			return badRequest(field, "unknown field %q in %s: keys are case-sensitive; write it %q (see the request's schema in /v1/openapi.json)",
				ke.Key, where(prefix+ke.Pointer), ke.Field)
		}
		return badRequest(field, "key %q is given twice in %s; give each key once", ke.Key, where(prefix+ke.Pointer))
	}
	return nil
}

// where names the object at the JSON pointer ptr of the request.
func where(ptr string) string {
	if ptr == "" {
		return "the body"
	}
	return ptr
}

// jsonError turns a decoding error into a 400 that names the field.
func jsonError(err error, prefix string) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	what := where(prefix)
	switch {
	case errors.As(err, &syn):
		return badRequest(prefix, "%s is not valid JSON at byte %d: %v", what, syn.Offset, err)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest(prefix, "%s is a JSON %s; send an object", what, typ.Value)
		}
		field := prefix + "/" + strings.ReplaceAll(typ.Field, ".", "/")
		return badRequest(field, "%s is a JSON %s, not a %s; see the request's schema in /v1/openapi.json",
			field, typ.Value, jsonKind(typ.Type.Kind().String()))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest(prefix, "%s ends in the middle of a JSON value", what)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, _ = strconv.Unquote(name)
		return badRequest(prefix+"/"+name, "unknown field %q in %s; see the request's schema in /v1/openapi.json", name, what)
	}
	return badRequest(prefix, "%s is not the JSON expected: %v", what, err)
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "string"
	case "slice", "array":
		return "array"
	case "struct", "map", "ptr":
		return "object"
	case "bool":
		return "boolean"
	}
	return "number"
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
