package ui

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/timerq/timerq/internal/httpstream"
	"github.com/timerq/timerq/internal/payloadfmt"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/schedule"
)

// pages are the templates, each rendered inside layout.html.
var pageNames = []string{"overview", "timers", "timer", "confirm", "tail", "groups", "schedules", "schedule", "quarantine", "error"}

func (h *Handler) parseTemplates() error {
	funcs := template.FuncMap{
		"ts":      formatTime,
		"rel":     relTime,
		"dur":     formatDur,
		"link":    h.link,
		"num":     func(n int64) string { return groupDigits(n) },
		"sid":     streamTime,
		"payload": payloadCell,
	}
	h.pages = map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("ui: template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	return nil
}

// view is what every page template gets; Data is the page's own.
type view struct {
	Title     string
	Nav       string
	Prefix    string
	Namespace string
	Writes    bool
	CSRF      string
	Notice    string
	Data      any
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, code int, name, title string, data any) {
	v := view{
		Title: title, Nav: name, Prefix: h.opts.Prefix, Namespace: h.q.Namespace(),
		Writes: h.opts.AllowWrites, Data: data, Notice: notices[r.URL.Query().Get("done")],
	}
	if h.opts.AllowWrites {
		v.CSRF = h.csrfToken(w, r)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := h.pages[name].Execute(w, v); err != nil {
		h.log.Error("timerq ui: rendering failed", "page", name, "err", err)
	}
}

// notices are the confirmations shown after an action redirects; the
// query names one, so no text from the URL reaches the page.
var notices = map[string]string{
	"cancelled":   "Timer cancelled.",
	"fired":       "Timer made due now: the next claim fires it.",
	"rescheduled": "Timer rescheduled.",
	"requeued":    "Dead letter requeued to its group.",
	"paused":      "Schedule paused: its pending occurrences are cancelled.",
	"resumed":     "Schedule resumed: its next occurrences are armed.",
	"deleted":     "Schedule deleted.",
}

// fail renders an error page; Redis errors are logged as well.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	if code >= 500 {
		h.log.Error("timerq ui: request failed", "path", r.URL.Path, "err", err)
	}
	h.render(w, r, code, "error", http.StatusText(code), err.Error())
}

// statusOf maps queue errors to HTTP statuses.
func statusOf(err error) int {
	switch {
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrDeadLetterNotFound), errors.Is(err, queue.ErrRecurringNotFound):
		return http.StatusNotFound
	case errors.Is(err, queue.ErrAlreadyFired), errors.Is(err, queue.ErrCancelled):
		return http.StatusConflict
	case errors.Is(err, queue.ErrInvalidID), errors.Is(err, queue.ErrInvalidDue), errors.Is(err, queue.ErrInvalidOptions),
		errors.Is(err, schedule.ErrInvalidSchedule):
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

func (h *Handler) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.opts.Timeout)
}

