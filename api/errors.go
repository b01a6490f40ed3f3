package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/internal/aclright"
	"github.com/timerq/timerq/internal/httpstream"
	"github.com/timerq/timerq/queue"
	"github.com/timerq/timerq/schedule"
)

// The slugs of Problem.Type (after ProblemTypePrefix). They are stable:
// clients switch on them. docs/api.md lists each with its status.
const (
	SlugInvalidRequest       = "invalid-request"        // 400: malformed JSON, an unknown field, a wrong type, a bad parameter
	SlugUnsupportedMediaType = "unsupported-media-type" // 415: a body that is not JSON
	SlugBodyTooLarge         = "body-too-large"         // 413: a body over Options.MaxBodyBytes
	SlugBatchTooLarge        = "batch-too-large"        // 413: more timers than Options.MaxBatch
	SlugInvalidNamespace     = "invalid-namespace"      // 400: queue.ErrInvalidNamespace
	SlugInvalidID            = "invalid-id"             // 422: queue.ErrInvalidID
	SlugOccurrenceID         = "occurrence-id"          // 422: queue.ErrOccurrenceID
	SlugInvalidDue           = "invalid-due"            // 422: queue.ErrInvalidDue, and a time the API cannot read
	SlugPayloadTooLarge      = "payload-too-large"      // 422: queue.ErrPayloadTooLarge
	SlugInvalidArgument      = "invalid-argument"       // 422: queue.ErrInvalidOptions, queue.ErrInvalidFilter
	SlugInvalidSchedule      = "invalid-schedule"       // 422: schedule.ErrInvalidSchedule
	SlugInvalidEndpoint      = "invalid-endpoint"       // 422: queue.ErrInvalidEndpoint (a bad URL, address, header or secret)
	SlugUnknownEndpoint      = "unknown-endpoint"       // 422: a timer delivers to an endpoint the namespace does not have
	SlugTimerURLsOff         = "timer-urls-off"         // 422: queue.ErrTimerURLsOff: a timer URL, and the delivery policy does not allow them
	SlugQuotaExceeded        = "quota-exceeded"         // 403: queue.ErrQuotaExceeded: the namespace's quota refused the request, nothing written
	SlugEndpointNotFound     = "endpoint-not-found"     // 404: queue.ErrEndpointNotFound
	SlugNotFound             = "not-found"              // 404: queue.ErrNotFound, queue.ErrCancelJobNotFound, and an unknown route
	SlugMethodNotAllowed     = "method-not-allowed"     // 405: a route that takes other methods
	SlugScheduleNotFound     = "schedule-not-found"     // 404: queue.ErrRecurringNotFound
	SlugDeadLetterNotFound   = "dead-letter-not-found"  // 404: queue.ErrDeadLetterNotFound
	SlugAlreadyFired         = "already-fired"          // 409: queue.ErrAlreadyFired
	SlugCancelled            = "cancelled"              // 409: queue.ErrCancelled
	SlugShardMismatch        = "shard-mismatch"         // 409: queue.ErrShardMismatch
	SlugStaleEpoch           = "stale-epoch"            // 409: queue.ErrStaleEpoch: a timer's epoch is no longer its owner's
	SlugPermissionDenied     = "permission-denied"      // 502: queue.ErrPermission (Redis ACL)
	SlugOutOfMemory          = "out-of-memory"          // 503: queue.ErrOutOfMemory
	SlugSlotMigrating        = "slot-migrating"         // 503: queue.ErrSlotMigrating
	SlugRedisUnavailable     = "redis-unavailable"      // 503: Redis unreachable or not answering
	SlugTooManyHeld          = "too-many-held"          // 503: the caps on open waits and streams
	SlugUnavailable          = "unavailable"            // 503: queue.ErrClosed, the handler closed
	SlugWrongType            = "wrong-type"             // 500: queue.ErrWrongType
	SlugMalformedRecord      = "malformed-record"       // 500: queue.ErrMalformedRecord
	SlugRedisError           = "redis-error"            // 502: another error reply from Redis
	SlugInternal             = "internal"               // 500: anything else
)

