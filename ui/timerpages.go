package ui

// The timers pages: the listing, one timer, and its confirmed actions.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/timerq/timerq/internal/payloadfmt"
	"github.com/timerq/timerq/queue"
)

const (
	listPage = 50
	// prefixBudget bounds how many timers one ID-prefix page examines: List
	// has no prefix index, so a prefix is matched within pages of the
	// due-ordered listing, and a sparse prefix takes several clicks of Next.
	prefixBudget = 5000
	prefixChunk  = 500
)

type timersData struct {
	State, From, To, Prefix string
	Owner                   string
	States                  []string
	Now                     time.Time
	Exact                   *queue.Timer
	Timers                  []queue.Timer
	Next                    string
	Scanned                 int
	Budget                  int
	Error                   string
}

func (h *Handler) timers(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	d := timersData{State: qs.Get("state"), From: qs.Get("from"), To: qs.Get("to"), Prefix: qs.Get("prefix"), Owner: qs.Get("owner"),
		States: []string{"", "scheduled", "fired", "cancelled"}, Now: time.Now().UTC()}
	opts := queue.ListOptions{Cursor: qs.Get("cursor"), Owner: d.Owner}
	var err error
	if d.State != "" {
		if opts.State, err = queue.ParseState(d.State); err != nil {
			d.Error = err.Error()
		}
	}
	if opts.DueFrom, err = parseWhen(d.From); err != nil {
		d.Error = "from: " + err.Error()
	}
	if opts.DueTo, err = parseWhen(d.To); err != nil {
		d.Error = "to: " + err.Error()
	}
	if d.Error != "" {
		h.render(w, r, http.StatusBadRequest, "timers", "Timers", d)
		return
	}
	if d.Prefix == "" {
		opts.Limit = listPage
		page, err := h.q.List(ctx, opts)
		if h.failed(w, r, err) {
			return
		}
		d.Timers = page.Timers
		if page.NextCursor != "" {
			d.Next = h.link("/timers", "state", d.State, "from", d.From, "to", d.To, "owner", d.Owner, "cursor", page.NextCursor)
		}
		h.render(w, r, http.StatusOK, "timers", "Timers", d)
		return
	}
	// The prefix may be a whole ID: one O(1) lookup finds it wherever it
	// is due.
	if opts.Cursor == "" && queue.ValidateID(d.Prefix) == nil {
		if t, err := h.q.Get(ctx, d.Prefix); err == nil && (d.Owner == "" || t.Owner == d.Owner) {
			d.Exact = &t
		}
	}
	d.Budget = prefixBudget
	opts.Limit = prefixChunk
	// The owner is matched here rather than by List, which drops other
	// owners' timers after reading its page: the budget counts the timers
	// read, and counting only an owner's would let a sparse owner's search
	// list the whole namespace in one request. An owner List would refuse
	// is refused here as List refused it.
	if d.Owner != "" && h.failed(w, r, queue.ValidateOwner(d.Owner)) {
		return
	}
	opts.Owner = ""
	for d.Scanned < prefixBudget && len(d.Timers) < listPage {
		page, err := h.q.List(ctx, opts)
		if h.failed(w, r, err) {
			return
		}
		d.Scanned += len(page.Timers)
		for _, t := range page.Timers {
			if strings.HasPrefix(t.ID, d.Prefix) && (d.Owner == "" || t.Owner == d.Owner) && (d.Exact == nil || t.ID != d.Exact.ID) {
				d.Timers = append(d.Timers, t)
			}
		}
		opts.Cursor = page.NextCursor
		if opts.Cursor == "" {
			break
		}
	}
	if opts.Cursor != "" {
		d.Next = h.link("/timers", "state", d.State, "from", d.From, "to", d.To, "prefix", d.Prefix, "owner", d.Owner, "cursor", opts.Cursor)
	}
	h.render(w, r, http.StatusOK, "timers", "Timers", d)
}

// ---- one timer ----

