package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/timerq/timerq/internal/keyspace"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/queue"
)

// newTracing returns a tracer provider that samples every span and records
// each one synchronously as it ends.
func newTracing(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

// tracesKey returns the traces hash of the shard that holds id.
func tracesKey(t *testing.T, q *queue.Queue, id string) string {
	t.Helper()
	ctx := context.Background()
	k, err := q.Inspect().ShardOf(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	n, err := q.Inspect().Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return keyspace.Shard(q.Namespace(), k, n).Traces()
}

// plainQueue returns a queue over q's namespace without a tracer provider.
func plainQueue(t *testing.T, b *redistest.Backend, q *queue.Queue) *queue.Queue {
	t.Helper()
	p, err := queue.New(b.Client, queue.Options{Namespace: q.Namespace(), Retention: q.Options().Retention})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// spansNamed returns the ended spans called name whose timer ID attribute
// is id (any, when id is empty).
func spansNamed(rec *tracetest.SpanRecorder, name, id string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() != name {
			continue
		}
		if id == "" || attr(s, "timerq.timer.id").AsString() == id {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

// one returns the only ended span called name for timer id.
func one(t *testing.T, rec *tracetest.SpanRecorder, name, id string) sdktrace.ReadOnlySpan {
	t.Helper()
	got := spansNamed(rec, name, id)
	if len(got) != 1 {
		var names []string
		for _, s := range rec.Ended() {
			names = append(names, s.Name()+"("+attr(s, "timerq.timer.id").String()+")")
		}
		t.Fatalf("%d %s spans for %q, want 1; ended spans: %v", len(got), name, id, names)
	}
	return got[0]
}

// A timer scheduled inside a trace fires and is handled in that trace:
// schedule span -> fire span (the worker's claim) and -> consume span (the
// handler), whose own spans are the handler's children.
func TestTraceFollowsTimerFromScheduleToFireToHandler(t *testing.T) {
	redistest.ForEachAll(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		tp, rec := newTracing(t)
		q := newQueue(t, b, queue.Options{TracerProvider: tp})
		app := tp.Tracer("app")

		pctx, parent := app.Start(ctx, "app.order")
		if _, err := q.Schedule(pctx, "order-1", time.Now().Add(-time.Second), []byte("expire")); err != nil {
			t.Fatal(err)
		}
		parent.End()
		// The same namespace without tracing (an application that does not
		// trace; with tracing on, a schedule outside any span is a root span
		// of its own).
		if _, err := plainQueue(t, b, q).Schedule(ctx, "untraced", time.Now().Add(-time.Second), nil); err != nil {
			t.Fatal(err)
		}

		sched := one(t, rec, "timerq.schedule", "order-1")
		if sched.Parent().SpanID() != parent.SpanContext().SpanID() || sched.SpanKind() != trace.SpanKindProducer {
			t.Fatalf("schedule span's parent = %v kind %v, want the app's span %v, producer",
				sched.Parent().SpanID(), sched.SpanKind(), parent.SpanContext().SpanID())
		}
		if attr(sched, "timerq.namespace").AsString() != q.Namespace() || attr(sched, "timerq.batch.created").AsInt64() != 1 {
			t.Fatalf("schedule span attributes = %v", sched.Attributes())
		}
		traceID := parent.SpanContext().TraceID()

		// The traced timer keeps the schedule span's traceparent; the other
		// stores nothing.
		want := "00-" + traceID.String() + "-" + sched.SpanContext().SpanID().String() + "-01"
		if got, err := b.Client.HGet(ctx, tracesKey(t, q, "order-1"), "order-1").Result(); err != nil || got != want {
			t.Fatalf("stored traceparent = %q, %v; want %q", got, err, want)
		}
		if n, err := b.Client.HExists(ctx, tracesKey(t, q, "untraced"), "untraced").Result(); err != nil || n {
			t.Fatalf("untraced timer has a traceparent: %v, %v", n, err)
		}

		if got := claimAll(t, q); len(got) != 2 {
			t.Fatalf("claimed %d, want 2", len(got))
		}
		fire := one(t, rec, "timerq.fire", "order-1")
		if fire.SpanContext().TraceID() != traceID || fire.Parent().SpanID() != sched.SpanContext().SpanID() || !fire.Parent().IsRemote() {
			t.Fatalf("fire span in trace %v with parent %v, want trace %v, remote parent %v (the schedule span)",
				fire.SpanContext().TraceID(), fire.Parent(), traceID, sched.SpanContext().SpanID())
		}
		// claimOf finds the claim span that fired a fire span's timer: the
		// one of its shard that fired something (one per shard here).
		claimOf := func(fire sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
			for _, c := range spansNamed(rec, "timerq.claim", "") {
				if attr(c, "timerq.claim.fired").AsInt64() > 0 && attr(c, "timerq.shard") == attr(fire, "timerq.shard") {
					return c
				}
			}
			t.Fatalf("no claim span fired shard %v", attr(fire, "timerq.shard").String())
			return nil
		}
		claim := claimOf(fire)
		if links := fire.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != claim.SpanContext().SpanID() {
			t.Fatalf("fire span links = %v, want the claim span %v", links, claim.SpanContext().SpanID())
		}
		if attr(fire, "timerq.timer.lateness_ms").AsInt64() < 1000 || attr(fire, "timerq.namespace").AsString() != q.Namespace() ||
			attr(fire, "timerq.shard").Type() != attribute.INT64 || fire.SpanKind() != trace.SpanKindConsumer {
			t.Fatalf("fire span attributes = %v, kind %v", fire.Attributes(), fire.SpanKind())
		}
		// An untraced timer gets no fire span; its claim span counts it.
		if u := spansNamed(rec, "timerq.fire", "untraced"); len(u) != 0 {
			t.Fatalf("untraced timer has %d fire spans, want none", len(u))
		}
		fired := int64(0)
		for _, c := range spansNamed(rec, "timerq.claim", "") {
			fired += attr(c, "timerq.claim.fired").AsInt64()
		}
		if fired != 2 {
			t.Fatalf("claim spans count %d fired timers, want 2", fired)
		}

		// The claim moved the traceparent into the fire event.
		if n, err := b.Client.HExists(ctx, tracesKey(t, q, "order-1"), "order-1").Result(); err != nil || n {
			t.Fatalf("traceparent still stored after the fire: %v, %v", n, err)
		}
		for _, e := range fireEntries(t, b, q) {
			tpField, ok := e.Values["traceparent"]
			switch e.Values["id"] {
			case "order-1":
				if tpField != want {
					t.Errorf("fire event of order-1 has traceparent %v, want %q", tpField, want)
				}
			default:
				if ok {
					t.Errorf("fire event of %v has traceparent %v", e.Values["id"], tpField)
				}
			}
		}

		var mu sync.Mutex
		handled := map[string]bool{}
		consumeAsync(t, q, "g", "c1", func(hctx context.Context, ev queue.Event) error {
			_, s := app.Start(hctx, "app.handle")
			s.SetAttributes(attribute.String("id", ev.ID))
			s.End()
			mu.Lock()
			defer mu.Unlock()
			handled[ev.ID] = true
			return nil
		}, queue.ConsumeOptions{Block: 50 * time.Millisecond})
		waitUntil(t, 10*time.Second, "both consume spans", func() bool {
			return len(spansNamed(rec, "timerq.consume", "")) == 2
		})
		cons := one(t, rec, "timerq.consume", "order-1")
		if cons.SpanContext().TraceID() != traceID || cons.Parent().SpanID() != sched.SpanContext().SpanID() {
			t.Fatalf("consume span in trace %v, parent %v; want trace %v, parent the schedule span %v",
				cons.SpanContext().TraceID(), cons.Parent().SpanID(), traceID, sched.SpanContext().SpanID())
		}
		if attr(cons, "timerq.consume.group").AsString() != "g" || attr(cons, "timerq.consume.attempt").AsInt64() != 1 ||
			attr(cons, "timerq.timer.lateness_ms").AsInt64() < 1000 {
			t.Fatalf("consume span attributes = %v", cons.Attributes())
		}
		var handle sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == "app.handle" && attr(s, "id").AsString() == "order-1" {
				handle = s
			}
		}
		if handle == nil || handle.Parent().SpanID() != cons.SpanContext().SpanID() {
			t.Fatalf("the handler's span is not a child of the consume span")
		}
		// The untraced timer's consume span starts a trace of its own.
		if u := one(t, rec, "timerq.consume", "untraced"); u.SpanContext().TraceID() == traceID || u.Parent().IsValid() {
			t.Fatalf("untraced consume span joined trace %v, parent %v", u.SpanContext().TraceID(), u.Parent())
		}
	})
}

// A batch is one schedule span, and each timer it creates carries it.
func TestScheduleBatchIsOneSpan(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		tp, rec := newTracing(t)
		q := newQueue(t, b, queue.Options{TracerProvider: tp})
		due := time.Now().Add(time.Hour)
		if _, err := q.Schedule(ctx, "b", due, nil); err != nil { // exists before the batch
			t.Fatal(err)
		}
		first := one(t, rec, "timerq.schedule", "b").SpanContext().SpanID().String()
		rec.Reset()
		ids := []string{"a", "b", "c"}
		var batch []queue.NewTimer
		for _, id := range ids {
			batch = append(batch, queue.NewTimer{ID: id, Due: due})
		}
		if _, err := q.ScheduleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		spans := spansNamed(rec, "timerq.schedule", "")
		if len(spans) != 1 || attr(spans[0], "timerq.batch.size").AsInt64() != 3 || attr(spans[0], "timerq.batch.created").AsInt64() != 2 {
			t.Fatalf("schedule spans = %d, attributes %v; want one of a batch of 3 that created 2", len(spans), spans[0].Attributes())
		}
		for _, id := range ids {
			got, err := b.Client.HGet(ctx, tracesKey(t, q, id), id).Result()
			switch {
			case id == "b" && (err != nil || !strings.Contains(got, first)):
				t.Errorf("existing timer b stores %q, %v; want the context of the span that created it, %s", got, err, first)
			case id != "b" && !strings.Contains(got, spans[0].SpanContext().SpanID().String()):
				t.Errorf("timer %s stores %q, %v; want the batch span's context", id, got, err)
			}
		}
	})
}

// Without a sampled span in ctx, nothing more than an untraced timer is
// written: no traces key, no traceparent in the fire event. With a sampled
// span in ctx but no tracer provider, the caller's context is carried.
func TestTracingOffWritesNothingExtra(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		neverTP := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
		t.Cleanup(func() { _ = neverTP.Shutdown(ctx) })
		unsampled := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: 0,
		}))
		for name, o := range map[string]struct {
			opts queue.Options
			ctx  context.Context
		}{
			"no provider, no span":          {queue.Options{}, ctx},
			"no provider, unsampled parent": {queue.Options{}, unsampled},
			"never-sampling provider":       {queue.Options{TracerProvider: neverTP}, ctx},
		} {
			t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
				q := newQueue(t, b, o.opts)
				if _, err := q.Schedule(o.ctx, "x", time.Now().Add(-time.Second), nil); err != nil {
					t.Fatal(err)
				}
				if _, err := q.ScheduleBatch(o.ctx, []queue.NewTimer{{ID: "y", Due: time.Now().Add(-time.Second)}}); err != nil {
					t.Fatal(err)
				}
				if keys := nsKeys(t, b, q); strings.Contains(strings.Join(keys, " "), ":traces") {
					t.Fatalf("untraced schedules wrote %v", keys)
				}
				if got := claimAll(t, q); len(got) != 2 {
					t.Fatalf("claimed %d", len(got))
				}
				for _, e := range fireEntries(t, b, q) {
					if len(e.Values) != 4 {
						t.Fatalf("fire event fields = %v, want id, due, fired, payload", e.Values)
					}
				}
			})
		}

		// No provider, but a sampled span from the application's own
		// tracing: the fire still joins the application's trace.
		q := newQueue(t, b, queue.Options{})
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{0xcd, 2}, TraceFlags: trace.FlagsSampled,
		})
		if _, err := q.Schedule(trace.ContextWithSpanContext(ctx, sc), "z", time.Now().Add(-time.Second), nil); err != nil {
			t.Fatal(err)
		}
		claimAll(t, q)
		want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		if e := fireEntries(t, b, q); len(e) != 1 || e[0].Values["traceparent"] != want {
			t.Fatalf("fire events = %v, want one with traceparent %s", e, want)
		}
	})
}