// inputError is a request the handler refused before calling the queue.
type inputError struct {
	status int
	slug   string
	detail string
	field  string // JSON pointer
}

func (e *inputError) Error() string { return e.detail }

func badRequest(field, format string, args ...any) error {
	return &inputError{http.StatusBadRequest, SlugInvalidRequest, fmt.Sprintf(format, args...), field}
}

func invalid(slug, field, format string, args ...any) error {
	return &inputError{http.StatusUnprocessableEntity, slug, fmt.Sprintf(format, args...), field}
}

// fieldError names the field a queue error is about, for a batch item.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// fail answers err as a problem: its status, stable type and detail, and
// Retry-After where a retry can help.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	p, retry := h.problemOf(err, r.PathValue("ns"))
	p.Instance = r.URL.EscapedPath()
	if retry {
		w.Header().Set("Retry-After", strconv.Itoa(int((h.opts.RetryAfter+999_999_999)/1e9)))
	}
	if p.Status >= 500 {
		h.log.Warn("timerq api: request failed", "method", r.Method, "path", p.Instance, "status", p.Status, "err", err)
	}
	WriteProblem(w, p)
}

var titles = map[string]string{
	SlugInvalidRequest:       "Invalid request",
	SlugUnsupportedMediaType: "Unsupported media type",
	SlugBodyTooLarge:         "Request body too large",
	SlugBatchTooLarge:        "Batch too large",
	SlugInvalidNamespace:     "Invalid namespace",
	SlugInvalidID:            "Invalid timer ID",
	SlugOccurrenceID:         "Reserved occurrence ID",
	SlugInvalidDue:           "Invalid due time",
	SlugPayloadTooLarge:      "Payload too large",
	SlugInvalidArgument:      "Invalid argument",
	SlugInvalidSchedule:      "Invalid schedule",
	SlugInvalidEndpoint:      "Invalid endpoint",
	SlugUnknownEndpoint:      "Unknown endpoint",
	SlugTimerURLsOff:         "Timer URLs not allowed",
	SlugQuotaExceeded:        "Namespace quota exceeded",
	SlugEndpointNotFound:     "Endpoint not found",
	SlugNotFound:             "Not found",
	SlugMethodNotAllowed:     "Method not allowed",
	SlugScheduleNotFound:     "Schedule not found",
	SlugDeadLetterNotFound:   "Dead letter not found",
	SlugAlreadyFired:         "Timer already fired",
	SlugCancelled:            "Timer cancelled",
	SlugShardMismatch:        "Shard count mismatch",
	SlugStaleEpoch:           "Stale owner epoch",
	SlugPermissionDenied:     "Redis refused a right",
	SlugOutOfMemory:          "Redis out of memory",
	SlugSlotMigrating:        "Cluster slot migrating",
	SlugRedisUnavailable:     "Redis unavailable",
	SlugTooManyHeld:          "Too many waits and streams",
	SlugUnavailable:          "Unavailable",
	SlugWrongType:            "Namespace key of the wrong type",
	SlugMalformedRecord:      "Malformed timer record",
	SlugRedisError:           "Redis error",
	SlugInternal:             "Internal error",
}

func problem(status int, slug, detail string) Problem {
	return Problem{Type: ProblemTypePrefix + slug, Title: titles[slug], Status: status, Detail: detail}
}

// problemRule is the problem of the errors is matches. detail makes the
// problem's detail from the queue's message (msg, without "timerq: ");
// nil keeps msg as it is.
type problemRule struct {
	is     func(error) bool
	status int
	slug   string
	detail func(h *Handler, msg, ns string) string
}

// isAny matches an error that is any of targets (errors.Is).
func isAny(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
}

// plus adds hint, what to do, to the queue's message.
func plus(hint string) func(*Handler, string, string) string {
	return func(_ *Handler, msg, _ string) string { return msg + hint }
}

func allowHint(h *Handler, msg, _ string) string { return h.allowHint(msg) }

