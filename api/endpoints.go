package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/timerq/timerq/internal/timefmt"
	"github.com/timerq/timerq/queue"
)

// Endpoint routes: /v1/namespaces/{ns}/endpoints/... (docs/api.md,
// "Endpoints"). Secrets and header values go in whole on PUT and come back
// redacted, always.

// RetryJSON is an endpoint's retry policy on the wire. Durations are in
// Go's syntax (90s, 5m, 1h30m); an absent or zero field means the
// delivery engine's default.
type RetryJSON struct {
	MaxAttempts            int    `json:"max_attempts,omitempty"`
	MaxAge                 string `json:"max_age,omitempty"`
	BackoffBase            string `json:"backoff_base,omitempty"`
	BackoffCap             string `json:"backoff_cap,omitempty"`
	DeadLetterClientErrors *bool  `json:"dead_letter_client_errors,omitempty"`
}

// EndpointJSON is an endpoint as the API returns it: its secrets and
// header values redacted (queue.Secret.Redacted, queue.RedactHeader),
// never whole.
type EndpointJSON struct {
	Name        string            `json:"name"`
	URL         string            `json:"url"`
	Headers     map[string]string `json:"headers"`
	Timeout     string            `json:"timeout,omitempty"` // absent: the dispatcher's default
	Retry       RetryJSON         `json:"retry"`
	MaxInFlight int               `json:"max_in_flight"`
	Secrets     []string          `json:"secrets"`
	Enabled     bool              `json:"enabled"`
	UpdatedAt   string            `json:"updated_at"`
	// Created is set only in answers to PUT: whether it created the
	// endpoint.
	Created *bool `json:"created,omitempty"`
}

// endpointInJSON is the body of PUT .../endpoints/{name}.
type endpointInJSON struct {
	URL         *string           `json:"url"`
	Headers     map[string]string `json:"headers"`
	Timeout     *string           `json:"timeout"`
	Retry       *RetryJSON        `json:"retry"`
	MaxInFlight int               `json:"max_in_flight"`
	Secrets     []string          `json:"secrets"`
	Enabled     *bool             `json:"enabled"`
}

type endpointListJSON struct {
	Endpoints []EndpointJSON `json:"endpoints"`
}

// DeliverJSON is the "deliver" object of a timer or schedule: the name of
// the namespace's endpoint its fires are POSTed to, and optionally a URL
// of its own (allowed by the namespace's delivery policy), which then
// takes the endpoint's place as the target of the POST.
type DeliverJSON struct {
	Endpoint *string `json:"endpoint"`
	URL      *string `json:"url,omitempty"`
}

func durString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// ToEndpointJSON is e as the API and `timerctl endpoints -o json` show
// it, its secrets and header values redacted.
func ToEndpointJSON(e queue.Endpoint) EndpointJSON {
	dl := !e.Retry.RetryClientErrors
	return EndpointJSON{Name: e.Name, URL: e.URL, Headers: e.RedactedHeaders(), Timeout: durString(e.Timeout),
		Retry: RetryJSON{MaxAttempts: e.Retry.MaxAttempts, MaxAge: durString(e.Retry.MaxAge),
			BackoffBase: durString(e.Retry.Base), BackoffCap: durString(e.Retry.Cap), DeadLetterClientErrors: &dl},
		MaxInFlight: e.MaxInFlight, Secrets: mapList(e.Secrets, queue.Secret.Redacted), Enabled: !e.Disabled,
		UpdatedAt: timefmt.Format(e.UpdatedAt)}
}

// toEndpoint checks the wire form's own syntax; queue.ValidateEndpoint
// checks the rest.
func toEndpoint(name string, j endpointInJSON) (queue.Endpoint, error) {
	if j.URL == nil {
		return queue.Endpoint{}, badRequest("/url", "the endpoint has no url; give an absolute http:// or https:// URL")
	}
	e := queue.Endpoint{Name: name, URL: *j.URL, Headers: j.Headers, MaxInFlight: j.MaxInFlight}
	if j.Enabled != nil {
		e.Disabled = !*j.Enabled
	}
	dur := func(s *string, field string) (time.Duration, error) {
		if s == nil || *s == "" {
			return 0, nil
		}
		return readDelay(*s, field)
	}
	var err error
	if e.Timeout, err = dur(j.Timeout, "/timeout"); err != nil {
		return e, err
	}
	if r := j.Retry; r != nil {
		e.Retry.MaxAttempts = r.MaxAttempts
		if e.Retry.MaxAge, err = dur(&r.MaxAge, "/retry/max_age"); err != nil {
			return e, err
		}
		if e.Retry.Base, err = dur(&r.BackoffBase, "/retry/backoff_base"); err != nil {
			return e, err
		}
		if e.Retry.Cap, err = dur(&r.BackoffCap, "/retry/backoff_cap"); err != nil {
			return e, err
		}
		if r.DeadLetterClientErrors != nil {
			e.Retry.RetryClientErrors = !*r.DeadLetterClientErrors
		}
	}
	for _, s := range j.Secrets {
		e.Secrets = append(e.Secrets, queue.Secret(s))
	}
	return e, nil
}

// endpointField names the request field a refusal of queue.ValidateEndpoint
// is about, from its words.
func endpointField(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "secret"):
		return "/secrets"
	case strings.Contains(msg, "URL"):
		return "/url"
	case strings.Contains(msg, "header"):
		return "/headers"
	case strings.Contains(msg, "timeout"):
		return "/timeout"
	case strings.Contains(msg, "in flight"):
		return "/max_in_flight"
	case strings.Contains(msg, "retry") || strings.Contains(msg, "attempts") || strings.Contains(msg, "backoff"):
		return "/retry"
	}
	return ""
}