// link builds a URL under the prefix from a path and key, value pairs;
// empty values are left out.
func (h *Handler) link(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	u := h.opts.Prefix + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// ---- overview ----

// histEdges are the due-time buckets of the overview histogram.
var histEdges = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

var histLabels = []string{"overdue", "≤1m", "≤5m", "≤15m", "≤1h", "≤6h", "≤1d", "≤7d", ">7d"}

// rateSample is how many of the newest fire events the fire rate and
// lateness are computed from; rateWindow is the span they cover at most.
const (
	rateSample = 1000
	rateWindow = 5 * time.Minute
)

// shardRow is one row of the counts table: one per shard in a namespace
// of several shards, then the total; a single row for one shard.
type shardRow struct {
	Name  string
	Total bool
	Stats queue.Stats
	// Failed is why the shard could not be read; its counts are then
	// zero and left out of the total.
	Failed string
}

type bar struct {
	Label         string
	Count         int64
	X, Y, W, H    int
	TextX, LabelY int
	CountY        int
}

type rateView struct {
	Fires            int
	Window           time.Duration
	PerSecond        string
	P50, P90, P99    time.Duration
	Max              time.Duration
	Truncated        bool // the sample ran out before the window did
	FirstFire, Since time.Time
}

type overviewData struct {
	Now      time.Time
	Shards   []shardRow
	Total    queue.Stats
	Bars     []bar
	Rate     rateView
	Groups   []queue.GroupInfo
	Dead     int64
	Problems []string
	// Workers says who serves the namespace (nil when it could not be
	// read); NoWorker is set when none does and timers are due.
	Workers  *queue.WorkerStatus
	NoWorker bool
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	// One failing shard (a slot move) leaves the others' figures, shown
	// with the failed shard marked.
	st, err := h.q.Stats(ctx)
	var partial *queue.ShardError
	if err != nil && !errors.As(err, &partial) {
		h.fail(w, r, statusOf(err), err)
		return
	}
	d := overviewData{Now: st.Now, Total: st}
	if partial != nil {
		d.Problems = append(d.Problems, err.Error())
	}
	if len(st.Shards) > 1 {
		for k, s := range st.Shards {
			row := shardRow{Name: strconv.Itoa(k), Stats: s}
			if partial != nil && partial.Failed[k] != nil {
				row.Failed = partial.Failed[k].Error()
			}
			d.Shards = append(d.Shards, row)
		}
	}
	d.Shards = append(d.Shards, shardRow{Name: "all", Total: true, Stats: st})
	if counts, err := h.q.DueHistogram(ctx, st.Now, histEdges); counts == nil {
		d.Problems = append(d.Problems, "histogram: "+err.Error())
	} else {
		d.Bars = bars(counts)
	}
	if ws, err := h.q.Workers(ctx); err != nil {
		d.Problems = append(d.Problems, "workers: "+err.Error())
	} else {
		d.Workers = &ws
		d.NoWorker = len(ws.Live) == 0 && st.Overdue > 0
	}
	if evs, _, err := h.q.RecentFires(ctx, rateSample); err != nil {
		d.Problems = append(d.Problems, "fire rate: "+err.Error())
	} else {
		d.Rate = fireRate(evs, st.Now)
	}
	if d.Groups, err = h.q.Groups(ctx); err != nil {
		d.Problems = append(d.Problems, "consumer groups: "+err.Error())
	}
	if d.Dead, err = h.q.DeadLetterCount(ctx); err != nil {
		d.Problems = append(d.Problems, "dead letters: "+err.Error())
	}
	h.render(w, r, http.StatusOK, "overview", "Overview", d)
}

// bars lays out the histogram as SVG rectangles: attributes, not inline
// styles, so the Content-Security-Policy needs no 'unsafe-inline'.
func bars(counts []int64) []bar {
	const width, height, top, bottom = 720, 160, 18, 20
	maxC := slices.Max(counts)
	slot := width / len(counts)
	out := make([]bar, len(counts))
	for i, c := range counts {
		hgt := 0
		if maxC > 0 {
			hgt = int(float64(height-top-bottom) * float64(c) / float64(maxC))
		}
		if c > 0 && hgt < 2 {
			hgt = 2
		}
		y := height - bottom - hgt
		out[i] = bar{Label: histLabels[i], Count: c, X: i*slot + 6, Y: y, W: slot - 12, H: hgt,
			TextX: i*slot + slot/2, LabelY: height - 5, CountY: y - 4}
	}
	return out
}

// fireRate computes the recent fire rate and lateness percentiles from the
// newest events (newest first), over the last rateWindow by the server
// clock; when more fired in the window than the sample holds, over the span
// the sample covers.
func fireRate(evs []queue.Event, now time.Time) rateView {
	since := now.Add(-rateWindow)
	var late []time.Duration
	oldest := now
	for _, ev := range evs {
		if ev.FiredAt.Before(since) {
			break
		}
		late = append(late, ev.FiredAt.Sub(ev.Due))
		oldest = ev.FiredAt
	}
	v := rateView{Fires: len(late), Window: rateWindow, Since: since}
	if len(late) == len(evs) && len(evs) == rateSample {
		v.Truncated, v.Window = true, max(now.Sub(oldest), time.Millisecond)
	}
	v.PerSecond = strconv.FormatFloat(float64(len(late))/v.Window.Seconds(), 'f', 2, 64)
	if len(late) == 0 {
		return v
	}
	slices.Sort(late)
	pct := func(p float64) time.Duration {
		i := int(p*float64(len(late))+0.999999) - 1
		return late[min(max(i, 0), len(late)-1)]
	}
	v.P50, v.P90, v.P99, v.Max = pct(0.5), pct(0.9), pct(0.99), late[len(late)-1]
	return v
}

// ---- timers ----

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
	States                  []string
	Now                     time.Time
	Exact                   *queue.Timer
	Timers                  []queue.Timer
	Next                    string
	Scanned                 int
	Budget                  int
	Error                   string
}

