package main

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/timerq/timerq/queue"
)

// otlpSpan is a span an OTLP/HTTP collector received, with its service.
type otlpSpan struct {
	service string
	span    *tracepb.Span
}

// otlpCollector is an OTLP/HTTP trace receiver.
type otlpCollector struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	c := &otlpCollector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			service := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c.spans = append(c.spans, otlpSpan{service, s})
				}
			}
		}
		c.mu.Unlock()
		b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// find returns the received span called name whose timerq.timer.id is id.
func (c *otlpCollector) find(name, id string) (otlpSpan, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.spans {
		if s.span.Name != name {
			continue
		}
		for _, a := range s.span.Attributes {
			if a.Key == "timerq.timer.id" && a.GetValue().GetStringValue() == id {
				return s, true
			}
		}
	}
	return otlpSpan{}, false
}

// TestWorkerTracesWhenOTELEnvSaysSo: with OTEL_EXPORTER_OTLP_ENDPOINT set,
// timerworker exports the fire span of a timer that an application
// scheduled inside its trace, in that trace, as a child of the schedule
// span; a bad OTEL_TRACES_EXPORTER is a usage error.
func TestWorkerTracesWhenOTELEnvSaysSo(t *testing.T) {
	col := newOTLPCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.srv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // export within 50 ms, not 5 s
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	addr := freeAddr(t)
	w := startWorker(t, "--dev", "--dev-addr", addr)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	waitFor(t, 5*time.Second, "the dev Redis", func() bool { return rdb.Ping(context.Background()).Err() == nil })

	// The application: its own tracer provider, recording in memory.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	q, err := queue.New(rdb, queue.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx, span := tp.Tracer("app").Start(context.Background(), "app.request")
	if _, err := q.Schedule(ctx, "traced", time.Now().Add(50*time.Millisecond), nil); err != nil {
		t.Fatal(err)
	}
	span.End()
	var sched sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "timerq.schedule" {
			sched = s
		}
	}
	if sched == nil {
		t.Fatal("no schedule span recorded")
	}

	var fire otlpSpan
	waitFor(t, 10*time.Second, "the worker to export the fire span", func() bool {
		var ok bool
		fire, ok = col.find("timerq.fire", "traced")
		return ok
	})
	if got, want := hex.EncodeToString(fire.span.TraceId), sched.SpanContext().TraceID().String(); got != want {
		t.Errorf("fire span in trace %s, want the application's %s", got, want)
	}
	if got, want := hex.EncodeToString(fire.span.ParentSpanId), sched.SpanContext().SpanID().String(); got != want {
		t.Errorf("fire span's parent %s, want the schedule span %s", got, want)
	}
	if fire.service != "timerworker" {
		t.Errorf("fire span's service.name = %q, want timerworker", fire.service)
	}
	if code, _ := w.term(); code != 0 {
		t.Errorf("exit %d; log:\n%s", code, w.logText())
	}
	if !strings.Contains(w.logText(), "tracing on") {
		t.Errorf("log does not say tracing is on:\n%s", w.logText())
	}

	if out, err := exec.Command(binary(t), "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Errorf("--help does not say how to switch tracing on (%v):\n%s", err, out)
	}
	cmd := exec.Command(binary(t), "--dev", "--dev-addr", freeAddr(t))
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=zipkin")
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), `"zipkin" is not an exporter`) {
		t.Errorf("OTEL_TRACES_EXPORTER=zipkin: exit %d %q, want 2 and the reason", code, out)
	}
}
