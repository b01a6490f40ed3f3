package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestServesContractAndProblemsForUnknownRoutes: the document is served
// as it is embedded, and a request that matches no route gets a problem,
// 405 with Allow where the path takes other methods.
func TestServesContractAndProblemsForUnknownRoutes(t *testing.T) {
	_, rdb := redistest.Mini(t)
	b := &redistest.Backend{Name: "mini", Client: rdb}
	e := newEnv(t, b, api.Options{})
	ctx := context.Background()
	r := e.do(ctx, "GET", e.srv.URL+"/v1/openapi.json", nil)
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, api.OpenAPI()) || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("openapi.json = %d %.100s", r.Status, r.Body)
	}
	// These break the document, which has no such operations: send them
	// past the validating client.
	plain := e.srv.Client()
	for _, c := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/nothing", http.StatusNotFound, ""},
		{"PATCH", "/v1/namespaces/x/timers/a", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/v1/namespaces/x", http.StatusMethodNotAllowed, "GET, PUT, HEAD"},
	} {
		req, _ := http.NewRequest(c.method, e.srv.URL+c.path, nil)
		res, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p api.Problem
		err = json.NewDecoder(res.Body).Decode(&p)
		res.Body.Close()
		if err != nil || res.StatusCode != c.status || p.Status != c.status || res.Header.Get("Allow") != c.allow ||
			res.Header.Get("Content-Type") != api.ProblemContentType {
			t.Errorf("%s %s = %d Allow %q %+v (%v)", c.method, c.path, res.StatusCode, res.Header.Get("Allow"), p, err)
		}
	}
}

// TestNewRefusesBadOptions: each refusal wraps queue.ErrInvalidOptions (or
// ErrNilClient) and says what to write instead.
func TestNewRefusesBadOptions(t *testing.T) {
	_, rdb := redistest.Mini(t)
	for _, c := range []struct {
		opts api.Options
		want string
	}{
		{api.Options{}, "set Options.Client"},
		{api.Options{Client: rdb, MaxBatch: 1001}, "MaxBatch 1001 is outside 1..1000"},
		{api.Options{Client: rdb, MaxBodyBytes: -1}, "use 0 for the 8 MiB default"},
		{api.Options{Client: rdb, MaxWait: -time.Second}, "MaxWait -1s is negative"},
		{api.Options{Client: rdb, MaxHeld: -1}, "MaxHeld -1 is negative"},
		{api.Options{Client: rdb, Queue: queue.Options{MaxPayloadBytes: -1}}, "Options.Queue"},
	} {
		_, err := api.New(c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) ||
			!(errors.Is(err, queue.ErrInvalidOptions) || errors.Is(err, queue.ErrNilClient)) {
			t.Errorf("New(%+v) = %v, want an error saying %q", c.opts, err, c.want)
		}
	}
}