type timerData struct {
	Timer       queue.Timer
	Now         time.Time
	PayloadText string
	Binary      bool
	Size        int
	DueInput    string
	// Debounce is set when the timer is a debounce window's: its ID has
	// an occurrence's form but no such schedule exists
	// (queue.Inspector.DebounceWindowOf); the page then shows no Schedule.
	Debounce *queue.DebounceWindow
	// Schedule is the schedule this timer is an occurrence of, by the form
	// of its ID ("<schedule>@<ms>"); empty when the ID has another form.
	Schedule string
	// Delivery is the endpoint it delivers to and its attempt log.
	Delivery timerDelivery
}

func (h *Handler) timer(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	t, err := h.q.Get(ctx, id)
	if h.failed(w, r, err) {
		return
	}
	d := timerData{Timer: t, Now: time.Now().UTC(), Size: len(t.Payload), DueInput: formatTime(t.Due)}
	// A user without +get (an older ui line) still sees the page, with
	// the schedule link as before.
	if w, ok, err := h.q.Inspect().DebounceWindowOf(ctx, t.ID); err == nil && ok {
		d.Debounce = &w
	}
	d.PayloadText, d.Binary = payloadText(t.Payload)
	d.Schedule, _, _ = queue.ParseOccurrenceID(t.ID)
	if d.Delivery, err = h.timerDelivery(ctx, t); h.failed(w, r, err) {
		return
	}
	h.render(w, r, http.StatusOK, "timer", t.ID, d)
}

// payloadText shows a payload as text when it is printable UTF-8 (lines
// and tabs allowed), else as a hex dump of the first 4 KiB: never raw
// control bytes.
func payloadText(p []byte) (string, bool) {
	if payloadfmt.Printable(p, true) {
		return string(p), false
	}
	return hex.Dump(p[:min(len(p), 4096)]), true
}

type confirmData struct {
	Action   string // cancel, fire, reschedule, requeue, pause, resume, delete
	Subject  string // "Timer" or "Schedule", shown before the ID; empty for a dead letter
	Question string
	Post     string
	ID       string
	Shard    string   // a dead letter's shard
	Endpoint string   // the endpoint whose dead-lettered deliveries are redriven
	Prefix   string   // the ID prefix of a bulk cancel
	Owner    string   // the owner of a bulk cancel
	Labels   []string // the labels of a bulk cancel, KEY=VALUE
	Due      time.Time
	DueMS    string // the due time as Unix ms with its unit ("1796238000000ms")
	Back     string
}

func (h *Handler) confirmTimer(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	id, action := qs.Get("id"), qs.Get("action")
	if err := queue.ValidateID(id); err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	d := confirmData{Action: action, Subject: "Timer", ID: id, Post: h.link("/timer/" + action), Back: h.link("/timer", "id", id)}
	switch action {
	case "cancel":
		d.Question = "Cancel this timer? Its waiters get ErrCancelled and it never fires."
	case "fire":
		d.Question = "Make this timer due now? The next claim fires it."
	case "reschedule":
		due, err := parseWhen(qs.Get("due"))
		if err == nil && due.IsZero() {
			err = errors.New("give the new due time")
		}
		if err != nil {
			h.fail(w, r, http.StatusBadRequest, err)
			return
		}
		d.Due, d.DueMS = due, strconv.FormatInt(due.UnixMilli(), 10)+"ms" // Unix ms with its unit, as parseWhen reads it
		d.Question = "Move this timer's due time to " + formatTime(due) + "?"
	default:
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no action %q: use cancel, fire or reschedule", action))
		return
	}
	h.render(w, r, http.StatusOK, "confirm", "Confirm", d)
}

func (h *Handler) actTimer(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	id, action := r.PostForm.Get("id"), r.PathValue("action")
	var err error
	done := ""
	switch action {
	case "cancel":
		_, err = h.q.Cancel(ctx, id)
		done = "cancelled"
	case "fire":
		_, err = h.q.FireNow(ctx, id)
		done = "fired"
	case "reschedule":
		var due time.Time
		if due, err = parseWhen(r.PostForm.Get("due")); err == nil {
			_, err = h.q.Reschedule(ctx, id, due)
		}
		done = "rescheduled"
	default:
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no action %q: use cancel, fire or reschedule", action))
		return
	}
	if h.failed(w, r, err) {
		return
	}
	h.log.Info("timerq ui: timer action", "action", action, "id", id, "namespace", h.q.Namespace())
	http.Redirect(w, r, h.link("/timer", "id", id, "done", done), http.StatusSeeOther)
}
