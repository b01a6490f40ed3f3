package apiserver

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/api/apitoken"
	"github.com/timerq/timerq/cmd/internal/cliconf"
)

// Problem types of the refusals the server makes before the API's handler
// runs.
const (
	ProblemUnauthorized = api.ProblemTypePrefix + "unauthorized"
	ProblemForbidden    = api.ProblemTypePrefix + "forbidden"
	ProblemRateLimited  = api.ProblemTypePrefix + "rate-limited"
	ProblemNotLoopback  = api.ProblemTypePrefix + "loopback-only"
)

// tracerName is the instrumentation scope of the server spans.
const tracerName = "github.com/timerq/timerq/cmd/internal/apiserver"

// router is what http.ServeMux offers besides ServeHTTP: the pattern a
// request would match. When the handler has it, a request refused before
// the handler runs (421) is still counted under its route; the refusals
// of Authorize happen inside the handler, after its router matched.
type router interface {
	Handler(r *http.Request) (h http.Handler, pattern string)
}

// ServeHTTP serves one request: trace context, then the handler, whose
// routes ask Authorize for their right (token, then right, then the rate
// limit), and metrics around it all.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.enter()
	defer s.leave()
	start := time.Now()
	method := methodLabel(r.Method)
	s.m.active(method).Inc()
	defer s.m.active(method).Dec()

	// The caller's traceparent, so that the spans the handler makes
	// (timerq.schedule) join the caller's trace. W3C Trace Context always,
	// whatever global propagator the process has (timerworker sets none).
	ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	var span trace.Span
	if s.tracer != nil {
		ctx, span = s.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", method), attribute.String("url.path", r.URL.Path)))
	}
	// The tokens as they are now, for Authorize, which the handler's
	// routes call once its router matched. In the context from here on, so
	// that the handler's mux sets r.Pattern on this very r.
	set := s.tokens.Load()
	ctx = context.WithValue(ctx, authKey{}, &auth{s: s, set: set})
	r = r.WithContext(ctx)
	rec := &recorder{ResponseWriter: w}
	route := ""
	// Deferred, so that a handler that panics (http.ErrAbortHandler cuts a
	// stream that way) is still counted, and its span ended.
	defer func() {
		status := rec.code()
		if p := recover(); p != nil {
			status = http.StatusInternalServerError
			if route == "" {
				route = r.Pattern
			}
			defer panic(p)
		}
		s.m.observe(method, route, status, time.Since(start))
		if span != nil {
			if route != "" {
				span.SetName(method + " " + routePath(route))
				span.SetAttributes(attribute.String("http.route", routePath(route)))
			}
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			span.End()
		}
	}()
	route = s.serve(rec, r, set)
}

// serve runs the handler, and returns the route r matched (its ServeMux
// pattern, "" for none). It decides nothing about rights itself: the
// handler's routes ask Authorize, after the router matched, for the right
// each needs, and r's context holds what Authorize needs (set).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, set *apitoken.Set) string {
	if set == nil && !cliconf.IsLoopbackHost(r.Host) {
		// No tokens: Listen allowed it on loopback only. Refuse other host
		// names, against DNS rebinding.
		api.WriteProblem(w, api.Problem{Type: ProblemNotLoopback, Title: "Misdirected Request", Status: http.StatusMisdirectedRequest,
			Detail: "this API has no tokens, so it answers only to a loopback address or localhost; " +
				"give timerworker --" + FlagTokensFile + " to reach it by another name"})
		return s.routeOf(r)
	}
	// ServeMux sets Pattern on the very request it is given, which is r.
	s.inner.ServeHTTP(w, r)
	return r.Pattern
}

// authKey keys the request's auth in its context.
type authKey struct{}

// auth is what Authorize needs of the server that serves a request: the
// tokens as they were when the request came in (nil: no tokens, loopback
// only, every request allowed).
type auth struct {
	s   *Server
	set *apitoken.Set
}

