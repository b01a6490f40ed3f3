package queue

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// A traceparent that traceparent writes parses back to the same span
// context, remote; anything else (written by something other than timerq)
// is no parent at all.
func TestTraceparentRoundTrip(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 2: 0x2f, 15: 0x36}, SpanID: trace.SpanID{0x00, 0xf0, 7: 0x67}, TraceFlags: trace.FlagsSampled,
	})
	tp := traceparent(sc)
	if tp != "00-4bf92f00000000000000000000000036-00f0000000000067-01" {
		t.Fatalf("traceparent = %q", tp)
	}
	ctx, ok := withRemoteParent(context.Background(), tp)
	got := trace.SpanContextFromContext(ctx)
	if !ok || !got.IsRemote() || got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsSampled() {
		t.Fatalf("withRemoteParent(%q) = %v, %v", tp, got, ok)
	}
	if traceparent(trace.NewSpanContext(trace.SpanContextConfig{TraceID: sc.TraceID(), SpanID: sc.SpanID()})) != "" {
		t.Error("an unsampled span context gave a traceparent")
	}
	for _, bad := range []string{"", "garbage", strings.Replace(tp, "00-", "01-", 1), tp + "-x", strings.Replace(tp, "4bf9", "zzzz", 1),
		"00-00000000000000000000000000000000-00f0000000000067-01", strings.Replace(tp, "-01", "-0g", 1)} {
		if ctx, ok := withRemoteParent(context.Background(), bad); ok || trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("withRemoteParent(%q) accepted it", bad)
		}
	}
}
