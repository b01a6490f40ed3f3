package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// tracing is the bench's OpenTelemetry set-up for Config.Trace: an
// OTLP/HTTP sink in this process that counts the spans it receives and
// drops them (a collector's work, not timerq's), the bench's own tracer
// provider exporting to it, and the environment that makes each
// timerworker export to it too.
type tracing struct {
	srv   *http.Server
	url   string
	spans atomic.Int64
	tp    *sdktrace.TracerProvider
}

func startTracing(ctx context.Context) (*tracing, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: OTLP sink: %w", err)
	}
	t := &tracing{url: "http://" + ln.Addr().String()}
	t.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err != nil || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		n := 0
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
			}
		}
		t.spans.Add(int64(n))
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	})}
	go func() { _ = t.srv.Serve(ln) }()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(t.url+"/v1/traces"))
	if err != nil {
		_ = t.srv.Close()
		return nil, fmt.Errorf("bench: OTLP exporter: %w", err)
	}
	// Every span sampled, as OTEL_TRACES_SAMPLER's default does for a root.
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "timerbench"))))
	return t, nil
}

// workerEnv makes a timerworker trace to the sink (or, with t nil, makes
// sure it does not, whatever the bench's own environment says).
func (t *tracing) workerEnv() []string {
	if t == nil {
		return []string{"OTEL_TRACES_EXPORTER=none"}
	}
	return []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT=" + t.url, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="}
}

// received flushes the bench's spans and returns how many spans the sink
// has received from every process.
func (t *tracing) received(ctx context.Context) int64 {
	if t == nil {
		return 0
	}
	_ = t.tp.ForceFlush(ctx)
	return t.spans.Load()
}

func (t *tracing) close() {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = t.tp.Shutdown(ctx)
	_ = t.srv.Close()
}