// endpointRequest is the body of PUT .../endpoints/{name}.
type endpointRequest struct {
	e     queue.Endpoint
	allow *queue.PutEndpointOptions
}

func (req *endpointRequest) read(h *Handler, w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := queue.ValidateEndpointName(name); err != nil {
		return err
	}
	var j endpointInJSON
	if err := h.decode(w, r, &j, false); err != nil {
		return err
	}
	e, err := toEndpoint(name, j)
	if err != nil {
		return err
	}
	req.e, req.allow = e, &queue.PutEndpointOptions{Allow: h.opts.EndpointAllow}
	if err := queue.ValidateEndpoint(e, req.allow); err != nil {
		return &fieldError{endpointField(err), err}
	}
	return nil
}

func putEndpoint(ctx context.Context, q *queue.Queue, req *endpointRequest) (any, error) {
	created, err := q.Endpoints().Put(ctx, req.e, req.allow)
	if err != nil {
		return nil, err
	}
	stored, err := q.Endpoints().Get(ctx, req.e.Name)
	if err != nil {
		return nil, err
	}
	out := ToEndpointJSON(stored)
	out.Created = &created
	return createdReply(created, out), nil
}

// endpointCall is a route that runs one call on the endpoint of its path
// and answers the endpoint.
func endpointCall(call func(e queue.Endpoints, ctx context.Context, name string) (queue.Endpoint, error)) func(context.Context, *queue.Queue, *pathName) (any, error) {
	return func(ctx context.Context, q *queue.Queue, req *pathName) (any, error) {
		e, err := call(q.Endpoints(), ctx, req.name)
		if err != nil {
			return nil, err
		}
		return ToEndpointJSON(e), nil
	}
}

func setEnabled(on bool) func(queue.Endpoints, context.Context, string) (queue.Endpoint, error) {
	return func(e queue.Endpoints, ctx context.Context, name string) (queue.Endpoint, error) {
		return e.SetEnabled(ctx, name, on)
	}
}

func deleteEndpoint(ctx context.Context, q *queue.Queue, req *pathName) (any, error) {
	return noContent, q.Endpoints().Delete(ctx, req.name)
}

func listEndpoints(ctx context.Context, q *queue.Queue, _ *noQuery) (any, error) {
	list, err := q.Endpoints().List(ctx)
	if err != nil {
		return nil, err
	}
	return endpointListJSON{Endpoints: mapList(list, ToEndpointJSON)}, nil
}

// readDeliver reads a timer's deliver object: the endpoint's name, and
// the timer's own URL. The queue checks both (queue.FieldError); the
// wire alone tells a field given empty from one left out, which the
// queue takes for none.
func readDeliver(d *DeliverJSON, prefix string) (endpoint, url string, _ error) {
	if d == nil {
		return "", "", nil
	}
	switch {
	case d.Endpoint == nil:
		return "", "", badRequest(prefix+"/deliver/endpoint", "deliver has no endpoint; name one of the namespace's endpoints (GET .../endpoints lists them)")
	case *d.Endpoint == "":
		return "", "", invalid(SlugInvalidEndpoint, prefix+"/deliver/endpoint", "deliver.endpoint is empty; name one of the namespace's endpoints (GET .../endpoints lists them)")
	case d.URL != nil && *d.URL == "":
		return "", "", invalid(SlugInvalidArgument, prefix+"/deliver/url", "deliver.url is empty; give an absolute http or https URL, or leave url out to deliver to the endpoint's own")
	case d.URL != nil:
		url = *d.URL
	}
	return *d.Endpoint, url, nil
}

// timerError names the field of timers (at f) a refusal of ScheduleBatch
// (or Debounce, or of a schedule) is about: the field of a
// queue.FieldError, the deliver.url of the first timer with one when the
// namespace's policy refuses timer URLs, and the deliver.endpoint of the
// first timer that named a missing endpoint (a 422).
func timerError(err error, timers []queue.NewTimer, f fields) error {
	if named, ok := f.named(err); ok {
		return named
	}
	switch {
	case errors.Is(err, queue.ErrTimerURLsOff):
		for i, t := range timers {
			if t.URL != "" {
				return &fieldError{f.pointer(i, "URL"), err}
			}
		}
		return err
	case errors.Is(err, queue.ErrStaleEpoch):
		// The item that gave an epoch its owner is not at; the message
		// names the owner and its epoch.
		for i, t := range timers {
			if t.Epoch != 0 && strings.Contains(err.Error(), fmt.Sprintf("owner %q ", t.Owner)) &&
				!strings.Contains(err.Error(), fmt.Sprintf("owner %q is at epoch %d,", t.Owner, t.Epoch)) {
				return &fieldError{f.pointer(i, "Epoch"), err}
			}
		}
		return err
	case !errors.Is(err, queue.ErrEndpointNotFound):
		return err
	}
	field := ""
	for i, t := range timers {
		if t.Endpoint != "" && strings.Contains(err.Error(), fmt.Sprintf("%q", t.Endpoint)) {
			field = f.pointer(i, "Endpoint")
			break
		}
	}
	return invalid(SlugUnknownEndpoint, field, "%s", strings.TrimPrefix(err.Error(), "timerq: "))
}
