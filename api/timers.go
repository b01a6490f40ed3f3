package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// newTimerRequest is the body of POST .../timers.
type newTimerRequest struct {
	t queue.NewTimer
	f fields
}

func (req *newTimerRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	var j newTimerJSON
	if err := h.decode(w, r, &j, false); err != nil {
		return err
	}
	var err error
	req.t, err = readNewTimer(j, "")
	req.f = fields{text: []bool{j.PayloadText != nil}}
	return err
}

func createTimer(ctx context.Context, q *queue.Queue, req *newTimerRequest) (any, error) {
	res, err := q.ScheduleBatch(ctx, []queue.NewTimer{req.t})
	if err != nil {
		return nil, timerError(err, []queue.NewTimer{req.t}, req.f)
	}
	return createdReply(res[0].Created, created(res[0])), nil
}

type batchJSON struct {
	Timers []newTimerJSON `json:"timers"`
}

// rawBatchJSON is a batch whose items are decoded one by one, to name
// the item that failed when the batch as a whole did not decode.
type rawBatchJSON struct {
	Timers []json.RawMessage `json:"timers"`
}

type batchResultJSON struct {
	Timers []TimerJSON `json:"timers"`
}

// batchRequest is the body of POST .../timers/batch.
type batchRequest struct {
	timers []queue.NewTimer
	f      fields
}

func (req *batchRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	body, err := h.readBody(w, r, false)
	if err != nil {
		return err
	}
	var b batchJSON
	if err := decodeStrict(body, &b, ""); err != nil {
		return itemError(body, err)
	}
	switch {
	case len(b.Timers) == 0:
		return badRequest("/timers", "the batch has no timers; give 1 to %d in timers", h.opts.MaxBatch)
	case len(b.Timers) > h.opts.MaxBatch:
		return &inputError{http.StatusRequestEntityTooLarge, SlugBatchTooLarge,
			fmt.Sprintf("the batch has %d timers, over the limit of %d; split it into batches of at most %d", len(b.Timers), h.opts.MaxBatch, h.opts.MaxBatch),
			"/timers"}
	}
	req.timers = make([]queue.NewTimer, len(b.Timers))
	req.f = fields{prefix: func(i int) string { return "/timers/" + strconv.Itoa(i) }, text: make([]bool, len(b.Timers))}
	for i, j := range b.Timers {
		if req.timers[i], err = readNewTimer(j, req.f.prefix(i)); err != nil {
			return err
		}
		req.f.text[i] = j.PayloadText != nil
	}
	return nil
}

func createTimers(ctx context.Context, q *queue.Queue, req *batchRequest) (any, error) {
	res, err := q.ScheduleBatch(ctx, req.timers)
	if err != nil {
		return nil, timerError(err, req.timers, req.f)
	}
	return batchResultJSON{Timers: mapList(res, created)}, nil
}

// itemError finds the item of a batch that failed to decode, so that the
// problem names it (/timers/3/due): encoding/json names a field but not
// the array index it is in. It returns err when no item is to blame.
func itemError(body []byte, err error) error {
	var raw rawBatchJSON
	if decodeStrict(body, &raw, "") != nil {
		return err
	}
	for i, item := range raw.Timers {
		var j newTimerJSON
		if ierr := decodeStrict(item, &j, "/timers/"+strconv.Itoa(i)); ierr != nil {
			return ierr
		}
	}
	return err
}

// getTimer answers the timer, with its attempt log if its fires were
// delivered to an endpoint.
func getTimer(ctx context.Context, q *queue.Queue, req *pathID) (any, error) {
	t, err := q.Get(ctx, req.id)
	if err != nil {
		return nil, err
	}
	j := ToTimerJSON(t)
	if t.State == queue.StateFired {
		log, err := q.Deliveries().Attempts(ctx, req.id)
		if err != nil {
			return nil, err
		}
		j.Delivery = ToDeliveryLogJSON(log)
	}
	return j, nil
}

// timerCall is a route that runs one call on the timer of its path, a
// method expression such as (*queue.Queue).Cancel, and answers the timer.
func timerCall(call func(q *queue.Queue, ctx context.Context, id string) (queue.Timer, error)) func(context.Context, *queue.Queue, *pathID) (any, error) {
	return func(ctx context.Context, q *queue.Queue, req *pathID) (any, error) {
		t, err := call(q, ctx, req.id)
		if err != nil {
			return nil, err
		}
		return ToTimerJSON(t), nil
	}
}

// rescheduleRequest is the body of POST .../timers/{id}/reschedule.
type rescheduleRequest struct {
	id  string
	due time.Time
	rel *time.Duration
}

type rescheduleJSON struct {
	DueAt json.RawMessage `json:"due_at"`
	In    *string         `json:"in"`
}

func (req *rescheduleRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	var j rescheduleJSON
	if err := h.decode(w, r, &j, false); err != nil {
		return err
	}
	req.id = r.PathValue("id")
	var err error
	req.due, req.rel, err = readDue(j.DueAt, j.In, "")
	return err
}

func rescheduleTimer(ctx context.Context, q *queue.Queue, req *rescheduleRequest) (any, error) {
	return timerCall(func(q *queue.Queue, ctx context.Context, id string) (queue.Timer, error) {
		if req.rel != nil {
			return q.RescheduleIn(ctx, id, *req.rel)
		}
		return q.Reschedule(ctx, id, req.due)
	})(ctx, q, &pathID{req.id})
}

// repeatable are the query parameters that may be given more than once,
// each a value of its own (label=tenant=acme&label=kind=sla).
var repeatable = map[string]bool{"label": true}