// problemRules maps errors to problems, first match first: an error that
// wraps another (ErrOccurrenceID wraps ErrInvalidID) comes before it. The
// queue's message carries the hint for the 5xx; the API adds none.
var problemRules = []problemRule{
	{isAny(queue.ErrQuotaExceeded), http.StatusForbidden, SlugQuotaExceeded, nil},
	{isAny(queue.ErrNotFound), http.StatusNotFound, SlugNotFound, plus("; check the ID and the namespace, or create the timer")},
	{isAny(queue.ErrEndpointNotFound), http.StatusNotFound, SlugEndpointNotFound, func(_ *Handler, msg, ns string) string {
		return cause(msg) + "; check the name, or list the endpoints with GET /v1/namespaces/" + ns + "/endpoints"
	}},
	{isAny(queue.ErrInvalidEndpoint), http.StatusUnprocessableEntity, SlugInvalidEndpoint, allowHint},
	{isAny(queue.ErrTimerURLsOff), http.StatusUnprocessableEntity, SlugTimerURLsOff, nil},
	{isAny(queue.ErrRecurringNotFound), http.StatusNotFound, SlugScheduleNotFound, func(_ *Handler, msg, ns string) string {
		return cause(msg) + "; check the ID, or list the schedules with GET /v1/namespaces/" + ns + "/schedules"
	}},
	{isAny(queue.ErrDeadLetterNotFound), http.StatusNotFound, SlugDeadLetterNotFound, nil},
	{isAny(queue.ErrCancelJobNotFound), http.StatusNotFound, SlugNotFound, plus("; list the jobs with GET .../cancel-jobs")},
	{isAny(queue.ErrInvalidFilter), http.StatusUnprocessableEntity, SlugInvalidArgument, nil},
	{isAny(queue.ErrAlreadyFired), http.StatusConflict, SlugAlreadyFired, plus("; a fired timer cannot change: create a timer with another ID")},
	{isAny(queue.ErrCancelled), http.StatusConflict, SlugCancelled, plus("; a cancelled timer cannot change: create a timer with another ID")},
	{isAny(queue.ErrShardMismatch), http.StatusConflict, SlugShardMismatch, nil},
	// The queue's hint says to stop, or to read the owner again: the API
	// names the route that reads it.
	{isAny(queue.ErrStaleEpoch), http.StatusConflict, SlugStaleEpoch, func(_ *Handler, msg, ns string) string {
		return msg + "; GET /v1/namespaces/" + ns + "/owners/{owner} reads the owner's epoch"
	}},
	{isAny(queue.ErrDebounceKeyIsSchedule, queue.ErrScheduleIDIsDebounceKey), http.StatusUnprocessableEntity, SlugInvalidID, nil},
	{isAny(queue.ErrOccurrenceID), http.StatusUnprocessableEntity, SlugOccurrenceID, nil},
	{isAny(queue.ErrInvalidID), http.StatusUnprocessableEntity, SlugInvalidID, plus("; an ID is 1-256 bytes of UTF-8 without control characters")},
	{isAny(queue.ErrInvalidNamespace), http.StatusBadRequest, SlugInvalidNamespace, plus("; a namespace is 1-64 characters of [A-Za-z0-9_.-]")},
	{isAny(queue.ErrInvalidDue), http.StatusUnprocessableEntity, SlugInvalidDue, plus("; use a time from 1970-01-01 to 9999-12-31")},
	// The queue's hint names its Go option; the API's client cannot raise it.
	{isAny(queue.ErrPayloadTooLarge), http.StatusUnprocessableEntity, SlugPayloadTooLarge, func(_ *Handler, msg, _ string) string {
		return cause(msg) + "; keep large data elsewhere and put a reference in the payload"
	}},
	{isAny(schedule.ErrInvalidSchedule), http.StatusUnprocessableEntity, SlugInvalidSchedule, nil},
	{isAny(queue.ErrInvalidOptions), http.StatusUnprocessableEntity, SlugInvalidArgument, allowHint},
	// The queue's hint names the rule that grants the right.
	{func(err error) bool {
		return errors.Is(err, queue.ErrPermission) || redis.HasErrorPrefix(err, "NOPERM")
	},
		http.StatusBadGateway, SlugPermissionDenied, nil},
	{isAny(queue.ErrOutOfMemory), http.StatusServiceUnavailable, SlugOutOfMemory, func(_ *Handler, msg, _ string) string { return goNames.Replace(msg) }},
	{isAny(queue.ErrSlotMigrating), http.StatusServiceUnavailable, SlugSlotMigrating, nil},
	{isAny(queue.ErrWrongType), http.StatusInternalServerError, SlugWrongType, nil},
	{isAny(queue.ErrMalformedRecord), http.StatusInternalServerError, SlugMalformedRecord,
		plus("; something other than timerq wrote that timer's record: delete it, or use another namespace")},
	{isAny(queue.ErrClosed, errClosed), http.StatusServiceUnavailable, SlugUnavailable, plus("; the server is shutting down: retry on another replica")},
	{isAny(context.DeadlineExceeded), http.StatusServiceUnavailable, SlugRedisUnavailable, func(h *Handler, msg, _ string) string {
		return fmt.Sprintf("Redis did not answer within %v: %s; retry, and check that Redis is not overloaded (SLOWLOG GET)", h.opts.Timeout, msg)
	}},
	{queue.Transient, http.StatusServiceUnavailable, SlugRedisUnavailable, func(_ *Handler, msg, _ string) string {
		return "cannot reach Redis: " + msg + "; retry later"
	}},
	{func(err error) bool { var rerr redis.Error; return errors.As(err, &rerr) }, http.StatusBadGateway, SlugRedisError,
		func(_ *Handler, msg, _ string) string { return "Redis refused the command: " + msg }},
	{func(error) bool { return true }, http.StatusInternalServerError, SlugInternal, nil},
}

