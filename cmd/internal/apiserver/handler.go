package apiserver

import (
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
	"github.com/timerq/timerq/cmd/internal/cliconf"
	"github.com/timerq/timerq/internal/apitoken"
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
// the handler runs (401, 403, 429) is still counted under its route.
type router interface {
	Handler(r *http.Request) (h http.Handler, pattern string)
}

// ServeHTTP serves one request: trace context, then auth, then the rate
// limit, then the handler, and metrics around it all.
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
	route = s.serve(rec, r)
}

// serve authorizes r and runs the handler, and returns the route r matched
// (its ServeMux pattern, "" for none).
func (s *Server) serve(w http.ResponseWriter, r *http.Request) string {
	set := s.tokens.Load()
	if set == nil {
		// No tokens: Listen allowed it on loopback only. Refuse other host
		// names, against DNS rebinding.
		if !cliconf.IsLoopbackHost(r.Host) {
			api.WriteProblem(w, api.Problem{Type: ProblemNotLoopback, Title: "Misdirected Request", Status: http.StatusMisdirectedRequest,
				Detail: "this API has no tokens, so it answers only to a loopback address or localhost; " +
					"give timerworker --" + FlagTokensFile + " to reach it by another name"})
			return s.routeOf(r)
		}
		return s.handle(w, r)
	}
	need := apitoken.Required(r)
	if need.Public {
		return s.handle(w, r)
	}
	presented, ok := bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="timerq"`)
		api.WriteProblem(w, api.Problem{Type: ProblemUnauthorized, Title: "Unauthorized", Status: http.StatusUnauthorized,
			Detail: "this request needs a token: send it as \"Authorization: Bearer <token>\"; an operator mints one with 'timerctl api-token create'"})
		return s.routeOf(r)
	}
	tok := set.Lookup(presented)
	if tok == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="timerq", error="invalid_token"`)
		api.WriteProblem(w, api.Problem{Type: ProblemUnauthorized, Title: "Unauthorized", Status: http.StatusUnauthorized,
			Detail: "the bearer token is not one this server knows (mistyped, revoked, or minted for another deployment); ask the operator for a token"})
		return s.routeOf(r)
	}
	if !tok.Allows(need.Right, need.Namespace) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="timerq", error="insufficient_scope"`)
		what := fmt.Sprintf("namespace %q", need.Namespace)
		if need.Namespace == apitoken.AllNamespaces {
			what = "every namespace (the request names none, so its token needs the pattern *)"
		}
		api.WriteProblem(w, api.Problem{Type: ProblemForbidden, Title: "Forbidden", Status: http.StatusForbidden,
			Right: string(need.Right), Namespace: need.Namespace,
			Detail: fmt.Sprintf("token %s lacks the %s right on %s; ask the operator for a token with it (timerctl api-token create --rights %s)",
				tok.Name, need.Right, what, need.Right)})
		return s.routeOf(r)
	}
	if wait, ok := s.take(tok); !ok {
		secs := max(1, int(math.Ceil(wait.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		api.WriteProblem(w, api.Problem{Type: ProblemRateLimited, Title: "Too Many Requests", Status: http.StatusTooManyRequests,
			Detail: fmt.Sprintf("token %s is over its limit of %s requests per second; retry after %d s, or ask the operator to raise its rps=",
				tok.Name, strconv.FormatFloat(s.rate(tok), 'f', -1, 64), secs)})
		return s.routeOf(r)
	}
	return s.handle(w, r)
}

// handle runs the handler and returns the pattern it matched. ServeMux
// sets Pattern on the very request it is given, which is r.
func (s *Server) handle(w http.ResponseWriter, r *http.Request) string {
	s.inner.ServeHTTP(w, r)
	return r.Pattern
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

// bearer returns the token of an "Authorization: Bearer" header. The
// scheme is case-insensitive (RFC 9110 §11.1).
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
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