func (h *Handler) timers(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	d := timersData{State: qs.Get("state"), From: qs.Get("from"), To: qs.Get("to"), Prefix: qs.Get("prefix"),
		States: []string{"", "scheduled", "fired", "cancelled"}, Now: time.Now().UTC()}
	opts := queue.ListOptions{Cursor: qs.Get("cursor")}
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
	ctx, cancel := h.ctx(r)
	defer cancel()
	if d.Prefix == "" {
		opts.Limit = listPage
		page, err := h.q.List(ctx, opts)
		if err != nil {
			h.fail(w, r, statusOf(err), err)
			return
		}
		d.Timers = page.Timers
		if page.NextCursor != "" {
			d.Next = h.link("/timers", "state", d.State, "from", d.From, "to", d.To, "cursor", page.NextCursor)
		}
		h.render(w, r, http.StatusOK, "timers", "Timers", d)
		return
	}
	// The prefix may be a whole ID: one O(1) lookup finds it wherever it
	// is due.
	if opts.Cursor == "" && queue.ValidateID(d.Prefix) == nil {
		if t, err := h.q.Get(ctx, d.Prefix); err == nil {
			d.Exact = &t
		}
	}
	d.Budget = prefixBudget
	opts.Limit = prefixChunk
	for d.Scanned < prefixBudget && len(d.Timers) < listPage {
		page, err := h.q.List(ctx, opts)
		if err != nil {
			h.fail(w, r, statusOf(err), err)
			return
		}
		d.Scanned += len(page.Timers)
		for _, t := range page.Timers {
			if strings.HasPrefix(t.ID, d.Prefix) && (d.Exact == nil || t.ID != d.Exact.ID) {
				d.Timers = append(d.Timers, t)
			}
		}
		opts.Cursor = page.NextCursor
		if opts.Cursor == "" {
			break
		}
	}
	if opts.Cursor != "" {
		d.Next = h.link("/timers", "state", d.State, "from", d.From, "to", d.To, "prefix", d.Prefix, "cursor", opts.Cursor)
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
	// Schedule is the schedule this timer is an occurrence of, by the form
	// of its ID ("<schedule>@<ms>"); empty when the ID has another form.
	Schedule string
}

func (h *Handler) timer(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	ctx, cancel := h.ctx(r)
	defer cancel()
	t, err := h.q.Get(ctx, id)
	if err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	d := timerData{Timer: t, Now: time.Now().UTC(), Size: len(t.Payload), DueInput: formatTime(t.Due)}
	d.PayloadText, d.Binary = payloadText(t.Payload)
	d.Schedule, _, _ = queue.ParseOccurrenceID(t.ID)
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
	Shard    string // a dead letter's shard
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

func (h *Handler) actTimer(w http.ResponseWriter, r *http.Request) {
	id, action := r.PostForm.Get("id"), r.PathValue("action")
	ctx, cancel := h.ctx(r)
	defer cancel()
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
	if err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	h.log.Info("timerq ui: timer action", "action", action, "id", id, "namespace", h.q.Namespace())
	http.Redirect(w, r, h.link("/timer", "id", id, "done", done), http.StatusSeeOther)
}

// ---- live tail ----

type tailData struct {
	Events []queue.Event
	After  string
}

func (h *Handler) tail(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	evs, cursor, err := h.q.RecentFires(ctx, 20)
	if err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	h.render(w, r, http.StatusOK, "tail", "Live tail", tailData{Events: evs, After: cursor})
}

// streamCursor matches a position in the fire or dead-letter streams: one
// stream entry ID per shard, joined by commas (queue.ReadFires). The queue
// checks it against the namespace's shard count; this keeps anything else
// from reaching it.
var streamCursor = regexp.MustCompile(`^[0-9]{1,20}(-[0-9]{1,20})?(,[0-9]{1,20}(-[0-9]{1,20})?)*$`)

// validCursor reports whether c is a stream cursor of at most MaxShards
// positions.
func validCursor(c string) bool {
	return len(c) <= queue.MaxShards*42 && streamCursor.MatchString(c)
}

// streamID matches one stream entry ID.
var streamID = regexp.MustCompile(`^[0-9]{1,20}(-[0-9]{1,20})?$`)

// tailPoll is how often a live tail reads the fire streams. The reads do
// not block: a blocking XREAD holds a pool connection for its whole wait,
// and 20 open tails held all of go-redis's default pool, so no page could
// get one. Polling costs a tail at most half a second of delay, and Redis
// one cheap read per tail per tailPoll, of at most Options.MaxTails tails.
const tailPoll = 500 * time.Millisecond

// tailKeepAlive is how long a tail with nothing to show waits before it
// writes a comment, so a gone browser (or a proxy's idle timeout) is
// noticed this soon.
const tailKeepAlive = 2 * time.Second

// tailEvents streams fire events as Server-Sent Events. The last event of
// each batch carries the cursor after it as its event ID, so a
// reconnecting browser resumes where it stopped (Last-Event-ID), at worst
// showing the rest of an interrupted batch again. Beyond the caps on open
// tails it answers 503 with Retry-After.
func (h *Handler) tailEvents(w http.ResponseWriter, r *http.Request) {
	after := cmpOr(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after"), "0")
	if !validCursor(after) {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("after %q is not a fire stream cursor", after))
		return
	}
	release, err := h.tails.Acquire(r)
	if err != nil {
		h.tails.SetRetryAfter(w.Header())
		h.log.Warn("timerq ui: live tail refused", "client", httpstream.ClientOf(r), "err", err)
		h.fail(w, r, http.StatusServiceUnavailable, err)
		return
	}
	defer release()
	// A wrong cursor (say, for another shard count) fails now, as a 400,
	// rather than as a stream of problems.
	vctx, cancel := h.ctx(r)
	_, _, err = h.q.ReadFires(vctx, after, 1, 0)
	cancel()
	if errors.Is(err, queue.ErrInvalidOptions) {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	st := httpstream.Start(w, h.opts.TailWriteTimeout)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if st.Send([]byte("retry: 2000\n\n")) != nil {
		return
	}
	ctx := r.Context()
	tick := time.NewTicker(tailPoll)
	defer tick.Stop()
	lastSent := time.Now()
	var buf bytes.Buffer
	for {
		rctx, cancel := h.ctx(r)
		evs, next, err := h.q.ReadFires(rctx, after, 100, 0)
		cancel()
		if ctx.Err() != nil {
			return
		}
		buf.Reset()
		switch {
		case err != nil:
			h.log.Warn("timerq ui: reading the fire stream failed", "err", err)
			fmt.Fprintf(&buf, "event: problem\ndata: %s\n\n", jsonString(err.Error()))
		case len(evs) > 0:
			for i, ev := range evs {
				if i == len(evs)-1 {
					fmt.Fprintf(&buf, "id: %s\n", next)
				}
				fmt.Fprintf(&buf, "event: fire\ndata: %s\n\n", fireJSON(ev, h))
			}
			after = next
		case time.Since(lastSent) >= tailKeepAlive:
			buf.WriteString(": keep-alive\n\n")
		}
		if buf.Len() > 0 {
			if st.Send(buf.Bytes()) != nil {
				return // the client is gone or stopped reading
			}
			lastSent = time.Now()
		}
		if len(evs) == 100 {
			continue // more are waiting
		}
		wait := tick.C
		if err != nil {
			// Redis is failing: say so every keep-alive, not every poll.
			wait = time.After(tailKeepAlive)
		}
		select {
		case <-ctx.Done():
			return
		case <-wait:
		}
	}
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// ---- consumer groups and dead letters ----

type groupsData struct {
	Now    time.Time
	Groups []groupView
	Dead   []queue.DeadLetter
	Count  int64
	Next   string
	// Sharded shows each dead letter's shard.
	Sharded bool
}

func (h *Handler) groups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	d := groupsData{Now: time.Now().UTC()}
	groups, err := h.q.Groups(ctx)
	if err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	for _, g := range groups {
		cs, err := h.q.Consumers(ctx, g.Name)
		if err != nil {
			h.fail(w, r, statusOf(err), err)
			return
		}
		d.Groups = append(d.Groups, groupView{GroupInfo: g, Members: consumerViews(cs, d.Now)})
	}
	after := r.URL.Query().Get("after")
	if after != "" && !validCursor(after) {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("after %q is not a dead-letter cursor", after))
		return
	}
	var next string
	if d.Dead, next, err = h.q.DeadLetters(ctx, after, listPage); err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	if next != "" {
		d.Next = h.link("/groups", "after", next)
	}
	if d.Count, err = h.q.DeadLetterCount(ctx); err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	shards, _ := h.q.Shards(ctx) // read by the calls above
	d.Sharded = shards > 1
	h.render(w, r, http.StatusOK, "groups", "Consumer groups", d)
}

// groupView is a consumer group with its consumers.
type groupView struct {
	queue.GroupInfo
	Members []consumerView
}

// consumerView is one consumer, with its times made absolute and a word on
// whether it looks alive.
type consumerView struct {
	queue.ConsumerInfo
	// LastSeen is Now-Idle: on Redis 7.2+ its last read or claim, on 7.0
	// its last delivery (SeenIsDelivery).
	LastSeen       time.Time
	SeenIsDelivery bool
	// LastDelivery is Now-Inactive, zero when it never got one or Redis
	// does not say (before 7.2).
	LastDelivery time.Time
	Stale        bool
	Status       string
}

// consumerStale is how long a consumer may go unseen before the page calls
// it stopped: Consume reads at least every ConsumeOptions.Block (1 s by
// default), and a handler that runs longer holds it no longer than this.
const consumerStale = time.Minute

func consumerViews(cs []queue.ConsumerInfo, now time.Time) []consumerView {
	out := make([]consumerView, 0, len(cs))
	for _, c := range cs {
		v := consumerView{ConsumerInfo: c, SeenIsDelivery: !c.InactiveKnown}
		if c.Idle >= 0 {
			v.LastSeen = now.Add(-c.Idle)
		}
		if c.InactiveKnown && c.Inactive >= 0 {
			v.LastDelivery = now.Add(-c.Inactive)
		}
		switch {
		case c.Idle < 0:
			v.Status = "unknown: the server does not report idle times"
		case c.InactiveKnown && c.Idle > consumerStale:
			v.Stale, v.Status = true, "stopped or dead: no read for "+formatDur(c.Idle)
		case c.InactiveKnown:
			v.Status = "reading"
		case c.Pending > 0 && c.Idle > queue.DefaultClaimIdle:
			v.Stale, v.Status = true, "stopped or dead? it holds "+strconv.FormatInt(c.Pending, 10)+" deliveries untouched for "+formatDur(c.Idle)+
				"; other consumers reclaim them after ClaimIdle"
		case c.Idle > consumerStale:
			v.Status = "no delivery for " + formatDur(c.Idle) + ": idle, or stopped (Redis before 7.2 cannot tell which)"
		default:
			v.Status = "active"
		}
		out = append(out, v)
	}
	return out
}

// streamTime is the time in a stream entry ID ("<ms>-<seq>"): when the
// entry was added, by the server's clock. Zero for "0-0" or no ID.
func streamTime(id string) time.Time {
	msPart, _, _ := strings.Cut(id, "-")
	ms, err := strconv.ParseInt(msPart, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// deadLetterRef reads the dead letter a request names: its entry ID, and
// the shard whose dead-letter stream holds it (0 when absent, as in a
// namespace of one shard).
func deadLetterRef(v url.Values) (shard int, id string, err error) {
	id = v.Get("id")
	if !streamID.MatchString(id) {
		return 0, "", fmt.Errorf("%q is not a dead letter ID", id)
	}
	if s := v.Get("shard"); s != "" {
		if shard, err = strconv.Atoi(s); err != nil || shard < 0 {
			return 0, "", fmt.Errorf("%q is not a shard number", s)
		}
	}
	return shard, id, nil
}

func (h *Handler) confirmRequeue(w http.ResponseWriter, r *http.Request) {
	shard, id, err := deadLetterRef(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	q := "Requeue dead letter " + id
	if n, _ := h.q.Shards(r.Context()); n > 1 {
		q += " of shard " + strconv.Itoa(shard)
	}
	h.render(w, r, http.StatusOK, "confirm", "Confirm", confirmData{
		Action: "requeue", ID: id, Shard: strconv.Itoa(shard), Post: h.link("/dead/requeue"), Back: h.link("/groups"),
		Question: q + "? The group that gave up on it gets it again as a new delivery.",
	})
}

func (h *Handler) requeue(w http.ResponseWriter, r *http.Request) {
	shard, id, err := deadLetterRef(r.PostForm)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	if _, err := h.q.Requeue(ctx, shard, id); err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	h.log.Info("timerq ui: dead letter requeued", "id", id, "shard", shard, "namespace", h.q.Namespace())
	http.Redirect(w, r, h.link("/groups", "done", "requeued"), http.StatusSeeOther)
}
