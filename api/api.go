package api

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/httpstream"
	"github.com/timerq/timerq/queue"
)

// Limits and defaults of Options.
const (
	// DefaultMaxBodyBytes caps a request body when Options.MaxBodyBytes
	// is 0: room for a batch of 100 timers with 64 KiB payloads in
	// base64, or 1000 with payloads of a few KiB.
	DefaultMaxBodyBytes = 8 << 20
	// DefaultMaxBatch caps the timers of one batch create when
	// Options.MaxBatch is 0.
	DefaultMaxBatch = 1000
	// MaxBatchLimit is the largest Options.MaxBatch accepted, the
	// maxItems of the OpenAPI document: one batch is one ScheduleBatch
	// call, written atomically per shard.
	MaxBatchLimit = queue.MaxBatch
	// DefaultMaxWait caps the timeout of one long-poll wait when
	// Options.MaxWait is 0; it sits below the idle timeouts of common
	// proxies and load balancers (60 s).
	DefaultMaxWait = 55 * time.Second
	// DefaultWaitTimeout is the timeout of a wait that names none.
	DefaultWaitTimeout = 30 * time.Second
	// DefaultTimeout bounds the Redis calls of one ordinary request when
	// Options.Timeout is 0.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxHeld and DefaultMaxHeldPerClient cap the long polls and
	// event streams open at once, over all clients and per client, when
	// Options.MaxHeld and Options.MaxHeldPerClient are 0.
	DefaultMaxHeld          = 10000
	DefaultMaxHeldPerClient = 1000
	// DefaultStreamWriteTimeout bounds each write of an event stream when
	// Options.StreamWriteTimeout is 0.
	DefaultStreamWriteTimeout = 10 * time.Second
	// DefaultStreamPoll is how often an event stream reads the fire
	// streams when Options.StreamPoll is 0.
	DefaultStreamPoll = 250 * time.Millisecond
	// DefaultMaxNamespaces bounds the namespaces a Handler keeps open when
	// Options.MaxNamespaces is 0.
	DefaultMaxNamespaces = 1000
	// DefaultRetryAfter is the Retry-After of a 503 when Options.RetryAfter
	// is 0.
	DefaultRetryAfter = 2 * time.Second
)

