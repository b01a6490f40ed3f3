package ctl_test

import (
	"context"
	"strings"
	"testing"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
)

// TestScheduleTracesWhenOTELEnvSaysSo: with OTEL_TRACES_EXPORTER=console,
// timerctl schedule writes its schedule span to stderr (flushed before it
// returns) and the timer carries that trace to its fire; without it,
// nothing is traced and stdout stays the command's output alone.
func TestScheduleTracesWhenOTELEnvSaysSo(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		c := newCLI(t, b)
		traces := keyspace.Shard(c.ns, 0, 1).Traces()
		for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME"} {
			t.Setenv(k, "")
		}
		t.Setenv("OTEL_TRACES_EXPORTER", "")
		r := c.ok("schedule", "plain", "--in", "1h")
		if strings.Contains(r.stderr, "timerq.schedule") {
			t.Fatalf("untraced timerctl wrote spans: %q", r.stderr)
		}
		if n, _ := b.Client.Exists(context.Background(), traces).Result(); n != 0 {
			t.Fatalf("untraced timerctl schedule wrote %s", traces)
		}

		t.Setenv("OTEL_TRACES_EXPORTER", "console")
		r = c.ok("schedule", "traced", "--in", "1h", "-o", "json")
		if !strings.Contains(r.stderr, `"Name":"timerq.schedule"`) || !strings.Contains(r.stderr, `"Value":"timerctl"`) {
			t.Fatalf("stderr lacks the schedule span of service timerctl: %q", r.stderr)
		}
		if strings.Contains(r.stdout, "timerq.schedule") {
			t.Fatalf("spans went to stdout, into the JSON: %q", r.stdout)
		}
		tp, err := b.Client.HGet(context.Background(), traces, "traced").Result()
		if err != nil || !strings.HasPrefix(tp, "00-") || !strings.Contains(r.stderr, tp[3:35]) {
			t.Fatalf("traced timer stores %q, %v; want the traceparent of the span on stderr", tp, err)
		}

		t.Setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
		if r := c.run("schedule", "x", "--in", "1h"); r.code != 2 || !strings.Contains(r.stderr, "carrier-pigeon") {
			t.Fatalf("a bad OTEL_TRACES_EXPORTER: exit %d %q, want 2", r.code, r.stderr)
		}
	})
}
