package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/timerq/timerq/api"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// TestOuterMiddlewareSeesRouteAndTrace plays the server's middleware: it
// puts a span into the request's context before the Handler and reads
// r.Pattern after it. The schedule span must be that span's child, and
// the pattern the route's, so metrics can be labelled by route.
func TestOuterMiddlewareSeesRouteAndTrace(t *testing.T) {
	_, rdb := redistest.Mini(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	h, err := api.New(api.Options{Client: rdb, Queue: queue.Options{TracerProvider: tp}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var mu sync.Mutex
	var patterns []string
	var callers []trace.SpanContext
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tp.Tracer("caller").Start(r.Context(), "caller")
		defer span.End()
		r = r.WithContext(ctx)
		h.ServeHTTP(w, r)
		mu.Lock()
		defer mu.Unlock()
		patterns = append(patterns, r.Pattern)
		callers = append(callers, span.SpanContext())
	}))
	defer srv.Close()

	res, err := http.Post(srv.URL+"/v1/namespaces/traced/timers", "application/json", strings.NewReader(`{"id": "a", "in": "1h"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create = %d", res.StatusCode)
	}
	res, err = http.Get(srv.URL + "/v1/nothing/here")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()

	mu.Lock()
	defer mu.Unlock()
	if strings.Join(patterns, "|") != "POST /v1/namespaces/{ns}/timers|/" {
		t.Fatalf("the middleware saw patterns %q", patterns)
	}
	caller := callers[0]
	var found bool
	for _, s := range exp.GetSpans() {
		if s.Name == "timerq.schedule" {
			found = true
			if s.Parent.SpanID() != caller.SpanID() || s.SpanContext.TraceID() != caller.TraceID() {
				t.Fatalf("the schedule span's parent is %v, want the caller's span %v", s.Parent, caller)
			}
		}
	}
	if !found {
		t.Fatalf("no timerq.schedule span among %d", len(exp.GetSpans()))
	}
}