// Options configures a Handler. Every field but Client may be left zero:
// each zero value means its Default constant.
type Options struct {
	// Client is the Redis the API serves: a standalone, Sentinel or Cluster
	// client. Required. The Handler never closes it.
	Client redis.UniversalClient

	// Queue is the template of every namespace's queue.Options. Its
	// Namespace is replaced by the one in the request path, and its Shards
	// by 0, so that each namespace's shard count is read from Redis
	// (PUT /v1/namespaces/{ns} sets it). Its CoalesceSchedules is set
	// from NoCoalesce.
	Queue queue.Options

	// NoCoalesce turns off the merging of concurrent single creates of one
	// namespace into shared script calls (queue.Options.CoalesceSchedules),
	// which is on by default: under many concurrent creates it multiplies
	// what one Redis core takes, and a lone create waits for nothing.
	NoCoalesce bool

	// Logger receives failures the client cannot be told about (a stream
	// cut short) and every 5xx answer; nil discards them.
	Logger *slog.Logger

	// MaxBodyBytes caps a request body; a larger one is refused with 413.
	// 0 means DefaultMaxBodyBytes (8 MiB). It cannot be turned off.
	MaxBodyBytes int64

	// MaxBatch caps the timers of one batch create, 1..MaxBatchLimit; a
	// larger batch is refused with 413. 0 means DefaultMaxBatch (1000).
	MaxBatch int

	// MaxWait caps the timeout a long-poll wait may ask for; a longer one
	// is refused with 400. 0 means DefaultMaxWait (55 s).
	MaxWait time.Duration

	// Timeout bounds the Redis calls of one request that is not held open
	// (everything but waits and event streams). 0 means DefaultTimeout
	// (10 s).
	Timeout time.Duration

	// MaxHeld caps the waits and event streams held open at once over all
	// clients, and MaxHeldPerClient those of one client, by remote IP
	// address (behind a reverse proxy, every user is the proxy's one
	// client). One beyond either cap is refused with 503 and Retry-After.
	// 0 means DefaultMaxHeld (10,000) and DefaultMaxHeldPerClient (1,000).
	// A held request holds no Redis connection: waits share one pub/sub
	// connection per namespace and streams poll.
	MaxHeld, MaxHeldPerClient int

	// MaxHeldSetting and MaxHeldPerClientSetting name, in a refusal's
	// detail, what raises each cap: a server gives its flags. Empty means
	// the names of the options above.
	MaxHeldSetting, MaxHeldPerClientSetting string

	// StreamWriteTimeout bounds each write of an event stream, so a client
	// that stops reading is cut off; it replaces the server's WriteTimeout,
	// which a stream's whole life would exceed. 0 means
	// DefaultStreamWriteTimeout (10 s).
	StreamWriteTimeout time.Duration

	// StreamPoll is how often an event stream reads the fire streams: the
	// most a fire waits before it is sent. 0 means DefaultStreamPoll
	// (250 ms).
	StreamPoll time.Duration

	// MaxNamespaces bounds the namespaces kept open (each a queue.Queue,
	// with a pub/sub connection while someone waits in it). The least
	// recently used idle one is closed to make room. 0 means
	// DefaultMaxNamespaces (1000).
	MaxNamespaces int

	// RetryAfter is the Retry-After of a 503 caused by Redis (unreachable,
	// out of memory, a Cluster slot migrating). 0 means DefaultRetryAfter
	// (2 s).
	RetryAfter time.Duration

	// EndpointAllow admits endpoint URLs whose host is an address literal
	// in these ranges (queue.PutEndpointOptions.Allow), though loopback,
	// private or otherwise reserved. Nil admits none: such an endpoint is
	// refused with 422 invalid-endpoint. The dispatcher's SSRF guard has
	// its own allow list, checked at every connection.
	EndpointAllow []netip.Prefix

	// EndpointAllowSetting names, in the refusal of a private address, what
	// admits one for this API's operator: a server gives its flag, which
	// sets EndpointAllow. Empty means "api.Options.EndpointAllow".
	EndpointAllowSetting string
	// Authorize, if not nil, is asked before every route's handler runs,
	// after the router matched the request, with the right the route needs
	// on the namespace the router read ({ns}, unescaped); see Right and
	// Routes. When it returns false the handler does not run: Authorize has
	// written the refusal. Nil runs every request: the Handler then relies
	// on whatever is in front of it, which must not decide rights from the
	// path itself (a path has many spellings, and only the router's reading
	// counts). timerworker gives apiserver.Authorize.
	Authorize Authorizer
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Client == nil {
		return o, fmt.Errorf("api: %w: set Options.Client to a client from redis.NewClient, redis.NewUniversalClient or similar", queue.ErrNilClient)
	}
	o.Queue.CoalesceSchedules = !o.NoCoalesce
	o.Queue.TimerURLAllow = o.EndpointAllow
	bad := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("api: %w: "+format, append([]any{queue.ErrInvalidOptions}, args...)...)
	}
	o.Queue.Namespace, o.Queue.Shards = "", 0
	q, err := queue.New(o.Client, o.Queue)
	if err != nil {
		return bad("Options.Queue: %v", err)
	}
	// Every namespace's queue has the template's limits.
	o.Queue.MaxPayloadBytes = q.Options().MaxPayloadBytes
	_ = q.Close()
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case o.MaxBodyBytes == 0:
		o.MaxBodyBytes = DefaultMaxBodyBytes
	case o.MaxBodyBytes < 0:
		return bad("MaxBodyBytes %d is negative; use 0 for the 8 MiB default", o.MaxBodyBytes)
	}
	switch {
	case o.MaxBatch == 0:
		o.MaxBatch = DefaultMaxBatch
	case o.MaxBatch < 0 || o.MaxBatch > MaxBatchLimit:
		return bad("MaxBatch %d is outside 1..%d; use 0 for the default of %d", o.MaxBatch, MaxBatchLimit, DefaultMaxBatch)
	}
	for _, err := range []error{
		defaulted("MaxWait", &o.MaxWait, DefaultMaxWait),
		defaulted("Timeout", &o.Timeout, DefaultTimeout),
		defaulted("StreamWriteTimeout", &o.StreamWriteTimeout, DefaultStreamWriteTimeout),
		defaulted("StreamPoll", &o.StreamPoll, DefaultStreamPoll),
		defaulted("RetryAfter", &o.RetryAfter, DefaultRetryAfter),
		defaulted("MaxHeld", &o.MaxHeld, DefaultMaxHeld),
		defaulted("MaxHeldPerClient", &o.MaxHeldPerClient, DefaultMaxHeldPerClient),
		defaulted("MaxNamespaces", &o.MaxNamespaces, DefaultMaxNamespaces),
	} {
		if err != nil {
			return bad("%v", err)
		}
	}
	o.MaxHeldSetting = cmp.Or(o.MaxHeldSetting, "api.Options.MaxHeld")
	o.MaxHeldPerClientSetting = cmp.Or(o.MaxHeldPerClientSetting, "api.Options.MaxHeldPerClient")
	o.EndpointAllowSetting = cmp.Or(o.EndpointAllowSetting, "api.Options.EndpointAllow")
	return o, nil
}