// A cancelled traced timer's traceparent goes when its record is purged;
// a foreign type in the traces key refuses a traced schedule and a claim
// before they write anything, and the claim span records the error.
func TestTracesKeyIsCleanedAndChecked(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		tp, rec := newTracing(t)
		q := newQueue(t, b, queue.Options{TracerProvider: tp, Retention: time.Millisecond})
		tctx, span := tp.Tracer("app").Start(ctx, "app")
		defer span.End()
		if _, err := q.Schedule(tctx, "c", time.Now().Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		key := tracesKey(t, q, "c")
		if n, _ := b.Client.HLen(ctx, key).Result(); n != 1 {
			t.Fatalf("traces hash has %d fields, want 1", n)
		}
		if _, err := q.Cancel(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		// Wait for the retention to pass on the server's clock.
		if b.Mini != nil {
			b.Mini.SetTime(time.Now().Add(time.Second))
		}
		waitUntil(t, 5*time.Second, "the cancelled timer's purge", func() bool {
			n, _, err := q.Engine().Purge(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			return n == 1
		})
		if n, err := b.Client.Exists(ctx, key).Result(); err != nil || n != 0 {
			t.Fatalf("traces hash still exists after the purge: %d, %v", n, err)
		}

		if err := b.Client.Set(ctx, key, "foreign", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Schedule(tctx, "d", time.Now().Add(-time.Second), nil); !errors.Is(err, queue.ErrWrongType) || !strings.Contains(err.Error(), key) {
			t.Fatalf("traced Schedule over a foreign traces key = %v, want ErrWrongType naming %s", err, key)
		}
		if _, err := q.Get(ctx, "d"); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("the refused schedule wrote d: %v", err)
		}
		s := one(t, rec, "timerq.schedule", "d")
		if s.Status().Code != codes.Error {
			t.Fatalf("refused schedule span status = %v", s.Status())
		}
		// An untraced schedule does not read the traces key; its claim does.
		if _, err := plainQueue(t, b, q).Schedule(ctx, "e", time.Now().Add(-time.Second), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Engine().Claim(ctx, 10); !errors.Is(err, queue.ErrWrongType) {
			t.Fatalf("Claim over a foreign traces key = %v", err)
		}
		if tm, err := q.Get(ctx, "e"); err != nil || tm.State != queue.StateScheduled {
			t.Fatalf("the refused claim changed e: %+v, %v", tm, err)
		}
		claims := spansNamed(rec, "timerq.claim", "")
		if len(claims) != 1 || claims[0].Status().Code != codes.Error {
			t.Fatalf("claim spans = %d, want one with an error status", len(claims))
		}
	})
}