// Authorize is the api.Options.Authorize of a handler served by a Server:
// it refuses, as problem+json, a request without a known token (401), one
// whose token lacks need's right on need's namespace (403), and one over
// its token's rate (429), and returns true for the rest. need comes from
// the route the handler's router matched, never from the path. A request
// the Server did not serve is refused with 500: a handler built with
// Authorize must be served by a Server, or nothing would be checked.
func Authorize(w http.ResponseWriter, r *http.Request, need api.Need) bool {
	a, _ := r.Context().Value(authKey{}).(*auth)
	if a == nil {
		api.WriteProblem(w, api.Problem{Type: api.ProblemTypePrefix + api.SlugInternal, Title: "Internal error", Status: http.StatusInternalServerError,
			Detail: "the API handler asked apiserver.Authorize about a request no apiserver.Server served, so no token was checked; serve the handler with apiserver.Listen"})
		return false
	}
	if a.set == nil || need.Right == api.RightPublic {
		return true
	}
	presented, ok := apitoken.Bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="timerq"`)
		api.WriteProblem(w, api.Problem{Type: ProblemUnauthorized, Title: "Unauthorized", Status: http.StatusUnauthorized,
			Detail: "this request needs a token: send it as \"Authorization: Bearer <token>\"; an operator mints one with 'timerctl api-token create'"})
		return false
	}
	tok := a.set.Lookup(presented)
	if tok == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="timerq", error="invalid_token"`)
		api.WriteProblem(w, api.Problem{Type: ProblemUnauthorized, Title: "Unauthorized", Status: http.StatusUnauthorized,
			Detail: "the bearer token is not one this server knows (mistyped, revoked, or minted for another deployment); ask the operator for a token"})
		return false
	}
	if need.Right != api.RightAnyToken && !tok.Allows(need.Right, need.Namespace) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="timerq", error="insufficient_scope"`)
		what := fmt.Sprintf("namespace %q", need.Namespace)
		if need.Namespace == apitoken.AllNamespaces {
			what = "every namespace (the request names none, so its token needs the pattern *)"
		}
		api.WriteProblem(w, api.Problem{Type: ProblemForbidden, Title: "Forbidden", Status: http.StatusForbidden,
			Right: string(need.Right), Namespace: need.Namespace,
			Detail: fmt.Sprintf("token %s lacks the %s right on %s; ask the operator for a token with it (timerctl api-token create --rights %s)",
				tok.Name, need.Right, what, need.Right)})
		return false
	}
	if wait, ok := a.s.take(tok); !ok {
		secs := max(1, int(math.Ceil(wait.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		api.WriteProblem(w, api.Problem{Type: ProblemRateLimited, Title: "Too Many Requests", Status: http.StatusTooManyRequests,
			Detail: fmt.Sprintf("token %s is over its limit of %s requests per second; retry after %d s, or ask the operator to raise its rps=",
				tok.Name, strconv.FormatFloat(a.s.rate(tok), 'f', -1, 64), secs)})
		return false
	}
	return true
}

// routeOf is the pattern r would match, for a request the handler never
// saw; "" when the handler cannot say.
func (s *Server) routeOf(r *http.Request) string {
	if rt, ok := s.inner.(router); ok {
		_, p := rt.Handler(r)
		return p
	}
	return ""
}

// routePath drops the method of a pattern ("GET /v1/x/{id}" → "/v1/x/{id}"):
// http.route is the path template, the method has its own attribute.
func routePath(pattern string) string {
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		return strings.TrimLeft(pattern[i:], " ")
	}
	return pattern
}

// methodLabel is the request's method, or _OTHER for one outside RFC 9110
// and PATCH, so that a client cannot make up label values (OpenTelemetry's
// http.request.method rule).
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace, http.MethodPatch:
		return m
	}
	return "_OTHER"
}

// recorder remembers the status a handler wrote. It unwraps, so that
// http.ResponseController (deadlines, flushing) reaches the connection,
// and it flushes, for handlers that test for http.Flusher.
type recorder struct {
	http.ResponseWriter
	status int
}

func (rw *recorder) WriteHeader(code int) {
	if rw.status == 0 && code >= 200 {
		rw.status = code
	}
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *recorder) Write(p []byte) (int, error) {
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	return rw.ResponseWriter.Write(p)
}

// Flush sends what is buffered.
func (rw *recorder) Flush() {
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	_ = http.NewResponseController(rw.ResponseWriter).Flush()
}

// Unwrap returns the connection's ResponseWriter.
func (rw *recorder) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// code is the status written; a handler that wrote nothing sent 200.
func (rw *recorder) code() int {
	if rw.status == 0 {
		return http.StatusOK
	}
	return rw.status
}
