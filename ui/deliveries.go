package ui

// Push delivery: the endpoints page, a timer's delivery (its target and
// attempt log), and the dead-lettered deliveries with their redrive.

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/queue"
)

const (
	// deadCountBudget bounds the dead letters the endpoints page reads to
	// count each endpoint's: one read of the oldest ones. Beyond it the
	// counts are marked as lower bounds.
	deadCountBudget = queue.MaxBatch
	// deadChunk and deadBudget page the dead-lettered deliveries: the
	// dead-letter streams hold every group's, so a page reads chunks of
	// deadChunk until it has listPage of the delivery group's (to the
	// endpoint asked for), examining at most deadBudget.
	deadChunk  = 200
	deadBudget = 2000
	// maxErrorCell bounds an attempt's or dead letter's error in a table
	// cell, in runes; the whole text is in the cell's title.
	maxErrorCell = 200
)

// ---- endpoints ----

type endpointsData struct {
	Endpoints []endpointView
	Group     string
	// GroupFound says whether the delivery group exists yet (a dispatcher
	// made it); Pending and Lag are its own.
	GroupFound   bool
	Pending, Lag int64
	// DeadMore says the dead letters were counted over the oldest
	// DeadCounted only.
	DeadCounted int64
	DeadMore    bool
}

// endpointView is an endpoint as the page shows it: secrets and header
// values redacted (queue.Secret.Redacted, queue.RedactHeader, as timerctl
// and the API show them), since header values often carry credentials.
type endpointView struct {
	Name, URL   string
	Enabled     bool
	Timeout     string
	Retry       []string
	MaxInFlight string
	Secrets     []string
	Headers     []string
	UpdatedAt   time.Time
	Dead        int
}

func orDefault[T comparable](v, def T, show func(T) string) string {
	var zero T
	if v == zero {
		return show(def) + " (default)"
	}
	return show(v)
}

func toEndpointView(e queue.Endpoint) endpointView {
	dur := func(d time.Duration) string { return d.String() }
	itoa := strconv.Itoa
	v := endpointView{Name: e.Name, URL: e.URL, Enabled: !e.Disabled, UpdatedAt: e.UpdatedAt,
		Timeout:     orDefault(e.Timeout, deliver.DefaultTimeout, dur),
		MaxInFlight: orDefault(e.MaxInFlight, deliver.DefaultMaxInFlight, itoa),
	}
	for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
		v.Headers = append(v.Headers, k+": "+queue.RedactHeader(e.Headers[k]))
	}
	r := e.Retry
	client := "dead-lettered at once"
	if r.RetryClientErrors {
		client = "retried"
	}
	v.Retry = []string{"attempts: " + orDefault(r.MaxAttempts, deliver.DefaultMaxAttempts, itoa),
		"max age: " + orDefault(r.MaxAge, deliver.DefaultMaxAge, dur),
		"backoff: " + orDefault(r.Base, deliver.DefaultBackoffBase, dur) + " to " + orDefault(r.Cap, deliver.DefaultBackoffCap, dur),
		"other 4xx: " + client}
	for _, s := range e.Secrets {
		v.Secrets = append(v.Secrets, s.Redacted())
	}
	return v
}

func (h *Handler) endpoints(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	eps, err := h.q.Endpoints().List(ctx)
	if h.failed(w, r, err) {
		return
	}
	d := endpointsData{Group: h.opts.DeliveryGroup}
	groups, err := h.q.Inspect().Groups(ctx)
	if h.failed(w, r, err) {
		return
	}
	for _, g := range groups {
		if g.Name == d.Group {
			d.GroupFound, d.Pending, d.Lag = true, g.Pending, g.Lag
		}
	}
	dead, err := h.q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: deadCountBudget})
	if h.failed(w, r, err) {
		return
	}
	d.DeadCounted, d.DeadMore = int64(len(dead.DeadLetters)), dead.NextCursor != ""
	counts := map[string]int{}
	for _, dl := range dead.DeadLetters {
		if dl.Group == d.Group {
			counts[dl.Event.Endpoint]++
		}
	}
	for _, e := range eps {
		v := toEndpointView(e)
		v.Dead = counts[e.Name]
		d.Endpoints = append(d.Endpoints, v)
	}
	h.render(w, r, http.StatusOK, "endpoints", "Endpoints", d)
}