// defaulted sets the option name at v to def when it is 0, and refuses it
// negative.
func defaulted[T int | time.Duration](name string, v *T, def T) error {
	if *v < 0 {
		return fmt.Errorf("%s %v is negative; use 0 for the default of %v", name, *v, def)
	}
	*v = cmp.Or(*v, def)
	return nil
}

// Handler serves the HTTP API. It implements http.Handler, so it can be
// mounted in an http.ServeMux, at the root: every route starts with /v1/.
// It does not authenticate; it asks Options.Authorize, once the router
// matched a request, whether the request may have the right its route
// needs (see Right, and docs/api.md, "Rights").
//
// A Handler keeps no state between requests but open namespaces, so any
// number of replicas may serve one Redis. Close it when done.
type Handler struct {
	opts Options
	mux  *http.ServeMux
	ns   *nsCache
	held *httpstream.Limiter
	log  *slog.Logger

	// table is every route with its right, as registered (route).
	table []Route
}

//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the API's OpenAPI 3.1 document, as served at
// GET /v1/openapi.json. The caller may not modify it.
func OpenAPI() []byte { return openAPIDocument }

// New returns a Handler for opts. It validates opts but does not contact
// Redis.
func New(opts Options) (*Handler, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	held, err := httpstream.NewLimiter(httpstream.Limits{
		What: "waits and event streams", Total: o.MaxHeld, PerClient: o.MaxHeldPerClient,
		TotalSetting: o.MaxHeldSetting, PerClientSetting: o.MaxHeldPerClientSetting, RetryAfter: o.RetryAfter,
	})
	if err != nil {
		return nil, fmt.Errorf("api: %w: %v", queue.ErrInvalidOptions, err)
	}
	h := &Handler{opts: o, mux: http.NewServeMux(), held: held, log: o.Logger}
	h.ns = newNSCache(o.Client, o.Queue, o.MaxNamespaces)
	h.routes()
	return h, nil
}