// problemOf maps err to a problem, and says whether to send Retry-After.
// The detail is the queue's message without its "timerq: " prefix: it says
// what went wrong and, where the queue knows, what to do.
func (h *Handler) problemOf(err error, ns string) (Problem, bool) {
	var in *inputError
	if errors.As(err, &in) {
		p := problem(in.status, in.slug, in.detail)
		p.Field = in.field
		return p, false
	}
	var capErr *httpstream.CapError
	if errors.As(err, &capErr) {
		return problem(http.StatusServiceUnavailable, SlugTooManyHeld, capErr.Error()), true
	}
	rule := problemRules[0]
	for _, rule = range problemRules {
		if rule.is(err) {
			break
		}
	}
	detail := strings.TrimPrefix(err.Error(), "timerq: ")
	if rule.detail != nil {
		detail = rule.detail(h, detail, ns)
	}
	p := problem(rule.status, rule.slug, detail)
	var fe *fieldError
	if errors.As(err, &fe) {
		p.Field = fe.field
	}
	var qe *queue.QuotaError
	switch rule.slug {
	case SlugQuotaExceeded:
		if errors.As(err, &qe) {
			p.Quota = qe.Quota
		}
		p.Namespace = ns
	case SlugPermissionDenied:
		p.Right, p.Namespace = aclright.Missing(err.Error(), ns), ns
	}
	return p, p.Status == http.StatusServiceUnavailable
}

// cause is a queue error's message without the hint after its first
// "; ", which names the Go call to make: the API gives its own route.
func cause(msg string) string {
	what, _, _ := strings.Cut(msg, "; ")
	return what
}

// goNames names, for the API's operator, the library's Go settings that
// the queue's hints name.
var goNames = strings.NewReplacer("lower Options.Retention", "shorten timerworker's --retention")

// allowEntry is the delivery engine's hint for a cloud metadata address.
var allowEntry = regexp.MustCompile(`only an Allow entry of exactly (\S+) opens it`)

// allowHint rewrites the delivery engine's hint for a refused private
// address (deliver.Guard.CheckAddr, deliver.ValidateURL), which names its
// Go field Guard.Allow, to name what admits the address for this API's
// operator: Options.EndpointAllowSetting (a server's flag). The library
// keeps naming Go calls; the API knows its audience.
func (h *Handler) allowHint(msg string) string {
	s := h.opts.EndpointAllowSetting
	msg = strings.NewReplacer("Guard.Allow (timerworker's delivery allow list)", s, "Guard.Allow", s).Replace(msg)
	return allowEntry.ReplaceAllString(msg, "only an entry of exactly $1 in "+s+" opens it")
}