// confirmEndpoint asks before enabling or disabling an endpoint.
func (h *Handler) confirmEndpoint(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	name, action := qs.Get("name"), qs.Get("action")
	if err := queue.ValidateEndpointName(name); err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	d := confirmData{Action: action, Subject: "Endpoint", ID: name, Post: h.link("/endpoints/" + action), Back: h.link("/endpoints")}
	switch action {
	case "disable":
		d.Question = "Disable this endpoint? Its fires wait, neither tried nor dead-lettered, until it is enabled again."
	case "enable":
		d.Question = "Enable this endpoint? The dispatchers deliver to it again within a few seconds, its waiting fires among them."
	default:
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no action %q: use enable or disable", action))
		return
	}
	h.render(w, r, http.StatusOK, "confirm", "Confirm", d)
}

// actEndpoint enables or disables an endpoint (queue.Endpoints.SetEnabled).
func (h *Handler) actEndpoint(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	name, action := r.PostForm.Get("id"), r.PathValue("action")
	if action != "enable" && action != "disable" {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no action %q: use enable or disable", action))
		return
	}
	if _, err := h.q.Endpoints().SetEnabled(ctx, name, action == "enable"); h.failed(w, r, err) {
		return
	}
	h.log.Info("timerq ui: endpoint "+action+"d", "endpoint", name, "namespace", h.q.Namespace())
	http.Redirect(w, r, h.link("/endpoints", "done", action+"d"), http.StatusSeeOther)
}

// ---- a timer's delivery ----

// timerDelivery is the delivery part of a timer's page.
type timerDelivery struct {
	// Endpoint is the endpoint the timer delivers to, "" when none is
	// known (queue.Deliveries.Target).
	Endpoint string
	Attempts []attemptView
}

type attemptView struct {
	queue.DeliveryAttempt
	// Excerpt is Error cut to maxErrorCell runes.
	Excerpt string
}

// timerDelivery reads the target of timer t and, for a fired one, its
// attempt log: two or three O(1) reads.
func (h *Handler) timerDelivery(ctx context.Context, t queue.Timer) (timerDelivery, error) {
	var d timerDelivery
	var err error
	if d.Endpoint, err = h.q.Deliveries().Target(ctx, t.ID); err != nil {
		return d, err
	}
	if t.State != queue.StateFired {
		return d, nil
	}
	log, err := h.q.Deliveries().Attempts(ctx, t.ID)
	if err != nil {
		return d, err
	}
	for _, a := range log {
		d.Attempts = append(d.Attempts, attemptView{DeliveryAttempt: a, Excerpt: excerpt(a.Error)})
	}
	return d, nil
}

// excerpt cuts s to maxErrorCell runes.
func excerpt(s string) string {
	if utf8.RuneCountInString(s) <= maxErrorCell {
		return s
	}
	return string([]rune(s)[:maxErrorCell]) + "…"
}

// ---- dead-lettered deliveries ----

type deliveriesData struct {
	Now      time.Time
	Endpoint string
	Group    string
	Dead     []deadView
	Scanned  int
	Next     string
	Sharded  bool
	// Redrive is the timerctl command that redrives every dead-lettered
	// delivery to Endpoint (or to any endpoint), for a read-only
	// dashboard.
	Redrive string
}

type deadView struct {
	queue.DeadLetter
	Excerpt string
	// Redrive is the timerctl command that redrives this one.
	Redrive string
}

// ctlPrefix starts a timerctl redrive command for the namespace, and
// ctlGroup ends one of --endpoint or --all with the delivery group when it
// is not timerctl's default (one dead letter, named by its ID, needs none;
// and timerctl reads no flag after an argument).
func (h *Handler) ctlPrefix() string { return "timerctl -n " + h.q.Namespace() + " redrive " }

func (h *Handler) ctlGroup() string {
	if g := h.opts.DeliveryGroup; g != queue.DefaultDeliveryGroup {
		return " --group " + g
	}
	return ""
}