// routes registers every route with the right it needs (route), which is
// checked after the mux matched, on the {ns} the mux read: the route that
// runs is the route whose right was checked, so no spelling of a path
// (%65ndpoints, //, /./, %2F) can reach a handler under another route's
// right. GET and HEAD change nothing and need "read"; the other methods
// need "write", but for those of the admin: creating a namespace, and
// changing its endpoints (where fires are delivered, signed with which
// secrets) and its delivery policy (whether timers may name URLs).
// Routes outside /v1/namespaces/{ns} need their right on every namespace
// (AllNamespaces); the contract is public; a request no route matches
// needs any known token, so that a caller without one gets 401 rather
// than learning which paths exist.
func (h *Handler) routes() {
	h.route("GET /v1/openapi.json", RightPublic, h.openAPI)

	h.route("PUT /v1/namespaces/{ns}", RightAdmin, exec(h, h.createNamespace))
	h.route("GET /v1/namespaces/{ns}", RightRead, exec(h, getNamespace))

	h.route("POST /v1/namespaces/{ns}/timers", RightWrite, exec(h, createTimer))
	h.route("GET /v1/namespaces/{ns}/timers", RightRead, exec(h, listTimers))
	h.route("POST /v1/namespaces/{ns}/timers/batch", RightWrite, exec(h, createTimers))
	h.route("POST /v1/namespaces/{ns}/timers/cancel", RightWrite, exec(h, cancelMatching)) // canceljobs.go
	h.route("GET /v1/namespaces/{ns}/cancel-jobs", RightRead, exec(h, listCancelJobs))
	h.route("GET /v1/namespaces/{ns}/cancel-jobs/{id}", RightRead, exec(h, getCancelJob))
	h.route("GET /v1/namespaces/{ns}/timers/{id}", RightRead, exec(h, getTimer))
	h.route("POST /v1/namespaces/{ns}/timers/{id}/cancel", RightWrite, exec(h, timerCall((*queue.Queue).Cancel)))
	h.route("POST /v1/namespaces/{ns}/timers/{id}/reschedule", RightWrite, exec(h, rescheduleTimer))
	h.route("POST /v1/namespaces/{ns}/timers/{id}/fire", RightWrite, exec(h, timerCall((*queue.Queue).FireNow)))
	h.route("GET /v1/namespaces/{ns}/timers/{id}/wait", RightRead, exec(h, h.waitTimer))
	h.route("POST /v1/namespaces/{ns}/debounce/{key}", RightWrite, exec(h, debounceKey))
	h.route("GET /v1/namespaces/{ns}/owners/{owner}", RightRead, exec(h, getOwner)) // owners.go
	h.route("POST /v1/namespaces/{ns}/owners/{owner}/epoch", RightWrite, exec(h, bumpEpoch))

	h.route("GET /v1/namespaces/{ns}/fires", RightRead, h.streamFires)

	h.route("POST /v1/namespaces/{ns}/schedules", RightWrite, exec(h, createSchedule))
	h.route("GET /v1/namespaces/{ns}/schedules", RightRead, exec(h, listSchedules))
	h.route("GET /v1/namespaces/{ns}/schedules/{id}", RightRead, exec(h, scheduleCall(queue.RecurringTimers.Get)))
	h.route("PUT /v1/namespaces/{ns}/schedules/{id}", RightWrite, exec(h, updateSchedule))
	h.route("DELETE /v1/namespaces/{ns}/schedules/{id}", RightWrite, exec(h, deleteSchedule))
	h.route("POST /v1/namespaces/{ns}/schedules/{id}/pause", RightWrite, exec(h, scheduleCall(queue.RecurringTimers.Pause)))
	h.route("POST /v1/namespaces/{ns}/schedules/{id}/resume", RightWrite, exec(h, scheduleCall(queue.RecurringTimers.Resume)))

	h.route("GET /v1/namespaces/{ns}/endpoints", RightRead, exec(h, listEndpoints))
	h.route("GET /v1/namespaces/{ns}/endpoints/{name}", RightRead, exec(h, endpointCall(queue.Endpoints.Get)))
	h.route("PUT /v1/namespaces/{ns}/endpoints/{name}", RightAdmin, exec(h, putEndpoint))
	h.route("DELETE /v1/namespaces/{ns}/endpoints/{name}", RightAdmin, exec(h, deleteEndpoint))
	h.route("POST /v1/namespaces/{ns}/endpoints/{name}/enable", RightAdmin, exec(h, endpointCall(setEnabled(true))))
	h.route("POST /v1/namespaces/{ns}/endpoints/{name}/disable", RightAdmin, exec(h, endpointCall(setEnabled(false))))

	h.route("GET /v1/namespaces/{ns}/flow-policies", RightRead, exec(h, listFlowPolicies))
	h.route("PUT /v1/namespaces/{ns}/flow-policies", RightWrite, exec(h, putFlowPolicy))
	h.route("DELETE /v1/namespaces/{ns}/flow-policies", RightWrite, exec(h, deleteFlowPolicy))
	h.route("GET /v1/namespaces/{ns}/groups/{group}/flows", RightRead, exec(h, groupFlows)) // flow.go

	h.route("GET /v1/namespaces/{ns}/delivery-policy", RightRead, exec(h, getDeliveryPolicy))
	h.route("PUT /v1/namespaces/{ns}/delivery-policy", RightAdmin, exec(h, putDeliveryPolicy))
	h.route("GET /v1/namespaces/{ns}/quotas", RightRead, exec(h, h.getQuotas)) // quotas.go
	h.route("PUT /v1/namespaces/{ns}/quotas", RightAdmin, exec(h, h.putQuotas))

	h.consumeRoutes() // consume.go: /v1/namespaces/{ns}/groups/{group}/...

	h.route("/", RightAnyToken, h.fallback)
}

// probeMethods are the methods fallback tries, to fill Allow.
var probeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}

// fallback answers a request no route matched: 405 with Allow when the
// path has routes for other methods, 404 otherwise, both as problems.
func (h *Handler) fallback(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range probeMethods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pat := h.mux.Handler(probe); pat != "/" && pat != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		if slices.Contains(allow, http.MethodGet) {
			allow = append(allow, http.MethodHead)
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		WriteProblem(w, problem(http.StatusMethodNotAllowed, SlugMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.EscapedPath(), strings.Join(allow, ", "))))
		return
	}
	WriteProblem(w, problem(http.StatusNotFound, SlugNotFound,
		fmt.Sprintf("no route %s %s; /v1/openapi.json lists the routes", r.Method, r.URL.EscapedPath())))
}

// ServeHTTP dispatches r. It passes r itself to the mux, not a copy, so
// that a middleware around the Handler finds the matched route in
// r.Pattern once ServeHTTP returns; and every Redis call runs under
// r.Context(), so a trace the middleware extracted continues into the
// queue's spans.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// Close closes the namespaces the Handler opened. Requests still running
// may fail with 503.
func (h *Handler) Close() error {
	h.ns.close()
	return nil
}

func (h *Handler) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPIDocument)
}

// ctx is the context of an ordinary request's Redis calls: r's, so its
// trace continues, bounded by Options.Timeout.
func (h *Handler) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.opts.Timeout)
}

var errClosed = errors.New("api: the handler is closed")