// query checks that r's query names only known parameters, each once but
// the repeatable ones.
func query(r *http.Request, known ...string) (url.Values, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("", "the query string is malformed: %v", err)
	}
outer:
	for k, vals := range v {
		for _, name := range known {
			if k == name {
				if len(vals) > 1 && !repeatable[k] {
					return nil, badRequest("", "query parameter %q is given %d times; give it once", k, len(vals))
				}
				continue outer
			}
		}
		return nil, badRequest("", "unknown query parameter %q; this route takes %v", k, known)
	}
	return v, nil
}

// queryLimit reads a page size, 1..queue.MaxBatch; 0 when not given.
func queryLimit(v url.Values) (int, error) {
	s := v.Get("limit")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > queue.MaxBatch {
		return 0, badRequest("", "limit %q is not a page size from 1 to %d", s, queue.MaxBatch)
	}
	return n, nil
}

// queryTime reads a time parameter as timerctl reads --due-from.
func queryTime(v url.Values, name string) (time.Time, error) {
	s := v.Get(name)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := timefmt.Parse(s)
	if err != nil {
		e := err.(*timefmt.Error)
		return time.Time{}, invalid(SlugInvalidDue, "", "%s %q %s: %s", name, s, e.Problem, e.Fix)
	}
	return t, nil
}

// queryLabels reads the label parameters, each KEY=VALUE (split at its
// first '='), which the queue checks; nil when none is given.
func queryLabels(v url.Values) (map[string]string, error) {
	var out map[string]string
	for _, kv := range v["label"] {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, badRequest("", "label %q is not KEY=VALUE; give one label a parameter, such as label=tenant=acme", kv)
		}
		if old, dup := out[k]; dup && old != val {
			return nil, badRequest("", "label %q is given twice, as %q and %q; a timer has one value a key", k, old, val)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = val
	}
	return out, nil
}

type malformedJSON struct {
	ID     string `json:"id"`
	Shard  int    `json:"shard"`
	Reason string `json:"reason"`
}

type timerPageJSON struct {
	Timers     []TimerJSON     `json:"timers"`
	NextCursor string          `json:"next_cursor"`
	Malformed  []malformedJSON `json:"malformed,omitempty"`
}

// listTimersRequest is the query of GET .../timers.
type listTimersRequest struct{ o queue.ListOptions }

func (req *listTimersRequest) read(_ *Handler, _ http.ResponseWriter, r *http.Request) error {
	v, err := query(r, "state", "due_from", "due_to", "limit", "cursor", "owner", "label")
	if err != nil {
		return err
	}
	req.o.Owner = v.Get("owner")
	if req.o.Labels, err = queryLabels(v); err != nil {
		return err
	}
	if s := v.Get("state"); s != "" {
		if req.o.State, err = queue.ParseState(s); err != nil {
			return badRequest("", "state %q is not one of scheduled, fired, cancelled", s)
		}
	}
	if req.o.DueFrom, err = queryTime(v, "due_from"); err != nil {
		return err
	}
	if req.o.DueTo, err = queryTime(v, "due_to"); err != nil {
		return err
	}
	req.o.Cursor = v.Get("cursor")
	req.o.Limit, err = queryLimit(v)
	return err
}

func listTimers(ctx context.Context, q *queue.Queue, req *listTimersRequest) (any, error) {
	page, err := q.List(ctx, req.o)
	if err != nil {
		return nil, err
	}
	out := timerPageJSON{Timers: mapList(page.Timers, ToTimerJSON), NextCursor: page.NextCursor}
	for _, m := range page.Malformed {
		out.Malformed = append(out.Malformed, malformedJSON{ID: m.ID, Shard: m.Shard, Reason: m.Reason})
	}
	return out, nil
}

// waitRequest is a long-poll wait: GET .../timers/{id}/wait. It keeps r,
// whose client holds a slot (Options.MaxHeld) while it waits.
type waitRequest struct {
	id      string
	timeout time.Duration
	r       *http.Request
}

func (req *waitRequest) read(h *Handler, _ http.ResponseWriter, r *http.Request) error {
	v, err := query(r, "timeout")
	if err != nil {
		return err
	}
	req.id, req.r, req.timeout = r.PathValue("id"), r, DefaultWaitTimeout
	s := v.Get("timeout")
	if s == "" {
		return nil
	}
	if req.timeout, err = time.ParseDuration(s); err != nil {
		return badRequest("", "timeout %q is not a duration: use Go's syntax, e.g. 30s", s)
	}
	if req.timeout <= 0 || req.timeout > h.opts.MaxWait {
		return badRequest("", "timeout %q is outside (0, %v]: ask for at most %v, and wait again while the timer is scheduled", s, h.opts.MaxWait, h.opts.MaxWait)
	}
	return nil
}

// waitTimer answers when the timer fires or is cancelled, at once if it
// has, or when the timeout passes, with the timer as it then is.
func (h *Handler) waitTimer(ctx context.Context, q *queue.Queue, req *waitRequest) (any, error) {
	done, err := h.held.Acquire(req.r)
	if err != nil {
		return nil, err
	}
	defer done()
	wctx, cancel := context.WithTimeout(req.r.Context(), req.timeout)
	err = q.Wait(wctx, req.id)
	cancel()
	if err != nil && !errors.Is(err, queue.ErrCancelled) && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	// The request's own context (ctx) starts its time before the wait.
	gctx, cancel := h.ctx(req.r)
	defer cancel()
	return timerCall((*queue.Queue).Get)(gctx, q, &pathID{req.id})
}
