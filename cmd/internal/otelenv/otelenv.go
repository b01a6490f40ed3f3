// Package otelenv switches OpenTelemetry tracing on in timerq's binaries
// from the standard OTEL_* environment variables. It is off by default. The
// OpenTelemetry SDK and exporters are imported here, by the binaries, and
// not by the library packages (queue and poller depend only on the otel
// API), so an application that embeds timerq links only what it uses.
//
// Tracing is on when OTEL_TRACES_EXPORTER names an exporter, or, with
// OTEL_TRACES_EXPORTER unset, when an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turns it off.
//
// Exporters: otlp (OTLP over HTTP/protobuf; the exporter reads
// OTEL_EXPORTER_OTLP_* itself: endpoint, headers, timeout, TLS) and console
// (one JSON span a line, on the stream the binary gives, stderr). The SDK
// reads OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_* and OTEL_SPAN_*_LIMIT; the
// resource takes OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over the
// binary's own name.
package otelenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/timerq/timerq/cmd/internal/cliconf"
)

// Provider is the tracing a binary set up from the environment.
type Provider struct {
	// TracerProvider is nil when tracing is off; give it to
	// queue.Options.TracerProvider.
	TracerProvider trace.TracerProvider
	// Exporters names the exporters in use ("otlp", "console"); empty when
	// tracing is off.
	Exporters []string

	sdk *sdktrace.TracerProvider
}

// Shutdown flushes the spans not yet exported and stops the exporters,
// within ctx. It is a no-op when tracing is off.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// UsageError is a bad OTEL_* value: the binaries exit with a usage error.
type UsageError struct {
	Problem, Fix string
}

func (e *UsageError) Error() string { return e.Problem + ": " + e.Fix }

// Setup reads the environment (os.Getenv, as the SDK does) and returns the
// tracing it asks for: a Provider with a nil TracerProvider when tracing is
// off. service and version name the binary in the spans' resource (its
// service.name, unless OTEL_SERVICE_NAME says otherwise); console is where
// the console exporter writes. The caller must Shutdown the Provider on exit,
// or the last spans are lost.
func Setup(ctx context.Context, service, version string, console io.Writer) (*Provider, error) {
	names, err := exporters()
	if err != nil || len(names) == 0 {
		return &Provider{}, err
	}
	var opts []sdktrace.TracerProviderOption
	for _, name := range names {
		var exp sdktrace.SpanExporter
		switch name {
		case "otlp":
			if err := checkProtocol(); err != nil {
				return nil, err
			}
			exp, err = otlptracehttp.New(ctx)
		case "console":
			exp, err = stdouttrace.New(stdouttrace.WithWriter(console))
		}
		if err != nil {
			return nil, fmt.Errorf("OpenTelemetry %s exporter: %w", name, err)
		}
		// Batched: spans leave the process off the claim path, at most
		// OTEL_BSP_MAX_QUEUE_SIZE of them waiting (the rest are dropped, never
		// blocking a claim).
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", service)}
	if version != "" {
		attrs = append(attrs, attribute.String("service.version", version))
	}
	// Later detectors win: the environment over the binary's own name.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(),
		resource.WithHost(), resource.WithProcessPID(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, &UsageError{Problem: "OTEL_RESOURCE_ATTRIBUTES: " + err.Error(),
			Fix: "give comma-separated key=value pairs, e.g. OTEL_RESOURCE_ATTRIBUTES=deployment.environment=prod"}
	}
	sdk := sdktrace.NewTracerProvider(append(opts, sdktrace.WithResource(res))...)
	return &Provider{TracerProvider: sdk, Exporters: names, sdk: sdk}, nil
}

// SetupBinary is Setup for timerctl and timerworker, whose errors are
// *cliconf.Error: a bad OTEL_* value a usage error, and either pointing at
// docs/tracing.md.
func SetupBinary(ctx context.Context, service, version string, console io.Writer) (*Provider, error) {
	p, err := Setup(ctx, service, version, console)
	var uerr *UsageError
	switch {
	case errors.As(err, &uerr):
		return nil, &cliconf.Error{Code: cliconf.ExitUsage, Problem: uerr.Problem, Fix: uerr.Fix + " (docs/tracing.md)", Err: err}
	case err != nil:
		return nil, &cliconf.Error{Problem: "cannot start OpenTelemetry tracing: " + err.Error(),
			Fix: "fix the OTEL_* environment variables, or unset OTEL_TRACES_EXPORTER to run without tracing (docs/tracing.md)", Err: err}
	}
	return p, nil
}

// exporters returns the trace exporters the environment asks for; none
// means tracing is off.
func exporters() ([]string, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	v, set := os.LookupEnv("OTEL_TRACES_EXPORTER")
	v = strings.TrimSpace(v)
	if !set || v == "" {
		// The specification's default exporter is otlp, but a binary that
		// sends spans to localhost:4318 unasked is not "off by default":
		// an endpoint is the sign that a collector is there.
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
			return []string{"otlp"}, nil
		}
		return nil, nil
	}
	var out []string
	for _, name := range strings.Split(v, ",") {
		switch name = strings.ToLower(strings.TrimSpace(name)); name {
		case "none":
			return nil, nil
		case "otlp", "console":
			out = append(out, name)
		default:
			return nil, &UsageError{Problem: fmt.Sprintf("OTEL_TRACES_EXPORTER=%s: %q is not an exporter timerq has", v, name),
				Fix: "use otlp (OTLP over HTTP), console (spans as JSON on stderr) or none"}
		}
	}
	return out, nil
}

// checkProtocol refuses an OTLP protocol other than HTTP/protobuf, the
// only one built in (gRPC would add its weight to every binary).
func checkProtocol() error {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		v := strings.TrimSpace(os.Getenv(k))
		if v == "" {
			continue
		}
		if v != "http/protobuf" {
			return &UsageError{Problem: fmt.Sprintf("%s=%s is not supported", k, v),
				Fix: "timerq exports OTLP over HTTP/protobuf only: unset it or use http/protobuf, and point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP port (4318)"}
		}
		return nil // the traces-specific one wins
	}
	return nil
}
