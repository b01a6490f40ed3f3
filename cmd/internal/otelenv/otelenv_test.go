package otelenv_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/timerq/timerq/cmd/internal/otelenv"
)

// clearEnv unsets, for the test, every variable that switches tracing on.
func clearEnv(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, "")
	}
}

// spanOnce makes one span through p and flushes it.
func spanOnce(t *testing.T, p *otelenv.Provider, name string) {
	t.Helper()
	_, s := p.TracerProvider.Tracer("test").Start(context.Background(), name)
	s.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestOffByDefault(t *testing.T) {
	clearEnv(t)
	for name, env := range map[string][2]string{
		"nothing set":        {"", ""},
		"exporter none":      {"OTEL_TRACES_EXPORTER", "none"},
		"SDK disabled":       {"OTEL_SDK_DISABLED", "true"},
		"protocol, no where": {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"},
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			if name == "exporter none" || name == "SDK disabled" {
				// They win over an endpoint.
				t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1/v1/traces")
			}
			if env[0] != "" {
				t.Setenv(env[0], env[1])
			}
			p, err := otelenv.Setup(context.Background(), "svc", "", io.Discard)
			if err != nil || p.TracerProvider != nil || len(p.Exporters) != 0 {
				t.Fatalf("Setup = %+v, %v; want tracing off", p, err)
			}
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestConsoleExporterWritesSpansWithTheServiceName(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	var buf bytes.Buffer
	p, err := otelenv.Setup(context.Background(), "timerworker", "v1.2.3", &buf)
	if err != nil {
		t.Fatal(err)
	}
	spanOnce(t, p, "span-one")
	for _, want := range []string{`"Name":"span-one"`, `"Value":"timerworker"`, `"Value":"v1.2.3"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("console output lacks %s:\n%s", want, buf.String())
		}
	}

	// OTEL_SERVICE_NAME wins over the binary's name.
	t.Setenv("OTEL_SERVICE_NAME", "orders-worker")
	buf.Reset()
	if p, err = otelenv.Setup(context.Background(), "timerworker", "", &buf); err != nil {
		t.Fatal(err)
	}
	spanOnce(t, p, "span-two")
	if !strings.Contains(buf.String(), `"Value":"orders-worker"`) || strings.Contains(buf.String(), `"Value":"timerworker"`) {
		t.Errorf("OTEL_SERVICE_NAME not applied:\n%s", buf.String())
	}
}

// collector is an OTLP/HTTP trace receiver.
type collector struct {
	srv   *httptest.Server
	mu    sync.Mutex
	names []string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c.names = append(c.names, s.Name)
				}
			}
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) spans() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.names...)
}

// An OTLP endpoint alone switches tracing on, exporting over HTTP.
func TestOTLPEndpointSwitchesTracingOn(t *testing.T) {
	clearEnv(t)
	c := newCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.srv.URL)
	p, err := otelenv.Setup(context.Background(), "svc", "", io.Discard)
	if err != nil || p.TracerProvider == nil || strings.Join(p.Exporters, ",") != "otlp" {
		t.Fatalf("Setup = %+v, %v; want otlp on", p, err)
	}
	spanOnce(t, p, "exported")
	if got := c.spans(); len(got) != 1 || got[0] != "exported" {
		t.Fatalf("collector received %v, want [exported]", got)
	}
}

func TestBadValuesAreUsageErrors(t *testing.T) {
	for _, tc := range []struct{ k, v, want string }{
		{"OTEL_TRACES_EXPORTER", "jaeger", `"jaeger" is not an exporter`},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json", "http/protobuf"},
	} {
		clearEnv(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
		t.Setenv(tc.k, tc.v)
		_, err := otelenv.Setup(context.Background(), "svc", "", io.Discard)
		var uerr *otelenv.UsageError
		if !errors.As(err, &uerr) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want a usage error saying %q", tc.k, tc.v, err, tc.want)
		}
	}
}
