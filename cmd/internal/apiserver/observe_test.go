package apiserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/timerq/timerq/cmd/internal/apiserver"
)

// TestMetricsUseTheRoutePattern: request durations are counted by method,
// the ServeMux pattern and the status, never by the raw path; requests
// its routes refuse are counted under their route.
func TestMetricsUseTheRoutePattern(t *testing.T) {
	file, tok := tokens(t, "r namespaces=orders rights=read")
	s := start(t, apiserver.Config{TokensFile: file}, fakeAPI())
	s.do(t, "GET", "/v1/namespaces/orders/timers/t-123", tok["r"])
	s.do(t, "GET", "/v1/namespaces/orders/timers/t-456", tok["r"])
	s.do(t, "GET", "/v1/namespaces/orders/timers/t-789", "")
	s.do(t, "GET", "/v1/namespaces/orders/nothing-here/x", tok["r"])
	s.do(t, "BREW", "/v1/namespaces/orders/timers/t-1", tok["r"])

	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "http_server_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var key []string
			for _, l := range m.GetLabel() {
				key = append(key, l.GetName()+"="+l.GetValue())
				if strings.Contains(l.GetValue(), "t-") {
					t.Errorf("label %s=%q holds a raw path", l.GetName(), l.GetValue())
				}
			}
			counts[strings.Join(key, ",")] = m.GetHistogram().GetSampleCount()
		}
	}
	for k, n := range map[string]uint64{
		"http_request_method=GET,http_response_status_code=200,http_route=/v1/namespaces/{ns}/timers/{id}": 2,
		"http_request_method=GET,http_response_status_code=401,http_route=/v1/namespaces/{ns}/timers/{id}": 1,
		"http_request_method=GET,http_response_status_code=404,http_route=":                                1,
		"http_request_method=_OTHER,http_response_status_code=405,http_route=":                             1,
	} {
		if counts[k] != n {
			t.Errorf("%s: %d requests, want %d; all series: %v", k, counts[k], n, counts)
		}
	}
	if n := testutil.CollectAndCount(s.reg, "http_server_active_requests"); n == 0 {
		t.Error("no http_server_active_requests series")
	}
}

// TestTraceparentContinues: a caller's W3C traceparent becomes the parent
// of the request's server span, and the spans the handler makes (as the
// queue's timerq.schedule) are its children: one trace from the caller to
// the timer.
func TestTraceparentContinues(t *testing.T) {
	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	seen := make(chan trace.SpanContext, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/namespaces/{ns}/timers", func(w http.ResponseWriter, r *http.Request) {
		_, span := tp.Tracer("queue").Start(r.Context(), "timerq.schedule")
		span.End()
		seen <- trace.SpanContextFromContext(r.Context())
		w.WriteHeader(http.StatusCreated)
	})
	s := start(t, apiserver.Config{TracerProvider: tp}, mux)
	resp, _ := s.do(t, "POST", "/v1/namespaces/orders/timers", "", "traceparent", "00-"+traceID+"-"+callerSpan+"-01")
	if resp.StatusCode != 201 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	<-seen
	var server, schedule sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		switch sp.Name() {
		case "POST /v1/namespaces/{ns}/timers":
			server = sp
		case "timerq.schedule":
			schedule = sp
		}
	}
	if server == nil || schedule == nil {
		var names []string
		for _, sp := range rec.Ended() {
			names = append(names, sp.Name())
		}
		t.Fatalf("spans %v: want a server span named by the route, and timerq.schedule", names)
	}
	if server.SpanKind() != trace.SpanKindServer || server.Parent().TraceID().String() != traceID ||
		server.Parent().SpanID().String() != callerSpan || !server.Parent().IsRemote() {
		t.Errorf("server span: kind %v, parent %v; want a server span under the caller's %s", server.SpanKind(), server.Parent(), callerSpan)
	}
	if schedule.SpanContext().TraceID().String() != traceID || schedule.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("timerq.schedule in trace %s under %s, want trace %s under the server span", schedule.SpanContext().TraceID(), schedule.Parent().SpanID(), traceID)
	}
	found := false
	for _, a := range server.Attributes() {
		if a.Key == "http.response.status_code" && a.Value.AsInt64() == 201 {
			found = true
		}
	}
	if !found {
		t.Errorf("server span attributes %v: no http.response.status_code 201", server.Attributes())
	}

	// Without a tracer provider (tracing off in the worker), the caller's
	// context still reaches the handler, for the queue's spans to join.
	plain := start(t, apiserver.Config{}, mux)
	plain.do(t, "POST", "/v1/namespaces/orders/timers", "", "traceparent", "00-"+traceID+"-"+callerSpan+"-01")
	if sc := <-seen; sc.TraceID().String() != traceID || sc.SpanID().String() != callerSpan {
		t.Errorf("handler's span context %v, want the caller's %s/%s", sc, traceID, callerSpan)
	}
}

// TestAbortedRequestsAreCounted: a handler that aborts (panics with
// http.ErrAbortHandler, as a cut stream does) is counted as a 500 under
// its route.
func TestAbortedRequestsAreCounted(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/namespaces/{ns}/events", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	s := start(t, apiserver.Config{}, mux)
	req, _ := http.NewRequest("GET", s.URL()+"/v1/namespaces/x/events", nil)
	if resp, err := s.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("an aborted request answered %d", resp.StatusCode)
	}
	const series = `http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="500",http_route="/v1/namespaces/{ns}/events"} 1`
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "http_server_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["http_response_status_code"] == "500" && labels["http_route"] == "/v1/namespaces/{ns}/events" && m.GetHistogram().GetSampleCount() == 1 {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no %s", series)
	}
}
