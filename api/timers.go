package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// maxDue is the last due time a timer may have (queue.ValidateDue).
var maxDue = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)

// checkNewTimer adds the checks ScheduleBatch makes without naming the
// field: an occurrence ID, and a delay that ends past the last due time.
func checkNewTimer(t queue.NewTimer, prefix string) error {
	if _, _, ok := queue.ParseOccurrenceID(t.ID); ok {
		return &fieldError{prefix + "/id", fmt.Errorf("%w: %q", queue.ErrOccurrenceID, t.ID)}
	}
	if t.Due.IsZero() && t.In > time.Until(maxDue) {
		return &fieldError{prefix + "/in", fmt.Errorf("%w: in %v ends after 9999-12-31", queue.ErrInvalidDue, t.In)}
	}
	return nil
}

func (h *Handler) createTimer(w http.ResponseWriter, r *http.Request) {
	h.inNamespace(w, r, func(q *queue.Queue) error {
		var j newTimerJSON
		if err := h.decode(w, r, &j, false); err != nil {
			return err
		}
		t, err := h.toNewTimer(j, "", q.Options().MaxPayloadBytes)
		if err == nil {
			err = checkNewTimer(t, "")
		}
		if err != nil {
			return err
		}
		ctx, cancel := h.ctx(r)
		defer cancel()
		res, err := q.ScheduleBatch(ctx, []queue.NewTimer{t})
		if err != nil {
			return unknownEndpoint(err, []queue.NewTimer{t}, func(int) string { return "" })
		}
		writeCreated(w, res[0].Created, created(res[0]))
		return nil
	})
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

func (h *Handler) createTimers(w http.ResponseWriter, r *http.Request) {
	h.inNamespace(w, r, func(q *queue.Queue) error {
		body, err := h.readBody(w, r, false)
		var b batchJSON
		if err == nil {
			err = decodeStrict(body, &b, "")
		}
		if err != nil {
			if body != nil {
				err = itemError(body, err)
			}
			return err
		}
		switch {
		case len(b.Timers) == 0:
			return badRequest("/timers", "the batch has no timers; give 1 to %d in timers", h.opts.MaxBatch)
		case len(b.Timers) > h.opts.MaxBatch:
			return &inputError{http.StatusRequestEntityTooLarge, SlugBatchTooLarge,
				fmt.Sprintf("the batch has %d timers, over the limit of %d; split it into batches of at most %d", len(b.Timers), h.opts.MaxBatch, h.opts.MaxBatch),
				"/timers"}
		}
		maxPayload := q.Options().MaxPayloadBytes
		timers := make([]queue.NewTimer, len(b.Timers))
		for i, j := range b.Timers {
			prefix := "/timers/" + strconv.Itoa(i)
			timers[i], err = h.toNewTimer(j, prefix, maxPayload)
			if err == nil {
				err = checkNewTimer(timers[i], prefix)
			}
			if err != nil {
				return err
			}
		}
		ctx, cancel := h.ctx(r)
		defer cancel()
		res, err := q.ScheduleBatch(ctx, timers)
		if err != nil {
			return unknownEndpoint(err, timers, func(i int) string { return "/timers/" + strconv.Itoa(i) })
		}
		out := batchResultJSON{Timers: make([]TimerJSON, len(res))}
		for i, r := range res {
			out.Timers[i] = created(r)
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
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

// timerCall runs one call on the timer of r's path and answers the timer.
func (h *Handler) timerCall(w http.ResponseWriter, r *http.Request, call func(ctx context.Context, q *queue.Queue, id string) (queue.Timer, error)) {
	answer(h, w, r, func(ctx context.Context, q *queue.Queue) (TimerJSON, error) {
		t, err := call(ctx, q, r.PathValue("id"))
		if err != nil {
			return TimerJSON{}, err
		}
		return ToTimerJSON(t), nil
	})
}

// getTimer answers the timer, with its attempt log if its fires were
// delivered to an endpoint.
func (h *Handler) getTimer(w http.ResponseWriter, r *http.Request) {
	answer(h, w, r, func(ctx context.Context, q *queue.Queue) (TimerJSON, error) {
		id := r.PathValue("id")
		t, err := q.Get(ctx, id)
		if err != nil {
			return TimerJSON{}, err
		}
		j := ToTimerJSON(t)
		if t.State == queue.StateFired {
			log, err := q.Deliveries().Attempts(ctx, id)
			if err != nil {
				return TimerJSON{}, err
			}
			j.Delivery = ToDeliveryLogJSON(log)
		}
		return j, nil
	})
}

func (h *Handler) cancelTimer(w http.ResponseWriter, r *http.Request) {
	h.timerCall(w, r, func(ctx context.Context, q *queue.Queue, id string) (queue.Timer, error) { return q.Cancel(ctx, id) })
}

func (h *Handler) fireTimer(w http.ResponseWriter, r *http.Request) {
	h.timerCall(w, r, func(ctx context.Context, q *queue.Queue, id string) (queue.Timer, error) { return q.FireNow(ctx, id) })
}

type rescheduleJSON struct {
	DueAt json.RawMessage `json:"due_at"`
	In    *string         `json:"in"`
}

func (h *Handler) rescheduleTimer(w http.ResponseWriter, r *http.Request) {
	var j rescheduleJSON
	if err := h.decode(w, r, &j, false); err != nil {
		h.fail(w, r, err)
		return
	}
	due, rel, err := readDue(j.DueAt, j.In, "")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.timerCall(w, r, func(ctx context.Context, q *queue.Queue, id string) (queue.Timer, error) {
		if rel != nil {
			return q.RescheduleIn(ctx, id, *rel)
		}
		return q.Reschedule(ctx, id, due)
	})
}

// query checks that r's query names only known parameters, each once.
func query(r *http.Request, known ...string) (url.Values, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("", "the query string is malformed: %v", err)
	}
outer:
	for k, vals := range v {
		for _, name := range known {
			if k == name {
				if len(vals) > 1 {
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

func (h *Handler) listTimers(w http.ResponseWriter, r *http.Request) {
	v, err := query(r, "state", "due_from", "due_to", "limit", "cursor")
	var o queue.ListOptions
	if err == nil && v.Get("state") != "" {
		o.State, err = queue.ParseState(v.Get("state"))
		if err != nil {
			err = badRequest("", "state %q is not one of scheduled, fired, cancelled", v.Get("state"))
		}
	}
	if err == nil {
		o.DueFrom, err = queryTime(v, "due_from")
	}
	if err == nil {
		o.DueTo, err = queryTime(v, "due_to")
	}
	if err == nil {
		o.Limit, err = queryLimit(v)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	o.Cursor = v.Get("cursor")
	answer(h, w, r, func(ctx context.Context, q *queue.Queue) (timerPageJSON, error) {
		page, err := q.List(ctx, o)
		if err != nil {
			return timerPageJSON{}, err
		}
		out := timerPageJSON{Timers: make([]TimerJSON, len(page.Timers)), NextCursor: page.NextCursor}
		for i, t := range page.Timers {
			out.Timers[i] = ToTimerJSON(t)
		}
		for _, m := range page.Malformed {
			out.Malformed = append(out.Malformed, malformedJSON{ID: m.ID, Shard: m.Shard, Reason: m.Reason})
		}
		return out, nil
	})
}

// waitTimer answers when the timer fires or is cancelled, at once if it
// has, or when the timeout passes, with the timer as it then is.
func (h *Handler) waitTimer(w http.ResponseWriter, r *http.Request) {
	v, err := query(r, "timeout")
	timeout := DefaultWaitTimeout
	if err == nil && v.Get("timeout") != "" {
		s := v.Get("timeout")
		timeout, err = time.ParseDuration(s)
		switch {
		case err != nil:
			err = badRequest("", "timeout %q is not a duration: use Go's syntax, e.g. 30s", s)
		case timeout <= 0 || timeout > h.opts.MaxWait:
			err = badRequest("", "timeout %q is outside (0, %v]: ask for at most %v, and wait again while the timer is scheduled", s, h.opts.MaxWait, h.opts.MaxWait)
		}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.inNamespace(w, r, func(q *queue.Queue) error {
		done, err := h.held.Acquire(r)
		if err != nil {
			return err
		}
		defer done()
		wctx, cancel := context.WithTimeout(r.Context(), timeout)
		err = q.Wait(wctx, r.PathValue("id"))
		cancel()
		switch {
		case r.Context().Err() != nil:
			return nil // the client is gone
		case err == nil, errors.Is(err, queue.ErrCancelled), errors.Is(err, context.DeadlineExceeded):
		default:
			return err
		}
		h.timerCall(w, r, func(ctx context.Context, _ *queue.Queue, id string) (queue.Timer, error) { return q.Get(ctx, id) })
		return nil
	})
}