func (h *Handler) deliveries(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	d := deliveriesData{Now: time.Now().UTC(), Endpoint: qs.Get("endpoint"), Group: h.opts.DeliveryGroup}
	if d.Endpoint != "" {
		if err := queue.ValidateEndpointName(d.Endpoint); err != nil {
			h.fail(w, r, http.StatusBadRequest, err)
			return
		}
		d.Redrive = h.ctlPrefix() + "--endpoint " + d.Endpoint + h.ctlGroup()
	} else {
		d.Redrive = h.ctlPrefix() + "--all" + h.ctlGroup()
	}
	after := qs.Get("after")
	if after != "" && !validCursor(after) {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("after %q is not a dead-letter cursor", after))
		return
	}
	cursor := after
	for d.Scanned < deadBudget && len(d.Dead) < listPage {
		page, err := h.q.Deliveries().DeadLetters(ctx, queue.DeadLetterListOptions{Limit: deadChunk, Cursor: cursor})
		if h.failed(w, r, err) {
			return
		}
		d.Scanned += len(page.DeadLetters)
		for _, dl := range page.DeadLetters {
			if dl.Group != d.Group || dl.Event.Endpoint == "" || d.Endpoint != "" && dl.Event.Endpoint != d.Endpoint {
				continue
			}
			d.Dead = append(d.Dead, deadView{DeadLetter: dl, Excerpt: excerpt(dl.Error),
				Redrive: h.ctlPrefix() + strconv.Itoa(dl.Event.Shard) + "/" + dl.Event.StreamID})
		}
		cursor = page.NextCursor
		if cursor == "" {
			break
		}
	}
	if cursor != "" {
		d.Next = h.link("/deliveries", "endpoint", d.Endpoint, "after", cursor)
	}
	shards, _ := h.q.Inspect().Shards(ctx) // read by the calls above
	d.Sharded = shards > 1
	h.render(w, r, http.StatusOK, "deliveries", "Dead-lettered deliveries", d)
}

// confirmRedrive asks before redriving one dead-lettered delivery (id and
// shard) or every one to an endpoint (endpoint).
func (h *Handler) confirmRedrive(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	if ep := qs.Get("endpoint"); ep != "" || qs.Get("id") == "" {
		if err := queue.ValidateEndpointName(ep); err != nil {
			h.fail(w, r, http.StatusBadRequest, fmt.Errorf("name the endpoint whose dead-lettered deliveries to redrive: %w", err))
			return
		}
		h.render(w, r, http.StatusOK, "confirm", "Confirm", confirmData{
			Action: "redrive all", Endpoint: ep, Post: h.link("/deliveries/redrive"), Back: h.link("/deliveries", "endpoint", ep),
			Question: "Redrive every dead-lettered delivery to endpoint " + ep + "? Each goes back to the dispatchers of group " +
				h.opts.DeliveryGroup + " as a new fire, with a fresh set of attempts and its old webhook-id.",
		})
		return
	}
	shard, id, err := deadLetterRef(qs)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	h.render(w, r, http.StatusOK, "confirm", "Confirm", confirmData{
		Action: "redrive", Subject: "Dead letter", ID: id, Shard: strconv.Itoa(shard), Post: h.link("/deliveries/redrive"),
		Back:     h.link("/deliveries", "endpoint", qs.Get("back")),
		Question: "Redrive this dead-lettered delivery? It goes back to the dispatchers as a new fire, with a fresh set of attempts and its old webhook-id.",
	})
}

// redrive redrives one dead-lettered delivery (queue.Deliveries.Requeue)
// or every one to an endpoint (queue.Deliveries.Redrive, which pages
// through the dead letters).
func (h *Handler) redrive(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	if ep := r.PostForm.Get("endpoint"); ep != "" {
		if err := queue.ValidateEndpointName(ep); err != nil {
			h.fail(w, r, http.StatusBadRequest, err)
			return
		}
		done, err := h.q.Deliveries().Redrive(ctx, h.opts.DeliveryGroup, &queue.RedriveOptions{Endpoint: ep})
		if err != nil {
			h.fail(w, r, statusOf(err), fmt.Errorf("redrove %d dead-lettered deliveries to endpoint %q, then: %w; redrive again for the rest", len(done), ep, err))
			return
		}
		h.log.Info("timerq ui: deliveries redriven", "endpoint", ep, "count", len(done), "namespace", h.q.Namespace())
		http.Redirect(w, r, h.link("/deliveries", "endpoint", ep, "done", "redriven-all"), http.StatusSeeOther)
		return
	}
	shard, id, err := deadLetterRef(r.PostForm)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	if _, err := h.q.Deliveries().Requeue(ctx, shard, id); h.failed(w, r, err) {
		return
	}
	h.log.Info("timerq ui: delivery redriven", "id", id, "shard", shard, "namespace", h.q.Namespace())
	http.Redirect(w, r, h.link("/deliveries", "done", "redriven"), http.StatusSeeOther)
}
